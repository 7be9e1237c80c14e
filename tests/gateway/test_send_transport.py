"""The httpcore send path (gateway.send_transport): it must put the same request on the
wire as httpx, read answers the same way, and fail with the same httpx exceptions (so the
same outcomes)."""

from __future__ import annotations

import gzip
import json
import threading
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpcore
import httpx
import pytest

from gateway.client import GatewayClient
from gateway.messages import Button, Interactive, Media, Message, Text
from gateway.outcomes import OutcomeKind
from gateway.sandbox import SandboxConfig, run_sandbox_in_thread
from gateway.send_transport import as_httpx_error, wire_usable

TOKEN = "wire-secret-token"
SUCCESS = {"status": "success", "message": "Message sent", "data": {"key": {"id": "3EB0F00D"}}}


class Recorder:
    """A plain HTTP server that records every request and answers with a canned body."""

    def __init__(self, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        self.requests: list[dict[str, Any]] = []
        self.body = body or json.dumps(SUCCESS).encode()
        self.headers = headers or {"Content-Type": "application/json"}
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                path, _, query = self.path.partition("?")
                recorder.requests.append(
                    {
                        "method": self.command,
                        "path": path,
                        "query": urllib.parse.parse_qs(query, keep_blank_values=True),
                        "headers": {k.lower(): v for k, v in self.headers.items()},
                        "body": self.rfile.read(length) if length else b"",
                    }
                )
                self.send_response(200)
                for name, value in recorder.headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(recorder.body)))
                self.end_headers()
                self.wfile.write(recorder.body)

            do_GET = do_POST = _answer

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"

    def __enter__(self) -> Recorder:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    with Recorder() as rec:
        yield rec


MESSAGES: list[Message] = [
    Text("Héllo & welcome, 100% + more = fun? #1 /path ünïcode 😀"),
    Media("https://example.com/a%20file.png?x=1&y=2", "Look: a, b & c", filename="a file.png"),
    Interactive(
        "Pick one",
        footer="f",
        buttons=(
            Button("quick_reply", "Yes", id="y"),
            Button("cta_url", "Site", url="https://example.com/a?b=c"),
        ),
    ),
]


def _comparable(req: dict[str, Any]) -> tuple[Any, ...]:
    body = json.loads(req["body"]) if req["body"] else None
    return (req["method"], req["path"], req["query"], body, req["headers"].get("content-type"))


@pytest.mark.parametrize("send_method", ["get", "post"])
@pytest.mark.parametrize("message", MESSAGES, ids=["text", "media", "interactive"])
def test_wire_sends_what_httpx_sends(
    recorder: Recorder, send_method: str, message: Message
) -> None:
    with (
        GatewayClient(recorder.url, TOKEN, send_method=send_method) as fast,  # type: ignore[arg-type]
        GatewayClient(
            recorder.url,
            TOKEN,
            send_method=send_method,  # type: ignore[arg-type]
            transport=httpx.HTTPTransport(),
        ) as plain,
    ):
        assert fast._wire is not None and plain._wire is None
        outcomes = [c.send("INST1", "+44 7700 900123", message) for c in (fast, plain)]
    assert [o.kind for o in outcomes] == [OutcomeKind.ACCEPTED] * 2
    assert [o.message_id for o in outcomes] == ["3EB0F00D"] * 2
    wire_req, httpx_req = recorder.requests
    assert _comparable(wire_req) == _comparable(httpx_req)
    assert wire_req["headers"]["user-agent"] == httpx_req["headers"]["user-agent"]
    assert wire_req["headers"]["host"] == httpx_req["headers"]["host"]


def test_credentials_in_the_url_become_basic_auth_as_with_httpx(recorder: Recorder) -> None:
    url = recorder.url.replace("http://", "http://us%40er:p%3Ass@")
    with (
        GatewayClient(url, TOKEN) as fast,
        GatewayClient(url, TOKEN, transport=httpx.HTTPTransport()) as plain,
    ):
        for client in (fast, plain):
            assert client.send("INST1", "447700900123", Text("hi")).kind is OutcomeKind.ACCEPTED
    auths = [r["headers"]["authorization"] for r in recorder.requests]
    assert auths[0] == auths[1] == "Basic dXNAZXI6cDpzcw=="


def test_gzip_answers_are_decoded() -> None:
    body = gzip.compress(json.dumps(SUCCESS).encode())
    headers = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
    with Recorder(body, headers) as rec, GatewayClient(rec.url, TOKEN) as client:
        outcome = client.send("INST1", "447700900123", Text("hi"))
    assert outcome.kind is OutcomeKind.ACCEPTED and outcome.message_id == "3EB0F00D"


def test_dropped_connection_is_ambiguous_like_httpx() -> None:
    with run_sandbox_in_thread(SandboxConfig(drop_rate=1.0)) as sb:
        iid = sb.create_linked_instance()
        with GatewayClient(sb.url, sb.access_token) as client:
            assert client._wire is not None
            outcome = client.send(iid, "15551230000", Text("hi"))
    assert outcome.kind is OutcomeKind.AMBIGUOUS
    assert outcome.reason.startswith("RemoteProtocolError")
    assert sb.access_token not in outcome.reason


def test_read_timeout_is_ambiguous_and_not_retried() -> None:
    cfg = SandboxConfig(slow_rate=1.0, slow_seconds=1.0, status_delays=(3600.0,) * 3)
    with run_sandbox_in_thread(cfg) as sb:
        iid = sb.create_linked_instance()
        with GatewayClient(sb.url, sb.access_token, timeout=0.2) as client:
            outcome = client.send(iid, "15551230001", Text("hi"))
        assert outcome.kind is OutcomeKind.AMBIGUOUS
        assert outcome.reason.startswith("ReadTimeout")
        assert len(sb.messages()) == 1  # went out once: never retried


def test_refused_connection_is_retried_then_retryable() -> None:
    with Recorder() as rec:
        url = rec.url
    # the port is closed now
    sleeps: list[float] = []
    with GatewayClient(url, TOKEN, connect_retries=2) as client:
        client._sleep = sleeps.append
        outcome = client.send("INST1", "447700900123", Text("hi"))
    assert outcome.kind is OutcomeKind.RETRYABLE
    assert len(sleeps) == 2  # three attempts


@pytest.mark.parametrize(
    ("source", "target"),
    [
        (httpcore.ConnectTimeout, httpx.ConnectTimeout),
        (httpcore.ReadTimeout, httpx.ReadTimeout),
        (httpcore.WriteTimeout, httpx.WriteTimeout),
        (httpcore.PoolTimeout, httpx.PoolTimeout),
        (httpcore.ConnectError, httpx.ConnectError),
        (httpcore.ReadError, httpx.ReadError),
        (httpcore.WriteError, httpx.WriteError),
        (httpcore.ProxyError, httpx.ProxyError),
        (httpcore.UnsupportedProtocol, httpx.UnsupportedProtocol),
        (httpcore.LocalProtocolError, httpx.LocalProtocolError),
        (httpcore.RemoteProtocolError, httpx.RemoteProtocolError),
    ],
)
def test_httpcore_errors_map_to_the_httpx_ones(
    source: type[Exception], target: type[httpx.HTTPError]
) -> None:
    mapped = as_httpx_error(source("boom"))
    assert type(mapped) is target and str(mapped) == "boom"
    assert as_httpx_error(ValueError("not httpcore")) is None


def test_a_proxy_in_the_environment_keeps_the_httpx_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert wire_usable("http://gw.example:8080/api/")
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.example:3128")
    assert not wire_usable("http://gw.example:8080/api/")
    assert wire_usable("https://gw.example/api/")  # no HTTPS_PROXY
    monkeypatch.setenv("NO_PROXY", "gw.example")
    assert wire_usable("http://gw.example:8080/api/")
    monkeypatch.delenv("NO_PROXY")
    with GatewayClient("http://gw.example:8080/", TOKEN) as client:
        assert client._wire is None
