"""The hand-over of a receiver's listening socket (gatecast.runtime.receiver_control).

Two receivers in one process, each an :class:`AsgiServer` on a small ASGI app that
answers 200 and says who answered: a client posting continuously across the hand-over
(a new connection per POST, and raw sockets connecting while the old receiver closes)
sees no refused or reset connection, every POST answered 200, by the old receiver before
and the new one after.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from gatecast.runtime.http_server import AsgiServer
from gatecast.runtime.receiver_control import (
    CONTROL_FILE,
    ReceiverInfo,
    ReceiverSlot,
    control_address,
    running_receiver,
)


def _app(name: str) -> Any:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        while (await receive()).get("more_body"):
            pass
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": name.encode()})

    return app


class Receiver:
    """A receiver as ``gatecast receive`` runs one, with an app that names it."""

    def __init__(self, folder: Path, name: str, port: int = 0) -> None:
        self.stopped = threading.Event()
        with ReceiverSlot(folder) as slot:
            listener, old = slot.listener("127.0.0.1", port)
            self.server = AsgiServer(_app(name), sock=listener).start()
            self.control = slot.publish(listener, self.server.url, on_stop=self.stopped.set)
            self.predecessor = old.info if old is not None else None
            if old is not None:
                old.retire()

    def stop(self) -> None:
        self.control.close()
        if self.control.handed_over:
            self.server.stop_accepting()
        self.server.stop()


def _post_forever(url: str, stop: threading.Event, seen: list[str], errors: list[str]) -> None:
    # a gateway that opens a connection per event
    with httpx.Client(timeout=10, limits=httpx.Limits(max_keepalive_connections=0)) as client:
        while not stop.is_set():
            try:
                res = client.post(url + "/webhooks/gateway/x", content=b"{}")
            except httpx.HTTPError as exc:
                errors.append(repr(exc))
                continue
            if res.status_code != 200:
                errors.append(f"status {res.status_code}")
            seen.append(res.text)


def _connect_forever(port: int, stop: threading.Event, errors: list[str], count: list[int]) -> None:
    # bare connections: a refused connect or a reset shows here first
    while not stop.is_set():
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
                conn.sendall(b"POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
                answer = conn.recv(64)
                if not answer.startswith(b"HTTP/1.1 200"):
                    errors.append(f"answer {answer!r}")
        except OSError as exc:
            errors.append(repr(exc))
        count[0] += 1


def test_a_new_receiver_takes_the_socket_over_without_refusing_a_connection(
    tmp_path: Path,
) -> None:
    old = Receiver(tmp_path, "old")
    assert old.predecessor is None
    info = running_receiver(tmp_path)
    assert info is not None and info.pid == os.getpid() and info.url == old.server.url

    stop = threading.Event()
    seen: list[str] = []
    errors: list[str] = []
    count = [0]
    clients = [
        threading.Thread(target=_post_forever, args=(old.server.url, stop, seen, errors)),
        threading.Thread(target=_connect_forever, args=(old.server.port, stop, errors, count)),
    ]
    for thread in clients:
        thread.start()
    try:
        time.sleep(0.5)
        new = Receiver(tmp_path, "new")
        assert new.predecessor is not None and new.predecessor.url == old.server.url
        assert new.server.port == old.server.port  # the same socket, not a new bind
        assert old.stopped.wait(5), "the old receiver was not told to stop"
        old.stop()  # what `gatecast receive` does when told: finish its requests, exit
        time.sleep(0.5)
    finally:
        stop.set()
        for thread in clients:
            thread.join(30)
    try:
        assert errors == []
        assert "old" in seen and seen[-1] == "new"
        assert count[0] > 10
        info = running_receiver(tmp_path)
        assert info is not None and info.url == new.server.url
        assert (tmp_path / CONTROL_FILE).exists()  # the old one left the new one's socket
    finally:
        new.stop()
    assert running_receiver(tmp_path) is None
    assert not (tmp_path / CONTROL_FILE).exists()


def test_without_a_running_receiver_the_address_is_bound(tmp_path: Path) -> None:
    # a killed receiver's socket file is left behind: nobody answers on it
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(tmp_path / CONTROL_FILE))
    stale.close()
    assert running_receiver(tmp_path) is None
    first = Receiver(tmp_path, "first")
    try:
        assert first.predecessor is None
        with httpx.Client() as client:
            assert client.post(first.server.url + "/x").text == "first"
    finally:
        first.stop()


def test_another_port_asked_for_is_bound_and_the_old_receiver_retired(tmp_path: Path) -> None:
    old = Receiver(tmp_path, "old")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free = probe.getsockname()[1]
    new = Receiver(tmp_path, "new", port=free)
    try:
        assert new.server.port == free != old.server.port
        assert new.predecessor is not None
        assert old.stopped.wait(5)
    finally:
        old.stop()
        new.stop()


def test_a_long_folder_gets_an_abstract_control_socket(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    assert control_address(deep).startswith("\0")
    assert control_address(tmp_path) == str(tmp_path.resolve() / CONTROL_FILE)
    old = Receiver(deep, "old")
    new = Receiver(deep, "new")  # the abstract name is handed on too
    try:
        assert new.predecessor is not None and new.server.port == old.server.port
        assert old.stopped.wait(5)
        old.stop()
        info = running_receiver(deep)
        assert info is not None and info.url == new.server.url
    finally:
        new.stop()
    assert running_receiver(deep) is None


def test_a_successor_that_gives_up_leaves_the_receiver_serving(tmp_path: Path) -> None:
    old = Receiver(tmp_path, "old")
    try:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(control_address(tmp_path))
        conn.sendall(b"handover\n")
        _message, fds, _flags, _addr = socket.recv_fds(conn, 4096, 1)
        assert len(fds) == 1
        os.close(fds[0])
        conn.close()  # died before it served: never said stop
        info = wait_for_receiver(tmp_path)
        assert info.url == old.server.url
        assert not old.stopped.is_set()
        with httpx.Client() as client:
            assert client.post(old.server.url + "/x").text == "old"
    finally:
        old.stop()


def wait_for_receiver(folder: Path) -> ReceiverInfo:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        info = running_receiver(folder)
        if info is not None:
            return info
        time.sleep(0.05)
    raise AssertionError("no receiver answers")


def test_a_receiver_on_its_way_out_is_not_taken_over(tmp_path: Path) -> None:
    going = Receiver(tmp_path, "going")
    going.control.close()  # what a stopping receiver does first
    try:
        assert running_receiver(tmp_path) is None
        assert not (tmp_path / CONTROL_FILE).exists()
    finally:
        going.server.stop()
