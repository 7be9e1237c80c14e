"""The intake's supervisor: holds the public listening socket while handlers come and go.

``python -m gatecast.intake.supervisor --folder STATE [--host H --port P] [--linger S]``

Standard library only, so nothing it imports can crash it. It binds the public TCP socket
with a long backlog (or takes it from systemd: ``LISTEN_FDS``/``LISTEN_PID`` socket
activation), keeps it open for its whole life and runs the handler
(``python -m gatecast.intake.handler``) with the socket inherited. When the handler dies
(a crash, SIGKILL, out of memory) a new one starts at once (with a growing pause when
handlers keep dying young): connections arriving meanwhile wait in the kernel's accept
queue, none is refused.

It answers on a unix socket in the state folder (``gatecast-intake.sock``; the owner's
processes only: ``SO_PEERCRED``), one request per connection, a line each way:

* ``hello``: its pid, the URL it listens on, the handler's pid (JSON);
* ``attach``: a ``serve`` says it uses this intake; the connection stays open while it
  does (closed by its exit, even a SIGKILL). With ``--linger S``, the supervisor stops
  once nobody has been attached for S seconds (the default: it never stops by itself);
* ``restart``: start a new handler (the code on disk now), and once it serves, stop the
  old one after its requests are answered: no gap (SIGHUP does the same); ``upgrade``:
  the same when gatecast's code on disk changed since the handler started, else nothing;
* ``stop``: SIGTERM the other attached ``serve`` processes, wait for them to detach,
  stop the handler and exit (``gatecast stop``). SIGTERM and SIGINT stop the
  supervisor and its handler (not the ``serve`` processes).
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import hashlib
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

#: the control socket's file name in the state folder
CONTROL_FILE = "gatecast-intake.sock"
#: the web process's socket (API, dashboard, uploads) the handler forwards to
WEB_FILE = "gatecast-web.sock"
#: the listening socket's accept queue (the kernel caps it at ``net.core.somaxconn``):
#: the connections that wait while a handler restarts
BACKLOG = 4096
#: how long a new handler may take to serve
READY_SECONDS = 60.0
#: how long a stopping handler may take to answer its last requests
STOP_SECONDS = 60.0
#: how long a control request may take
REQUEST_SECONDS = 5.0
#: a handler that served at least this long before it died is restarted without a pause
STEADY_SECONDS = 5.0
#: the longest pause before restarting a handler that keeps dying young
BACKOFF_MAX_SECONDS = 10.0
#: the longest unix socket path (``sun_path`` holds 108 bytes with its NUL)
_MAX_SOCKET_PATH = 107
#: what the supervisor prints once its handler serves (``serve`` waits for its ready file)
READY_MARKER = "gatecast intake receiving on "


def unix_address(folder: Path, name: str) -> str:
    """The unix socket ``name`` in ``folder``: a file there, or (when that path is too
    long for a unix socket) an abstract name derived from it."""
    path = str(folder.resolve() / name)
    if len(path.encode()) <= _MAX_SOCKET_PATH:
        return path
    stem = name.split(".", 1)[0]
    return f"\0{stem}-" + hashlib.sha256(path.encode()).hexdigest()[:32]


def say(message: str) -> None:
    """One line on stderr (never fails: the terminal or log may be gone)."""
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.write(f"gatecast intake: {message}\n")
        sys.stderr.flush()


# ------------------------------------------------------------------ the client side
def request(folder: Path, command: str, timeout: float = REQUEST_SECONDS) -> dict[str, Any] | None:
    """Send ``command`` to ``folder``'s supervisor; its JSON answer, or None when none
    answers there."""
    conn = _connect(folder, timeout)
    if conn is None:
        return None
    with conn:
        try:
            conn.sendall(command.encode() + b"\n")
            answer = json.loads(_read_line(conn) or "null")
        except (OSError, ValueError):
            return None
    return answer if isinstance(answer, dict) else None


def running_intake(folder: Path) -> dict[str, Any] | None:
    """``hello`` of ``folder``'s supervisor (``pid``, ``url``, ``handler``), or None."""
    return request(folder, "hello")


def attach(folder: Path) -> tuple[socket.socket, dict[str, Any]] | None:
    """Attach to ``folder``'s supervisor: the connection to keep open while attached (close
    it to detach) and its ``hello``; None when none answers."""
    conn = _connect(folder, REQUEST_SECONDS)
    if conn is None:
        return None
    try:
        conn.sendall(b"attach\n")
        answer = json.loads(_read_line(conn) or "null")
    except (OSError, ValueError):
        conn.close()
        return None
    if not isinstance(answer, dict):
        conn.close()
        return None
    return conn, answer


def _connect(folder: Path, timeout: float) -> socket.socket | None:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.settimeout(timeout)
    try:
        conn.connect(unix_address(folder, CONTROL_FILE))
    except OSError:  # no file, or one nobody listens on (a killed supervisor's)
        conn.close()
        return None
    return conn


def _read_line(conn: socket.socket, limit: int = 4096) -> str:
    data = b""
    while not data.endswith(b"\n") and len(data) < limit:
        chunk = conn.recv(1)
        if not chunk:
            return ""
        data += chunk
    return data.decode("utf-8", "replace").strip()


# ------------------------------------------------------------------ the listening socket
def systemd_socket() -> socket.socket | None:
    """The first socket systemd passed (socket activation), or None."""
    if os.environ.get("LISTEN_PID") != str(os.getpid()):
        return None
    count = int(os.environ.get("LISTEN_FDS", "0") or 0)
    for name in ("LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"):
        os.environ.pop(name, None)  # not for the handler: it gets the socket by --fd
    if count < 1:
        return None
    for extra in range(4, 3 + count):
        with contextlib.suppress(OSError):
            os.close(extra)
    return socket.socket(fileno=3)


def bind(host: str, port: int, wait_seconds: float = 10.0) -> socket.socket:
    """A TCP socket listening on ``host:port`` with :data:`BACKLOG` (retried while a
    process on its way out still holds the port)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    deadline = time.monotonic() + wait_seconds
    while True:
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port))
            sock.listen(BACKLOG)
            return sock
        except OSError as exc:
            sock.close()
            if exc.errno != errno.EADDRINUSE or time.monotonic() >= deadline:
                raise
            time.sleep(0.1)


def url_of(sock: socket.socket) -> str:
    """``http://host:port`` of a listening TCP socket."""
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


def code_fingerprint() -> str:
    """What identifies the code a handler would run: the name, size and time of every
    Python file of gatecast's packages (changed by any upgrade or edit)."""
    root = Path(__file__).resolve().parents[2]
    digest = hashlib.sha256()
    for package in ("gatecast", "campaigns", "scheduler", "storage", "gateway"):
        for folder, dirs, files in os.walk(root / package):
            dirs.sort()
            for name in sorted(files):
                if name.endswith(".py"):
                    info = os.stat(os.path.join(folder, name))
                    digest.update(f"{folder}/{name} {info.st_size} {info.st_mtime_ns}\n".encode())
    return digest.hexdigest()


# ------------------------------------------------------------------ the supervisor
class Handler:
    """One handler process and when it started. A ``standby`` handler prepares (imports,
    settings, the database engine, the app) and waits for :meth:`promote` before it
    accepts: the spare that takes over at once when the serving one dies."""

    def __init__(self, sock: socket.socket, folder: Path, *, standby: bool = False) -> None:
        read, write = os.pipe()
        argv = [sys.executable, "-m", "gatecast.intake.handler", "--fd", str(sock.fileno())]
        argv += ["--ready-fd", str(write), "--folder", str(folder)]
        argv += ["--parent-pid", str(os.getpid())]
        fds = [sock.fileno(), write]
        self._go: int | None = None
        go_read = -1
        if standby:
            go_read, self._go = os.pipe()
            argv += ["--standby-fd", str(go_read)]
            fds.append(go_read)
        self.popen = subprocess.Popen(argv, pass_fds=fds, stdin=subprocess.DEVNULL)
        os.close(write)
        if go_read >= 0:
            os.close(go_read)
        self._said = os.fdopen(read, "rb", buffering=0)
        os.set_blocking(read, False)
        self._heard = b""
        self.started = time.monotonic()
        self.code = code_fingerprint()

    @property
    def pid(self) -> int:
        return self.popen.pid

    def wait_for(self, word: bytes, timeout: float = READY_SECONDS) -> bool:
        """Until the handler says ``word`` (``standby``: prepared; ``ready``: serving);
        False when it died or the time ran out."""
        deadline = time.monotonic() + timeout
        while word not in self._heard:
            if time.monotonic() >= deadline:
                return False
            try:
                chunk = self._said.read(64)
            except BlockingIOError:
                chunk = None
            except (OSError, ValueError):
                return False
            if chunk == b"":  # closed without the word: it died
                return False
            if chunk:
                self._heard += chunk
            else:
                time.sleep(0.01)
        return True

    def wait_ready(self, timeout: float = READY_SECONDS) -> bool:
        """Until the handler serves."""
        return self.wait_for(b"ready", timeout)

    def promote(self) -> bool:
        """Tell a standby handler to serve, and wait until it does."""
        if self._go is None:
            return self.wait_ready()
        try:
            os.write(self._go, b"go")
        except OSError:
            return False
        return self.wait_ready(10.0)

    def stop(self, timeout: float = STOP_SECONDS) -> None:
        """SIGTERM (it finishes its requests), SIGKILL after ``timeout``."""
        if self._go is not None:
            with contextlib.suppress(OSError):
                os.close(self._go)  # a standby handler exits on the closed pipe
            self._go = None
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                say(f"handler {self.pid} did not stop in {timeout:.0f} s: killed")
                self.popen.kill()
                self.popen.wait(10)
        with contextlib.suppress(OSError):
            self._said.close()


class Supervisor:
    """Keeps the listening socket and one serving handler; see the module docstring."""

    def __init__(self, sock: socket.socket, folder: Path, linger: float | None) -> None:
        self.sock = sock
        self.folder = folder
        self.linger = linger
        self.url = url_of(sock)
        self.stopping = threading.Event()
        self.done = threading.Event()
        self.lock = threading.Lock()  # the handler swap (restart) against the watch
        self.handler: Handler | None = None
        self.spare: Handler | None = None  # prepared, waiting to serve
        self.attached: dict[int, int] = {}  # connection id -> the attached process's pid
        self.attached_lock = threading.Lock()
        self.alone_since = time.monotonic()
        self.ever_attached = False
        self.restart_asked = threading.Event()
        self._pause_until = 0.0
        self.answering = threading.BoundedSemaphore(1)  # held while answering ``stop``
        self._control: socket.socket | None = None
        self._address = unix_address(folder, CONTROL_FILE)

    # -------------------------------------------------------------- the handler
    def start(self) -> bool:
        """Start the first handler and wait until it serves; then prepare a spare."""
        handler = Handler(self.sock, self.folder)
        if not handler.wait_ready():
            say(f"the handler (pid {handler.pid}) did not start: see above")
            handler.stop(5)
            return False
        self.handler = handler
        self.spare = Handler(self.sock, self.folder, standby=True)
        return True

    def restart(self) -> dict[str, Any]:
        """A new handler (and spare) on the code installed now; once it serves, the old one
        stops (both accept meanwhile)."""
        with self.lock:
            spare, self.spare = self.spare, None
            if spare is not None:
                spare.stop(5)
            new = Handler(self.sock, self.folder)
            if not new.wait_ready():
                new.stop(5)
                say("a new handler did not start; the running one serves on")
                self.spare = Handler(self.sock, self.folder, standby=True)
                return {"ok": False, "handler": self.handler.pid if self.handler else None}
            old, self.handler = self.handler, new
            self.spare = Handler(self.sock, self.folder, standby=True)
        say(f"handler {new.pid} serves; handler {old.pid if old else '-'} stops")
        if old is not None:
            threading.Thread(target=old.stop, daemon=True).start()
        return {"ok": True, "handler": new.pid}

    def upgrade(self) -> dict[str, Any]:
        """:meth:`restart` when the code on disk is not the serving handler's."""
        handler = self.handler
        if handler is not None and handler.code == code_fingerprint():
            return {"ok": True, "handler": handler.pid, "unchanged": True}
        return self.restart()

    def _watch(self) -> None:
        """Replace a dead handler at once: its spare serves, a new spare prepares (a
        growing pause when handlers keep dying young)."""
        pause = 0.0
        while not self.stopping.wait(0.05):
            if self.restart_asked.is_set():
                self.restart_asked.clear()
                self.restart()
            with self.lock:
                handler, spare = self.handler, self.spare
            if spare is not None and spare.popen.poll() is not None:
                say(f"spare handler {spare.pid} exited ({spare.popen.returncode})")
                with self.lock:
                    if self.spare is spare:
                        self.spare = None
                        spare.stop(1)
            if handler is None or handler.popen.poll() is None:
                waited = time.monotonic() >= self._pause_until  # no spare in a crash loop
                if self.spare is None and handler is not None and waited:
                    with self.lock:
                        if self.spare is None:
                            self.spare = Handler(self.sock, self.folder, standby=True)
                self._check_linger()
                continue
            young = time.monotonic() - handler.started < STEADY_SECONDS
            pause = min(BACKOFF_MAX_SECONDS, max(0.5, pause * 2)) if young else 0.0
            with self.lock:
                spare, self.spare = self.spare, None
            if spare is not None and spare.promote():
                with self.lock:
                    self.handler = spare
                say(
                    f"handler {handler.pid} exited ({handler.popen.returncode}); "
                    f"its spare {spare.pid} serves"
                )
                handler.stop(1)
                self._pause_until = time.monotonic() + pause
                continue
            if spare is not None:
                spare.stop(1)
            say(
                f"handler {handler.pid} exited ({handler.popen.returncode}); "
                + (f"a new one in {pause:.1f} s" if pause else "a new one now")
            )
            if pause and self.stopping.wait(pause):
                return
            self._pause_until = time.monotonic() + pause
            with self.lock:
                new = Handler(self.sock, self.folder)
                self.handler = new
            handler.stop(1)
            if new.wait_ready():
                say(f"handler {new.pid} serves")

    def _check_linger(self) -> None:
        with self.attached_lock:
            if self.linger is None or self.attached:
                return
        alone = time.monotonic() - self.alone_since
        wait = self.linger if self.ever_attached else max(self.linger, READY_SECONDS)
        if alone >= wait:
            say(f"no gatecast serve attached for {alone:.0f} s: stopping")
            self.stopping.set()

    # -------------------------------------------------------------- the control socket
    def listen(self) -> None:
        """Bind the control socket (a dead supervisor's file is replaced)."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        if not self._address.startswith("\0"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._address)
        old_umask = os.umask(0o177)
        try:
            sock.bind(self._address)
        finally:
            os.umask(old_umask)
        sock.listen(64)
        self._control = sock
        threading.Thread(target=self._accept, args=(sock,), daemon=True).start()

    def _accept(self, sock: socket.socket) -> None:
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            try:
                creds = conn.getsockopt(
                    socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")
                )
                peer, uid, _gid = struct.unpack("3i", creds)
                if uid != os.getuid():
                    return
                conn.settimeout(REQUEST_SECONDS)
                command = _read_line(conn)
                if command == "hello":
                    self._send(conn, self.hello())
                elif command == "attach":
                    self._attached(conn, peer)
                elif command == "restart":
                    conn.settimeout(None)
                    self._send(conn, self.restart())
                elif command == "upgrade":
                    conn.settimeout(None)
                    self._send(conn, self.upgrade())
                elif command == "stop":
                    conn.settimeout(None)
                    self.answering.acquire()  # the process waits for this answer
                    try:
                        self.stop_everything(peer)
                        self._send(conn, {"ok": True, "pid": os.getpid()})
                    finally:
                        self.answering.release()
            except OSError as exc:
                say(f"control request failed: {exc}")

    @staticmethod
    def _send(conn: socket.socket, answer: dict[str, Any]) -> None:
        conn.sendall(json.dumps(answer).encode() + b"\n")

    def hello(self) -> dict[str, Any]:
        handler = self.handler
        return {"pid": os.getpid(), "url": self.url, "handler": handler.pid if handler else None}

    def _attached(self, conn: socket.socket, peer: int) -> None:
        key = id(conn)
        with self.attached_lock:
            self.attached[key] = peer
            self.ever_attached = True
        try:
            self._send(conn, self.hello())
            conn.settimeout(None)
            while conn.recv(64):  # until the attached process closes it (or dies)
                pass
        except OSError:
            pass
        finally:
            with self.attached_lock:
                self.attached.pop(key, None)
                if not self.attached:
                    self.alone_since = time.monotonic()

    def stop_everything(self, asking: int) -> None:
        """SIGTERM the attached processes but ``asking``, wait until they detached, then
        stop (the handler, then this process)."""
        with self.attached_lock:
            others = {pid for pid in self.attached.values() if pid != asking}
        for pid in others:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_SECONDS
        while time.monotonic() < deadline:
            with self.attached_lock:
                left = {pid for pid in self.attached.values() if pid != asking}
            if not left:
                break
            time.sleep(0.1)
        self.stopping.set()
        self.done.wait(STOP_SECONDS + 10)

    # -------------------------------------------------------------- the life
    def run(self) -> int:
        """Serve until stopped; 0, or 1 when the first handler never served."""
        if not self.start():
            return 1
        self.listen()
        self.alone_since = time.monotonic()
        assert self.handler is not None
        say(f"{READY_MARKER}{self.url} (supervisor pid {os.getpid()}, handler {self.handler.pid})")
        try:
            self._watch()
        finally:
            self.shutdown()
        return 0

    def shutdown(self) -> None:
        """Stop answering, stop the handler, close the listening socket."""
        control, self._control = self._control, None
        if control is not None:
            control.close()
            if not self._address.startswith("\0"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self._address)
        with self.lock:
            handler, spare = self.handler, self.spare
        if spare is not None:
            spare.stop(5)
        if handler is not None:
            handler.stop()
        self.sock.close()
        say(f"supervisor {os.getpid()} stopped")
        self.done.set()


def main(argv: list[str] | None = None) -> int:
    """Run the supervisor (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m gatecast.intake.supervisor")
    parser.add_argument("--folder", type=Path, required=True, help="the state folder")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--linger", type=float, default=None, help="seconds; none: forever")
    parser.add_argument("--ready-file", type=Path, default=None)
    args = parser.parse_args(argv)
    folder: Path = args.folder
    folder.mkdir(parents=True, exist_ok=True)
    running = running_intake(folder)
    if running is not None:
        say(f"an intake already serves {folder} (pid {running['pid']}, {running['url']})")
        return 3
    sock = systemd_socket() or bind(args.host, args.port)
    supervisor = Supervisor(sock, folder, args.linger)
    signal.signal(signal.SIGTERM, lambda *_: supervisor.stopping.set())
    signal.signal(signal.SIGINT, lambda *_: supervisor.stopping.set())
    signal.signal(signal.SIGHUP, lambda *_: supervisor.restart_asked.set())
    if args.ready_file is not None:
        ready: Path = args.ready_file
        threading.Thread(target=_write_when_serving, args=(supervisor, ready), daemon=True).start()
    code = supervisor.run()
    if supervisor.answering.acquire(timeout=5):  # a ``stop`` being answered: let it finish
        supervisor.answering.release()
    return code


def _write_when_serving(supervisor: Supervisor, path: Path) -> None:
    """Write the URL to ``path`` once the control socket answers."""
    while not supervisor.stopping.is_set():
        if supervisor._control is not None:
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_text(supervisor.url + "\n", encoding="utf-8")
            os.replace(tmp, path)
            return
        time.sleep(0.02)


if __name__ == "__main__":
    sys.exit(main())
