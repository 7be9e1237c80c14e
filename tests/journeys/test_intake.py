"""The intake as a deployment runs it (docs/deploy.md): the supervisor started by systemd
socket activation (``systemd-socket-activate``, as ``gatecast-intake.socket`` does),
``gatecast web`` behind it; and the handler's imports (nothing of the web app).

* A webhook posted to the systemd-held port is received (and a wrong secret is not
  found); ``/healthz`` answers; the API answers 503 with ``Retry-After`` until
  ``gatecast web`` runs, then through the intake, with the client's address kept.
* A fresh import of the handler loads no API, dashboard, upload or spreadsheet code and no
  template engine; the supervisor loads nothing but the standard library.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.e2e.nothing_lost import free_port
from tests.journeys.harness import API_KEY, Workspace, wait_for

SECRET = "intake-journey-secret-0123456789"
SOCKET_ACTIVATE = shutil.which("systemd-socket-activate") or "/usr/bin/systemd-socket-activate"


def _modules_after(statement: str) -> set[str]:
    """The modules a fresh interpreter holds after ``statement``."""
    code = f"import json, sys\n{statement}\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    return set(json.loads(done.stdout.splitlines()[-1]))


def _listening(port: int) -> bool:
    """True once a socket listens on 127.0.0.1:``port`` (read from /proc: no connection
    is made, so nothing is started by looking)."""
    wanted = f"0100007F:{port:04X}"
    with open("/proc/net/tcp", encoding="ascii") as fh:
        next(fh)
        return any(f[1] == wanted and f[3] == "0A" for f in (line.split() for line in fh))


def test_the_handler_imports_nothing_of_the_web_app() -> None:
    loaded = _modules_after("import gatecast.intake.handler")
    heavy = ("pandas", "openpyxl", "python_calamine", "jinja2", "multipart")
    web_app = ("gatecast.web.api", "gatecast.web.dashboard", "gatecast.web.app")
    found = sorted(m for m in loaded if m.split(".")[0] in heavy or m.startswith(web_app))
    assert found == [], found
    assert "gatecast.web.webhook" in loaded


def test_the_supervisor_imports_the_standard_library_only() -> None:
    loaded = _modules_after("import gatecast.intake.supervisor")
    before = _modules_after("pass")  # the interpreter's own (site, the editable finder)
    ours = sorted(m for m in loaded - before if m.split(".")[0] not in sys.stdlib_module_names)
    assert ours == ["gatecast", "gatecast.intake", "gatecast.intake.supervisor"], ours


@pytest.mark.skipif(not Path(SOCKET_ACTIVATE).exists(), reason="no systemd-socket-activate")
def test_the_intake_under_systemd_socket_activation_receives_and_relays(
    ws: Workspace,
) -> None:
    ws.settings["GATECAST_WEBHOOK_SECRET"] = SECRET
    ws.run("db", "upgrade")
    instance = ws.link_sender()
    port = free_port()
    env = ws.env()
    setenv = [arg for name in env for arg in ("-E", name)]
    supervisor = ["-m", "gatecast.intake.supervisor", "--folder", str(ws.state_folder)]
    activate = subprocess.Popen(  # what gatecast-intake.socket + .service do
        [SOCKET_ACTIVATE, "-l", f"127.0.0.1:{port}", *setenv, sys.executable, *supervisor],
        cwd=ws.path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        # systemd-socket-activate binds a moment after it starts (longer on a busy machine)
        wait_for(lambda: _listening(port), timeout=30, what="the activation socket to listen")
        with httpx.Client(base_url=url, timeout=60) as client:
            # the socket listens before the supervisor runs: the first request starts it
            assert client.get("/healthz").json() == {"status": "ok"}
            event = {
                "event": "message_status",
                "instance_id": instance,
                "data": {"id": "intake-1", "status": "delivered", "timestamp": int(time.time())},
            }
            posted = client.post(f"/webhooks/gateway/{SECRET}", json=event)
            assert posted.status_code == 200, posted.text
            assert posted.json()["applied"] == 1
            assert client.post("/webhooks/gateway/wrong-secret", json=event).status_code == 404
            api = {"Authorization": f"Bearer {API_KEY}"}
            away = client.get("/api/v1/instances", headers=api)
            assert away.status_code == 503 and away.headers["retry-after"] == "5", away.text
            web = ws.spawn("web")
            wait_for(lambda: "gatecast web serving on" in web.output(), what="gatecast web")
            listed = client.get("/api/v1/instances", headers=api)
            assert listed.status_code == 200, listed.text
            assert instance in listed.text
            signed_out = client.get("/api/v1/instances")  # the web app's own answer
            assert signed_out.status_code == 401, signed_out.text
    finally:
        activate.terminate()  # SIGTERM: the supervisor stops its handlers
        output, _ = activate.communicate(timeout=90)
    assert activate.returncode == 0, output
    assert "gatecast intake receiving on" in output, output
    assert "Traceback" not in output, output
