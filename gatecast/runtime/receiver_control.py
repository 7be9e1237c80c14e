"""One webhook receiver per state folder, and the hand-over of its listening socket.

A receiver (``gatecast receive``) answers control requests on a unix socket in its state
folder (next to the webhook journal, :func:`state_folder`). A receiver starting in the
same folder takes the running one's place without a gap:

1. it holds the folder's lock file (receivers starting in one folder take turns);
2. it asks the running receiver for its listening TCP socket, which comes back as a file
   descriptor (``SCM_RIGHTS``), and serves on it: both processes now accept from one
   kernel socket, one accept queue;
3. it binds the control socket in its place and tells the old receiver to stop; that
   one stops accepting, finishes its in-flight requests, drains its batcher and journal,
   and exits.

No connection is refused or reset by the hand-over: the listening socket is never closed
or bound again (re-binding, even with ``SO_REUSEPORT``, drops the connections queued on
the socket that closes). When no receiver answers, the new one binds the address itself.
Only processes of the same user may talk to the control socket (``SO_PEERCRED``).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import logging
import os
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from campaigns.inbox.journal import journal_path
from gatecast.runtime.http_server import listening_socket
from gatecast.settings import Settings
from storage.engine import Engine

log = logging.getLogger("gatecast.receiver")

#: the control socket's file name in the state folder
CONTROL_FILE = "gatecast-receiver.sock"
#: the lock file receivers starting in one folder take turns on
LOCK_FILE = "gatecast-receiver.lock"
#: the longest unix socket path (``sun_path`` holds 108 bytes with its NUL)
_MAX_SOCKET_PATH = 107
#: how long a control request may take (a receiver answers at once)
REQUEST_SECONDS = 5.0


class HandOverError(RuntimeError):
    """The running receiver could not hand its socket over (the message says why)."""


@dataclass(frozen=True)
class ReceiverInfo:
    """A running receiver: its process id and the URL it serves."""

    pid: int
    url: str


def control_address(folder: Path) -> str:
    """The control socket of ``folder``: a file in it, or (when that path is too long for
    a unix socket) an abstract name derived from it."""
    path = str(folder.resolve() / CONTROL_FILE)
    if len(path.encode()) <= _MAX_SOCKET_PATH:
        return path
    return "\0gatecast-receiver-" + hashlib.sha256(path.encode()).hexdigest()[:32]


def _url(host: str, port: int) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


def _same_user(conn: socket.socket) -> bool:
    """True when the peer of a unix socket runs as this process's user."""
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return bool(uid == os.getuid())


def _read_line(conn: socket.socket, limit: int = 4096) -> str:
    """One ``\\n``-terminated line from ``conn`` ('' when it closed first)."""
    data = b""
    while not data.endswith(b"\n") and len(data) < limit:
        chunk = conn.recv(1)
        if not chunk:
            return ""
        data += chunk
    return data.decode("utf-8", "replace").strip()


def _connect(folder: Path) -> socket.socket | None:
    """A connection to ``folder``'s receiver, or None when none listens there."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.settimeout(REQUEST_SECONDS)
    try:
        conn.connect(control_address(folder))
    except OSError:  # no file, or a file nobody listens on (a killed receiver's)
        conn.close()
        return None
    return conn


def running_receiver(folder: Path) -> ReceiverInfo | None:
    """The receiver serving ``folder``, or None when none answers."""
    conn = _connect(folder)
    if conn is None:
        return None
    with conn:
        try:
            conn.sendall(b"hello\n")
            answer = json.loads(_read_line(conn) or "null")
        except (OSError, ValueError):
            return None
    if not isinstance(answer, dict):
        return None
    return ReceiverInfo(int(answer["pid"]), str(answer["url"]))


class Predecessor:
    """The running receiver whose socket was taken: told to stop by :meth:`retire`."""

    def __init__(self, conn: socket.socket, info: ReceiverInfo) -> None:
        self._conn = conn
        self.info = info

    def retire(self) -> None:
        """Tell it to stop accepting, finish its requests and exit (not waited for)."""
        with self._conn:
            try:
                self._conn.sendall(b"stop\n")
                _read_line(self._conn)
            except OSError as exc:  # it died meanwhile: nothing left to stop
                log.warning("the previous receiver (pid %s) did not answer: %s", self.info.pid, exc)


def _take_over(folder: Path) -> tuple[socket.socket, Predecessor] | None:
    """The listening socket of ``folder``'s running receiver, or None without one."""
    conn = _connect(folder)
    if conn is None:
        return None
    try:
        conn.sendall(b"handover\n")
        message, fds, _flags, _addr = socket.recv_fds(conn, 4096, 1)
    except OSError as exc:
        conn.close()
        raise HandOverError(f"the running receiver did not hand its socket over: {exc}") from exc
    if not fds:  # it answered, but without a socket (it is stopping)
        conn.close()
        return None
    answer: dict[str, Any] = json.loads(message.decode("utf-8"))
    for extra in fds[1:]:
        os.close(extra)
    sock = socket.socket(
        socket.AF_INET6 if ":" in str(answer["host"]) else socket.AF_INET,
        socket.SOCK_STREAM,
        socket.IPPROTO_TCP,
        fileno=fds[0],
    )
    info = ReceiverInfo(int(answer["pid"]), _url(str(answer["host"]), int(answer["port"])))
    return sock, Predecessor(conn, info)


class ControlServer:
    """Answers control requests on the folder's unix socket, in a thread.

    ``hello``: the receiver's pid and URL (JSON). ``handover``: this receiver stops
    listening on the control address (the successor takes it) and sends the listening
    socket's descriptor with its address; then, on the same connection, ``stop``:
    ``on_stop`` is called (the successor serves). A successor that closes the connection
    before ``stop`` leaves this receiver serving, listening on the control address again.
    """

    def __init__(
        self, folder: Path, listener: socket.socket, url: str, on_stop: Callable[[], None]
    ) -> None:
        self._listener = listener
        self._url = url
        self._on_stop = on_stop
        self._closed = threading.Event()
        self._handed_over = False
        self._address = control_address(folder)
        self._sock: socket.socket | None = None
        self._inode: int | None = None
        self._thread: threading.Thread | None = None
        self._listen()

    def _listen(self) -> None:
        """Bind the control address (a dead receiver's socket file is replaced)."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        if not self._address.startswith("\0"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._address)
        old_umask = os.umask(0o177)
        try:
            sock.bind(self._address)
        except OSError:
            sock.close()
            raise
        finally:
            os.umask(old_umask)
        self._inode = None if self._address.startswith("\0") else os.stat(self._address).st_ino
        sock.listen(16)
        sock.settimeout(0.5)
        self._sock = sock
        self._thread = threading.Thread(
            target=self._serve, args=(sock,), name="gatecast-control", daemon=True
        )
        self._thread.start()

    def _unlisten(self) -> None:
        """Stop listening; remove the socket file unless a successor replaced it."""
        sock, self._sock = self._sock, None
        if sock is None:
            return
        sock.close()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        if self._inode is not None:
            with contextlib.suppress(FileNotFoundError):
                if os.stat(self._address).st_ino == self._inode:
                    os.unlink(self._address)

    def _serve(self, sock: socket.socket) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = sock.accept()
            except TimeoutError:
                continue
            except OSError:  # closed: stopped listening
                return
            threading.Thread(
                target=self._answer, args=(conn,), name="gatecast-control-conn", daemon=True
            ).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            try:
                conn.settimeout(REQUEST_SECONDS)
                if not _same_user(conn):
                    return
                command = _read_line(conn)
                if command == "hello":
                    conn.sendall(self._hello() + b"\n")
                elif command == "handover":
                    self._hand_over(conn)
            except OSError as exc:
                log.warning("control request failed: %s", exc)

    def _hello(self) -> bytes:
        return json.dumps({"pid": os.getpid(), "url": self._url}).encode()

    def _hand_over(self, conn: socket.socket) -> None:
        if self._closed.is_set() or self._handed_over:
            conn.sendall(self._hello())  # no descriptor: this receiver is stopping
            return
        self._unlisten()  # the successor binds the control address
        host, port = self._listener.getsockname()[:2]
        answer = json.dumps({"pid": os.getpid(), "host": host, "port": port}).encode()
        try:
            socket.send_fds(conn, [answer], [self._listener.fileno()])
            conn.settimeout(None)  # the successor starts its app before it says stop
            told = _read_line(conn)
        except OSError:
            told = ""
        if told == "stop":
            self._handed_over = True
            log.info("listening socket handed over; stopping")
            with contextlib.suppress(OSError):
                conn.sendall(b"ok\n")
            self._on_stop()
        elif not self._closed.is_set():
            log.warning("the new receiver gave up before serving; this one serves on")
            with contextlib.suppress(OSError):
                self._listen()

    @property
    def handed_over(self) -> bool:
        """True once a successor took the socket and told this receiver to stop."""
        return self._handed_over

    def close(self) -> None:
        """Stop answering; remove the socket file unless a successor replaced it."""
        self._closed.set()
        self._unlisten()


class ReceiverSlot:
    """A folder's receiver slot, held (a lock file) while a receiver starts in it."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._lock: int | None = None

    def __enter__(self) -> ReceiverSlot:
        self.folder.mkdir(parents=True, exist_ok=True)
        self._lock = os.open(self.folder / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(self._lock, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._lock is not None:
            fcntl.flock(self._lock, fcntl.LOCK_UN)
            os.close(self._lock)
            self._lock = None

    def listener(self, host: str, port: int) -> tuple[socket.socket, Predecessor | None]:
        """The running receiver's listening socket (with the receiver to retire), else a
        socket bound to ``host:port``. A running receiver at another address than the one
        asked for (``port`` not 0) is retired all the same, once this one serves."""
        taken = _take_over(self.folder)
        if taken is None:
            return _bind(host, port), None
        sock, old = taken
        got_host, got_port = sock.getsockname()[:2]
        if port == 0 or (got_port == port and got_host == host):
            return sock, old
        sock.close()  # another address was asked for: bind it, retire the old one anyway
        return _bind(host, port), old

    def publish(
        self, listener: socket.socket, url: str, on_stop: Callable[[], None]
    ) -> ControlServer:
        """Answer this folder's control requests from now on (see :class:`ControlServer`)."""
        return ControlServer(self.folder, listener, url, on_stop)


def _bind(host: str, port: int, *, wait_seconds: float = 10.0) -> socket.socket:
    """:func:`listening_socket`, retried while a stopping receiver still holds the port."""
    deadline = time.monotonic() + wait_seconds
    while True:
        try:
            return listening_socket(host, port)
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE or time.monotonic() >= deadline:
                raise
            time.sleep(0.1)


def state_folder(settings: Settings, engine: Engine) -> Path:
    """The folder a receiver keeps its state in: the webhook journal's."""
    path = journal_path(settings, engine)
    return path.parent if path is not None else Path.cwd()


__all__ = [
    "CONTROL_FILE",
    "LOCK_FILE",
    "ControlServer",
    "HandOverError",
    "Predecessor",
    "ReceiverInfo",
    "ReceiverSlot",
    "control_address",
    "running_receiver",
    "state_folder",
]
