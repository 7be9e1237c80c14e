"""Run the sandbox on a real uvicorn server in a background thread, and drive it from Python."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import uvicorn

from gateway.sandbox.config import SandboxConfig
from gateway.sandbox.server import SandboxApp, create_sandbox_app
from gateway.sandbox.state import Instance, SandboxState


class Sandbox:
    """A running sandbox: its URL, a valid token, and in-process access to its record."""

    def __init__(self, app: SandboxApp, url: str) -> None:
        self.app = app
        self.url = url
        self.state: SandboxState = app.state
        self.config: SandboxConfig = app.state.config

    def __repr__(self) -> str:
        return f"Sandbox(url={self.url!r}, dialect={self.config.dialect!r})"

    @property
    def access_token(self) -> str:
        """The first configured access token."""
        return self.config.access_tokens[0]

    def base_url(self, base: str = "api") -> str:
        """``{url}/api`` or ``{url}/messenger_api``."""
        return f"{self.url}/{base}"

    def create_linked_instance(self, phone: str | None = None) -> str:
        """Create an instance and simulate the QR scan: the id of a connected instance."""
        state = self.state
        token = self.access_token
        with state.lock:
            iid = str(state.create_instance(token)["instance_id"])
            if state.instances[iid].state == "connected":  # auto_link: linked already
                return iid
        state.get_qrcode(token, iid)
        state.scan(iid, phone=phone)
        return iid

    def scan(self, instance_id: str, phone: str | None = None) -> Instance:
        """Simulate the phone scanning the instance's QR code."""
        return self.state.scan(instance_id, phone=phone)

    def messages(self) -> list[dict[str, Any]]:
        """Every accepted send (inspection view)."""
        with self.state.lock:
            return [m.public() for m in self.state.messages.values()]

    def stats(self) -> dict[str, Any]:
        """The counters of ``/sandbox/stats``."""
        return self.state.stats_view()

    def wait_idle(self, timeout: float = 10.0) -> bool:
        """Wait until every scheduled webhook event has been emitted and posted."""
        emitter = self.state.emitter
        return True if emitter is None else emitter.wait_idle(timeout)


class _Server(uvicorn.Server):
    def install_signal_handlers(self) -> None:  # older uvicorn: never from a thread
        return


@contextlib.contextmanager
def run_sandbox_in_thread(
    config: SandboxConfig | None = None, *, host: str = "127.0.0.1", port: int = 0
) -> Iterator[Sandbox]:
    """Serve the sandbox with uvicorn in a thread; ``port=0`` picks a free port."""
    app = create_sandbox_app(config or SandboxConfig())
    # proto=IPPROTO_TCP matters: asyncio only sets TCP_NODELAY on accepted sockets whose
    # proto says TCP; without it every response waits ~40 ms on Nagle + delayed ACK.
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    real_port = sock.getsockname()[1]
    server = _Server(
        uvicorn.Config(
            app,
            log_level="warning",
            access_log=False,
            lifespan="off",
            timeout_keep_alive=30,
            timeout_graceful_shutdown=2,  # slow answers must not hold up a stop
            backlog=2048,
        )
    )
    errors: list[BaseException] = []

    def serve() -> None:
        try:
            asyncio.run(server.serve(sockets=[sock]))
        except BaseException as exc:  # reported to the caller below
            errors.append(exc)

    thread = threading.Thread(target=serve, name=f"sandbox-{real_port}", daemon=True)
    thread.start()
    try:
        while not server.started:
            if errors or not thread.is_alive():
                raise RuntimeError(f"sandbox server failed to start: {errors[:1]!r}")
            thread.join(0.01)
        shown = f"[{host}]" if ":" in host else host
        yield Sandbox(app, f"http://{shown}:{real_port}")
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
        app.state.close()


def wait_for_sandbox(url: str, timeout: float = 10.0) -> None:
    """Poll ``{url}/sandbox/stats`` until the sandbox answers (for subprocess parents)."""
    import time

    deadline = time.monotonic() + timeout
    while True:
        try:
            if httpx.get(f"{url}/sandbox/stats", timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"sandbox at {url} did not answer within {timeout} s")
        time.sleep(0.05)
