"""A tiny webhook receiver for tests and demos: collects every POSTed body, answers 200."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType


class WebhookSink:
    """Collects webhook bodies on ``http://127.0.0.1:PORT/hook`` (use as a context manager)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, status: int = 200) -> None:
        sink = self
        self.bodies: list[bytes] = []
        self.status = status
        self._cond = threading.Condition()

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length)
                with sink._cond:
                    sink.bodies.append(body)
                    sink._cond.notify_all()
                self.send_response(sink.status)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                return

        self._server = ThreadingHTTPServer((host, port), Handler)
        self._server.daemon_threads = True
        self.url = f"http://{host}:{self._server.server_address[1]}/hook"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def start(self) -> WebhookSink:
        """Start serving in a thread."""
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving."""
        self._server.shutdown()
        self._server.server_close()

    def wait_for(self, count: int, timeout: float = 10.0) -> bool:
        """Wait until at least ``count`` bodies arrived; True if they did."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while len(self.bodies) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def __enter__(self) -> WebhookSink:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
