"""The client over httpx.MockTransport: wire shapes, fallbacks, retries, secrets."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable

import httpx
import pytest

from gateway.async_client import AsyncGatewayClient
from gateway.client import GatewayClient
from gateway.errors import GatewayError, RequestValidationError
from gateway.messages import Button, Interactive, Media, Text
from gateway.outcomes import InstanceProblem, OutcomeKind

TOKEN = "tok-SECRET/+&=42"  # characters that change under URL-encoding
BASE = "http://gw.test"
OK = {"status": "success", "message": {"key": {"id": "3EB0AAAA"}}}

Handler = Callable[[httpx.Request], httpx.Response]


class Recorder:
    """A MockTransport handler that records requests and answers from a function."""

    def __init__(self, answer: Handler | None = None) -> None:
        self.requests: list[httpx.Request] = []
        self.answer = answer or (lambda r: httpx.Response(200, json=OK))

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return self.answer(request)


def make(rec: Recorder, **kw: object) -> GatewayClient:
    return GatewayClient(
        BASE,
        TOKEN,
        transport=httpx.MockTransport(rec),
        connect_retry_wait=0,
        **kw,  # type: ignore[arg-type]
    )


def query(request: httpx.Request) -> dict[str, str]:
    return dict(request.url.params.multi_items())


@pytest.mark.parametrize("prefix", ["api", "messenger_api"])
def test_send_text_get_on_both_bases(prefix: str) -> None:
    rec = Recorder()
    with make(rec, prefix=prefix) as client:
        out = client.send("INST1", "+1 (415) 555-2671", Text("Hi & bye #1"))
    assert out.kind is OutcomeKind.ACCEPTED and out.message_id == "3EB0AAAA"
    (req,) = rec.requests
    assert req.method == "GET"
    assert req.url.path == f"/{prefix}/send"
    assert query(req) == {
        "number": "14155552671",
        "type": "text",
        "message": "Hi & bye #1",
        "instance_id": "INST1",
        "access_token": TOKEN,
    }
    assert req.content == b""


def test_send_media_post_json_body() -> None:
    rec = Recorder()
    with make(rec, send_method="post") as client:
        out = client.send("INST1", "14155552671", Media("https://m.example/a.pdf", "cap", "a.pdf"))
    assert out.accepted
    (req,) = rec.requests
    assert (req.method, req.url.path, query(req)) == ("POST", "/api/send", {})
    assert req.headers["content-type"] == "application/json"
    assert json.loads(req.content) == {
        "number": "14155552671",
        "type": "media",
        "message": "cap",
        "media_url": "https://m.example/a.pdf",
        "filename": "a.pdf",
        "instance_id": "INST1",
        "access_token": TOKEN,
    }


def test_send_group_and_template() -> None:
    rec = Recorder()
    with make(rec) as client:
        assert client.send("INST1", "120363025246125486@g.us", Text("all")).accepted
        msg = Interactive("Body", buttons=(Button("quick_reply", "Yes", id="y"),))
        assert client.send("INST1", "14155552671", msg).accepted
    group, template = rec.requests
    assert (group.method, group.url.path) == ("GET", "/api/send_group")
    assert query(group)["group_id"] == "120363025246125486@g.us"
    assert (template.method, template.url.path) == ("POST", "/api/send_template")
    assert query(template) == {"instance_id": "INST1", "access_token": TOKEN}
    body = json.loads(template.content)
    assert body["type"] == "interactive" and "access_token" not in body


def test_validation_happens_before_any_io() -> None:
    rec = Recorder()
    with make(rec) as client:
        with pytest.raises(RequestValidationError, match=r"^to: "):
            client.send("INST1", "call me", Text("x"))
        with pytest.raises(RequestValidationError, match=r"message\.media_url"):
            client.send("INST1", "14155552671", Media("file:///etc/passwd"))
        with pytest.raises(RequestValidationError, match="webhook_url"):
            client.set_webhook("INST1", "nowhere")
    assert rec.requests == []
    with pytest.raises(RequestValidationError, match="access_token"):
        GatewayClient(BASE, "")
    with pytest.raises(RequestValidationError, match="prefix"):
        GatewayClient(BASE, TOKEN, prefix="v2")  # type: ignore[arg-type]
    with pytest.raises(RequestValidationError, match="base_url"):
        GatewayClient("gw.test", TOKEN)


def test_connect_errors_are_retried_briefly_then_retryable() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError(f"cannot reach {request.url}", request=request)

    rec = Recorder(refuse)
    with make(rec, connect_retries=2) as client:
        out = client.send("INST1", "14155552671", Text("x"))
    assert out.kind is OutcomeKind.RETRYABLE
    assert len(rec.requests) == 3
    assert TOKEN not in out.reason and "access_token=***" in out.reason


def test_connect_error_then_success_is_accepted() -> None:
    calls = iter([True, False])

    def flaky(request: httpx.Request) -> httpx.Response:
        if next(calls):
            raise httpx.ConnectTimeout("slow", request=request)
        return httpx.Response(200, json=OK)

    rec = Recorder(flaky)
    with make(rec) as client:
        assert client.send("INST1", "14155552671", Text("x")).accepted
    assert len(rec.requests) == 2


@pytest.mark.parametrize(
    "exc", [httpx.ReadTimeout, httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteTimeout]
)
def test_after_the_request_went_out_never_retry(exc: type[httpx.TransportError]) -> None:
    def fail(request: httpx.Request) -> httpx.Response:
        raise exc("gone", request=request)

    rec = Recorder(fail)
    with make(rec) as client:
        out = client.send("INST1", "14155552671", Text("x"))
    assert out.kind is OutcomeKind.AMBIGUOUS
    assert len(rec.requests) == 1


def test_http_refusals_are_not_retried_in_call() -> None:
    rec = Recorder(lambda r: httpx.Response(429, headers={"Retry-After": "9"}))
    with make(rec) as client:
        out = client.send("INST1", "14155552671", Text("x"))
    assert (out.kind, out.retry_after, out.http_status) == (OutcomeKind.RETRYABLE, 9.0, 429)
    assert len(rec.requests) == 1


def get_only(request: httpx.Request) -> httpx.Response:
    """The reference build: instance routes are GET only."""
    if request.method != "GET":
        return httpx.Response(405, text="Method Not Allowed")
    op = request.url.path.rsplit("/", 1)[-1]
    if op == "create_instance":
        return httpx.Response(200, json={"status": "success", "instance_id": "6501A9176BD17"})
    if op == "get_qrcode":
        return httpx.Response(
            200, json={"status": "success", "base64": "data:image/png;base64,AAAA"}
        )
    if op == "reset_instance":
        return httpx.Response(200, json={"status": "success", "instance_id": "NEW000000001"})
    return httpx.Response(200, json={"status": "success", "message": "ok"})


def test_instance_ops_fall_back_to_get_and_remember() -> None:
    rec = Recorder(get_only)
    with make(rec) as client:
        assert client.create_instance() == "6501A9176BD17"
        assert [r.method for r in rec.requests] == ["POST", "GET"]
        assert client.get_qrcode("6501A9176BD17").data_uri == "data:image/png;base64,AAAA"
        client.set_webhook("6501A9176BD17", "https://me.example/hook?a=1&b=2", enable=False)
        client.reboot("6501A9176BD17")
        client.reconnect("6501A9176BD17")
        client.logout("6501A9176BD17")
        assert client.reset_instance("6501A9176BD17") == "NEW000000001"
        client.create_instance()
    methods = [r.method for r in rec.requests]
    assert methods == ["POST"] + ["GET"] * 8  # one miss, then GET remembered for all
    hook = rec.requests[3]
    assert hook.url.path == "/api/set_webhook"
    assert query(hook) == {
        "instance_id": "6501A9176BD17",
        "webhook_url": "https://me.example/hook?a=1&b=2",
        "enable": "false",
        "access_token": TOKEN,
    }


def test_instance_ops_post_as_the_spec_says() -> None:
    def post_only(request: httpx.Request) -> httpx.Response:
        if request.method != "POST":
            return httpx.Response(404)
        return httpx.Response(200, json={"status": "success", "message": "QR sent to your webhook"})

    rec = Recorder(post_only)
    with make(rec) as client:
        assert client.get_qrcode("INST1").data_uri is None
        client.reboot("INST1")
        assert client.reset_instance("INST1") == "INST1"  # no new id in the answer
    assert [r.method for r in rec.requests] == ["POST"] * 3
    assert all(query(r)["instance_id"] == "INST1" for r in rec.requests)


def test_instance_route_missing_on_both_methods() -> None:
    rec = Recorder(lambda r: httpx.Response(404))
    with make(rec) as client, pytest.raises(GatewayError) as err:
        client.logout("INST1")
    assert (err.value.kind, err.value.problem) == (
        OutcomeKind.INSTANCE,
        InstanceProblem.GATEWAY_MISCONFIGURED,
    )
    assert len(rec.requests) == 2


def test_instance_error_bodies_raise_without_the_token() -> None:
    rec = Recorder(
        lambda r: httpx.Response(
            200, json={"status": "error", "message": f"Access token {TOKEN} does not exist"}
        )
    )
    with make(rec) as client, pytest.raises(GatewayError) as err:
        client.create_instance()
    assert (err.value.kind, err.value.problem) == (OutcomeKind.INSTANCE, InstanceProblem.BAD_TOKEN)
    assert TOKEN not in str(err.value) and TOKEN not in repr(err.value)


def test_instance_network_errors_raise_gateway_error() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError(f"refused {request.url}", request=request)

    rec = Recorder(refuse)
    with make(rec, connect_retries=1) as client, pytest.raises(GatewayError) as err:
        client.reboot("INST1")
    assert err.value.kind is OutcomeKind.RETRYABLE
    assert TOKEN not in str(err.value)
    assert err.value.__cause__ is None and err.value.__suppress_context__


def test_create_instance_without_an_id_is_ambiguous() -> None:
    rec = Recorder(lambda r: httpx.Response(200, json={"status": "success"}))
    with make(rec) as client, pytest.raises(GatewayError) as err:
        client.create_instance()
    assert err.value.kind is OutcomeKind.AMBIGUOUS


def test_secrets_never_in_repr_reasons_or_logs(caplog: pytest.LogCaptureFixture) -> None:
    echo = Recorder(
        lambda r: httpx.Response(200, json={"status": "error", "message": f"bad token {TOKEN}"})
    )
    caplog.set_level(logging.DEBUG)
    with make(echo) as client:
        assert TOKEN not in repr(client)
        out = client.send("INST1", "14155552671", Text("x"))
        assert TOKEN not in out.reason and TOKEN not in repr(out)
    assert "HTTP Request" in caplog.text  # httpx did log the request line...
    assert "access_token=***" in caplog.text  # ...with the token redacted
    encoded = str(httpx.QueryParams({"t": TOKEN}))[2:]
    assert TOKEN not in caplog.text and encoded not in caplog.text


def test_webhook_urls_stay_out_of_logs(caplog: pytest.LogCaptureFixture) -> None:
    """A webhook URL can carry the receiver's secret in its path."""
    caplog.set_level(logging.INFO)
    rec = Recorder(lambda r: httpx.Response(200, json={"status": "success"}))
    with make(rec) as client:
        client.set_webhook("INST1", "https://me.example/webhooks/gateway/hush-hush")
    assert query(rec.requests[0])["webhook_url"].endswith("/hush-hush")  # sent in full
    assert "HTTP Request" in caplog.text and "webhook_url=***" in caplog.text
    assert "hush-hush" not in caplog.text


def test_async_client_same_behaviour() -> None:
    async def main() -> None:
        ok = Recorder()
        async with AsyncGatewayClient(
            BASE, TOKEN, prefix="messenger_api", transport=httpx.MockTransport(ok)
        ) as client:
            out = await client.send("INST1", "14155552671", Text("é 🎉"))
            assert out.accepted and out.message_id == "3EB0AAAA"
            assert TOKEN not in repr(client)
        assert ok.requests[0].url.path == "/messenger_api/send"
        assert query(ok.requests[0])["message"] == "é 🎉"

        rec = Recorder(get_only)
        async with AsyncGatewayClient(BASE, TOKEN, transport=httpx.MockTransport(rec)) as client:
            assert await client.create_instance() == "6501A9176BD17"
            assert (await client.get_qrcode("X")).data_uri == "data:image/png;base64,AAAA"
            await client.set_webhook("X", "https://me.example/h")
            await client.reboot("X")
            await client.reconnect("X")
            await client.logout("X")
            assert await client.reset_instance("X") == "NEW000000001"
        assert [r.method for r in rec.requests] == ["POST"] + ["GET"] * 7

        def refuse(request: httpx.Request) -> httpx.Response:
            raise httpx.ConnectError("refused", request=request)

        def slow(request: httpx.Request) -> httpx.Response:
            raise httpx.ReadTimeout("slow", request=request)

        for handler, kind, calls in (
            (refuse, OutcomeKind.RETRYABLE, 3),
            (slow, OutcomeKind.AMBIGUOUS, 1),
        ):
            bad = Recorder(handler)
            async with AsyncGatewayClient(
                BASE, TOKEN, transport=httpx.MockTransport(bad), connect_retry_wait=0
            ) as client:
                assert (await client.send("INST1", "14155552671", Text("x"))).kind is kind
            assert len(bad.requests) == calls

    asyncio.run(main())


def test_field_required_after_a_json_post_means_the_gateway_ignores_json() -> None:
    cases = [
        ("Phone number is required", "post", InstanceProblem.GATEWAY_MISCONFIGURED),
        ("Access token is required", "post", InstanceProblem.GATEWAY_MISCONFIGURED),
        ("Phone number is required", "get", None),  # permanent, as the field notes say
        ("Access token is required", "get", InstanceProblem.BAD_TOKEN),
    ]
    for text, method, problem in cases:
        answer = {"status": "error", "message": text}

        def reply(r: httpx.Request, answer: dict[str, str] = answer) -> httpx.Response:
            return httpx.Response(200, json=answer)

        rec = Recorder(reply)
        with make(rec, send_method=method) as client:
            out = client.send("INST1", "14155552671", Text("x"))
        assert out.problem is problem, (text, method, out)
        assert out.kind is (OutcomeKind.PERMANENT if problem is None else OutcomeKind.INSTANCE)
