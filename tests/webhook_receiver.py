"""A receiver of gatecast's outbound webhooks, as an integrator writes one: it verifies
each signature on its own (the receiver example of docs/webhooks.md), keeps what it
accepted, and can be stopped (connections refused) and started again on its port."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

TOLERANCE_SECONDS = 5 * 60


def verify(secret: str, headers: dict[str, str], body: bytes) -> bool:
    """The Standard Webhooks check: timestamp within 5 min, a ``v1`` signature of
    ``id.timestamp.body`` that matches (constant-time)."""
    msg_id = headers.get("webhook-id", "")
    stamp = headers.get("webhook-timestamp", "")
    if not msg_id or not stamp.isdigit() or abs(time.time() - int(stamp)) > TOLERANCE_SECONDS:
        return False
    key = base64.b64decode(secret.removeprefix("whsec_"))
    expected = base64.b64encode(
        hmac.new(key, f"{msg_id}.{stamp}.".encode() + body, hashlib.sha256).digest()
    ).decode()
    for part in headers.get("webhook-signature", "").split():
        version, _, value = part.partition(",")
        if version == "v1" and hmac.compare_digest(value, expected):
            return True
    return False


class Receiver:
    """Answers ``status`` (200 by default) to every POST with a good signature, 401 to
    the others; ``events`` holds the accepted bodies in arrival order, ``raw`` their
    headers and bytes (to verify again with another secret)."""

    def __init__(self, secret: str = "") -> None:
        self.secret = secret
        self.status = 200
        self.events: list[dict[str, Any]] = []
        self.ids: list[str] = []
        self.raw: list[tuple[dict[str, str], bytes]] = []
        self.bad_signatures = 0
        self.requests = 0
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self.port = 0
        self.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hooks"

    def start(self) -> None:
        """Listen (again, on the same port once it had one)."""
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                headers = {k.lower(): v for k, v in self.headers.items()}
                with receiver._lock:
                    receiver.requests += 1
                    status = receiver.status
                    if not verify(receiver.secret, headers, body):
                        receiver.bad_signatures += 1
                        status = 401
                    elif 200 <= status < 300:
                        receiver.events.append(json.loads(body))
                        receiver.ids.append(headers["webhook-id"])
                        receiver.raw.append((headers, body))
                self.send_response(status)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        """Close the socket: connections are refused until :meth:`start`."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def of_type(self, prefix: str) -> list[dict[str, Any]]:
        with self._lock:
            return [e for e in self.events if e["type"].startswith(prefix)]
