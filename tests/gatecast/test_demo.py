"""``gatecast demo`` end to end in a subprocess (what ``make demo`` runs), twice."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gatecast.demo import NOT_ON_APP

ROOT = Path(__file__).resolve().parents[2]


def _demo_command(tmp_path: Path, *extra: str) -> tuple[list[str], dict[str, str]]:
    """``gatecast demo`` on a database in ``tmp_path``, and its environment (no settings)."""
    gatecast = Path(sys.executable).with_name("gatecast")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GATECAST_")}
    env["COLUMNS"] = "200"
    database = f"sqlite:///{tmp_path / 'demo.db'}"
    reports = str(tmp_path / "reports")
    return [str(gatecast), "demo", *extra, "--database", database, "--reports-dir", reports], env


def _demo(tmp_path: Path) -> subprocess.CompletedProcess[str]:
    command, env = _demo_command(tmp_path)
    return subprocess.run(
        command,
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.slow
def test_demo_exits_0_writes_reports_and_runs_again(tmp_path: Path) -> None:
    first = _demo(tmp_path)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    out = first.stdout
    assert "rejected rows" in out and "report written" in out
    csv_path = tmp_path / "reports" / "november-promo.csv"
    assert csv_path.exists() and (tmp_path / "reports" / "november-promo.xlsx").exists()
    assert (tmp_path / "reports" / "demo-qr.png").read_bytes()[:4] == b"\x89PNG"
    with csv_path.open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) >= 40
    states = {r.get("state") for r in rows}
    assert states & {"delivered", "read"}, states  # statuses came back through the webhook
    assert "failed" in states  # the sandbox's not-on-app numbers
    secret = (tmp_path / ".gatecast-webhook-secret").read_text().strip()
    assert secret not in out + first.stderr  # never printed in full

    second = _demo(tmp_path)  # a second `make demo` on the same database works too
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    with csv_path.open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert {r.get("state") for r in rows} & {"delivered", "read"}


@pytest.mark.slow
def test_demo_serve_says_how_to_sign_in_and_the_key_signs_in(tmp_path: Path) -> None:
    """``gatecast demo --serve`` prints where the owner key is (its output is a pipe here,
    as a log would be: never the key itself), and that key signs in on the page it names."""
    import queue
    import re
    import signal
    import threading

    import httpx

    command, env = _demo_command(tmp_path, "--serve")
    proc = subprocess.Popen(
        command,
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    assert proc.stdout is not None
    out = proc.stdout

    def read() -> None:
        for line in out:
            lines.put(line)

    threading.Thread(target=read, daemon=True).start()
    seen: list[str] = []
    try:
        hint = ""
        while not hint:
            line = lines.get(timeout=120)
            seen.append(line)
            hint = line if line.startswith("sign in at ") else ""
        key_file = tmp_path / ".gatecast-api-key"
        key = key_file.read_text().strip()
        assert f"the owner key kept in the file {key_file}" in hint, hint
        assert "API key box" in hint and "Users page" in hint
        found = re.search(r"sign in at (\S+)/login", hint)
        assert found is not None, hint
        answer = httpx.post(
            f"{found.group(1)}/login",
            data={"api_key": key, "next": "/campaigns"},
            follow_redirects=False,
            timeout=30,
        )
        assert answer.status_code == 303 and answer.headers["location"] == "/campaigns"
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    while not lines.empty():
        seen.append(lines.get_nowait())
    assert key not in "".join(seen)  # the key is never printed to a pipe or a log


@pytest.mark.slow
@pytest.mark.parametrize(
    ("gateway", "absent_as"),
    [
        # Evolution's number check finds numbers not on WhatsApp: skipped, never sent
        ("evolution", ("skipped", "not on WhatsApp (the gateway's number check)")),
        # WAHA takes them, then reports the message failed (message.ack ERROR, no code)
        ("waha", ("failed", "failed by the gateway")),
    ],
)
def test_demo_runs_against_another_gateway(
    tmp_path: Path, gateway: str, absent_as: tuple[str, str]
) -> None:
    """``gatecast demo --gateway evolution|waha``: the sandbox plays Evolution API v2 or
    WAHA and gatecast drives it (docs/gateways.md): the demo's numbers not on WhatsApp
    end as that gateway finds them, statuses come as its events (the seed varies:
    replies and STOPs are the journeys')."""
    command, env = _demo_command(tmp_path, "--gateway", gateway)
    done = subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"({gateway} dialect)" in done.stdout
    with (tmp_path / "reports" / "november-promo.csv").open(encoding="utf-8-sig") as fh:
        rows = list(csv.DictReader(fh))
    absent = [r for r in rows if r["target"].lstrip("+") in NOT_ON_APP]
    assert absent and {(r["state"], r["error"]) for r in absent} == {absent_as}, absent
    failed = {r["error"] for r in rows if r["state"] == "failed"}
    assert failed == ({absent_as[1]} if absent_as[0] == "failed" else set()), failed
    assert {r["state"] for r in rows} & {"delivered", "read"}  # its status events
