"""Journey: nothing is read before it is allowed (issue 27).

Against a running ``gatecast serve``: ten unauthenticated 64 MB bodies and one of 1 GB
(streamed chunked, never held by the test) sent in parallel are answered 401 before their
senders finish, and the server's memory stays within its stated bound (docs/http-api.md,
"Request bodies": 50 MB over its resting size); a signed-in caller's body past its route's
limit is answered 413 as soon as the bytes streamed pass it.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

import psutil

from tests.journeys.harness import API_KEY, Workspace

MB = 1024 * 1024
#: the server's memory may grow this much over its resting size while refusing bodies
RSS_BOUND = 50 * MB
_CHUNK = b"x" * (64 * 1024)


@dataclass
class Sent:
    """What one sender saw: the status answered and how many body bytes it got out."""

    status: int
    sent: int
    total: int


def push(url: str, path: str, total: int, *, chunked: bool, key: str | None = None) -> Sent:
    """POST a ``total``-byte body of JSON-ish filler to ``path``, a chunk at a time,
    stopping as soon as the server answers; the body is generated, never held whole."""
    parts = urlsplit(url)
    head = [f"POST {path} HTTP/1.1", f"Host: {parts.netloc}", "Content-Type: application/json"]
    head.append("Transfer-Encoding: chunked" if chunked else f"Content-Length: {total}")
    if key:
        head.append(f"Authorization: Bearer {key}")
    sock = socket.create_connection((parts.hostname, parts.port), timeout=30)
    sent = 0
    try:
        sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode())
        sock.setblocking(False)
        answer = b""
        deadline = time.monotonic() + 60
        pending = b""
        while time.monotonic() < deadline:
            readable, writable, _ = select.select([sock], [sock] if sent < total else [], [], 1)
            if readable:
                answer = _read_head(sock)
                break
            if not writable:
                continue
            if not pending:
                chunk = _CHUNK[: total - sent]
                pending = b"%x\r\n%s\r\n" % (len(chunk), chunk) if chunked else chunk
            try:
                n = sock.send(pending)
            except BlockingIOError:
                continue
            except (BrokenPipeError, ConnectionResetError):
                answer = _read_head(sock)
                break
            pending = pending[n:]
            if not pending:
                sent += len(chunk)
                if sent >= total and chunked:
                    sock.sendall(b"0\r\n\r\n")
        status = int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/") else 0
        return Sent(status, sent, total)
    finally:
        sock.close()


def _read_head(sock: socket.socket) -> bytes:
    sock.setblocking(True)
    sock.settimeout(10)
    try:
        return sock.recv(4096)
    except OSError:
        return b""


def _rss(pid: int) -> int:
    """The resident memory of process ``pid`` and its children (a receiver it started)."""
    proc = psutil.Process(pid)
    total = int(proc.memory_info().rss)
    for child in proc.children(recursive=True):
        with contextlib.suppress(psutil.Error):
            total += int(child.memory_info().rss)
    return total


def test_unauthenticated_bodies_are_refused_before_they_are_read(ws: Workspace) -> None:
    server = ws.serve()
    pid = server.process.popen.pid
    with server.api() as api:  # warm: the app answers before we measure its resting size
        assert api.get("/api/v1/lists").status_code == 200
    resting = _rss(pid)
    peak = [resting]
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], _rss(pid))
            time.sleep(0.02)

    results: list[Sent] = []

    def send(total: int, chunked: bool) -> None:
        results.append(push(server.url, "/api/v1/lists", total, chunked=chunked))

    watcher = threading.Thread(target=watch)
    watcher.start()
    senders = [threading.Thread(target=send, args=(64 * MB, False)) for _ in range(10)]
    senders.append(threading.Thread(target=send, args=(1024 * MB, True)))
    for t in senders:
        t.start()
    for t in senders:
        t.join(120)
    done.set()
    watcher.join()

    assert len(results) == 11
    for result in results:
        assert result.status == 401, result
        # answered long before the sender was through: at most what the sockets' buffers
        # took in, never the body
        assert result.sent < 16 * MB, result
    assert peak[0] - resting < RSS_BOUND, f"grew {(peak[0] - resting) / MB:.1f} MB"

    # a signed-in caller: a declared length past the JSON limit is refused at once, and
    # a chunked body as soon as the bytes streamed pass it
    declared = push(server.url, "/api/v1/lists", 64 * MB, chunked=False, key=API_KEY)
    assert declared.status == 413 and declared.sent < 16 * MB, declared
    streamed = push(server.url, "/api/v1/lists", 1024 * MB, chunked=True, key=API_KEY)
    assert streamed.status == 413 and streamed.sent < 16 * MB, streamed
    with server.api() as api:
        answer = api.post("/api/v1/lists", content=b"{" + b" " * (2 * MB) + b"}")
        assert answer.status_code == 413
        assert answer.headers["content-type"] == "application/problem+json"
        assert "GATECAST_REQUEST_MAX_BYTES" in answer.json()["detail"]
        assert api.post("/api/v1/lists", json={"name": "fits"}).status_code == 201
