"""How ``gatecast serve`` uses the intake: start a supervisor or adopt the running one,
stay attached while serving, start a new one if it is ever gone."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from gatecast.intake import supervisor as sup

#: how long ``serve`` waits for a new intake to serve
START_SECONDS = 60.0
#: how often ``serve`` checks that its intake still answers
CHECK_SECONDS = 2.0


class IntakeError(RuntimeError):
    """The intake did not start (the message says why; its output is above)."""


class Intake:
    """The folder's intake as one ``serve`` sees it: adopted or started, then attached
    until :meth:`detach`."""

    def __init__(self, folder: Path, host: str, port: int, linger: float) -> None:
        self.folder = folder
        self.host = host
        self.port = port
        self.linger = linger
        self.url = ""
        self.adopted = False
        self.restarted = False
        self.pid = 0
        self._conn: socket.socket | None = None
        self._checked = 0.0

    def start(self) -> str:
        """Adopt the running intake (its handler restarted when the code installed now is
        not the one it runs) or start one; attach to it. Its URL."""
        running = sup.running_intake(self.folder)
        if running is not None:
            self.adopted = True
            answer = sup.request(self.folder, "upgrade", timeout=sup.READY_SECONDS + 10)
            self.restarted = bool(answer and answer.get("ok") and not answer.get("unchanged"))
        else:
            self._spawn()
        attached = sup.attach(self.folder)
        if attached is None:
            raise IntakeError(f"the intake of {self.folder} did not answer")
        self._conn, hello = attached
        self._take(hello)
        return self.url

    def _take(self, hello: dict[str, Any]) -> None:
        self.url = str(hello["url"])
        self.pid = int(hello["pid"])

    def _spawn(self) -> None:
        """Start a supervisor in a session of its own and wait until it serves."""
        with tempfile.TemporaryDirectory(prefix="gatecast-intake-") as tmp:
            ready = Path(tmp) / "ready"
            argv = [sys.executable, "-m", "gatecast.intake.supervisor"]
            argv += ["--folder", str(self.folder), "--host", self.host, "--port", str(self.port)]
            argv += ["--linger", str(self.linger), "--ready-file", str(ready)]
            popen = subprocess.Popen(argv, stdin=subprocess.DEVNULL, start_new_session=True)
            deadline = time.monotonic() + START_SECONDS
            while time.monotonic() < deadline:
                if ready.exists():
                    return
                if popen.poll() is not None:  # another serve's supervisor won the race?
                    if sup.running_intake(self.folder) is not None:
                        self.adopted = True
                        return
                    raise IntakeError(f"the intake exited ({popen.returncode}): see above")
                time.sleep(0.05)
            popen.terminate()
            raise IntakeError(f"the intake did not serve in {START_SECONDS:.0f} s")

    def keep_alive(self) -> None:
        """Start (and attach to) a new intake when this one is gone."""
        now = time.monotonic()
        if now - self._checked < CHECK_SECONDS:
            return
        self._checked = now
        if sup.running_intake(self.folder) is not None:
            return
        self.detach()
        self.port = self.port or _port_of(self.url)
        self.start()

    def detach(self) -> None:
        """No longer attached (the intake lingers, or stops at once with linger 0)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(OSError):
                conn.close()

    def stop(self) -> None:
        """Stop the intake (and every other ``serve`` attached to it)."""
        sup.request(self.folder, "stop", timeout=2 * sup.STOP_SECONDS + 20)
        self.detach()


def _port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1]) if url else 0
