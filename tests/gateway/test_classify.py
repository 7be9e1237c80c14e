"""Every trap of the field notes, classified (DESIGN.md decision 3)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import httpx
import pytest

from gateway.classify import (
    classify_send_response,
    classify_transport_error,
    extract_message_id,
    instance_id_of,
    interpret_instance_response,
    is_certainly_unsent,
    parse_retry_after,
    qr_data_uri_of,
)
from gateway.errors import GatewayError
from gateway.outcomes import InstanceProblem, OutcomeKind

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
OK_REFERENCE = {
    "status": "success",
    "message": {
        "key": {"remoteJid": "919876543210@s.whatsapp.net", "fromMe": True, "id": "3EB0C5F1A2B3"},
        "message": {"conversation": "hi"},
        "messageTimestamp": "1700000000",
        "status": "SUCCESS",
    },
}


def classify(body: object | bytes, status: int = 200, headers: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return classify_send_response(status, headers or {}, content, now=NOW)


def test_accepted_only_with_a_message_id_at_message_key_id() -> None:
    out = classify(OK_REFERENCE)
    assert out.kind is OutcomeKind.ACCEPTED and out.accepted
    assert out.message_id == "3EB0C5F1A2B3"
    assert out.http_status == 200


def test_accepted_with_the_id_at_data_key_id() -> None:
    out = classify({"status": "success", "data": {"key": {"id": "ABCDEF"}}})
    assert (out.kind, out.message_id) == (OutcomeKind.ACCEPTED, "ABCDEF")


def test_success_without_a_key_is_a_failed_send_retryable() -> None:
    out = classify({"status": "success"})
    assert out.kind is OutcomeKind.RETRYABLE
    assert out.message_id is None
    assert "without a message id" in out.reason
    assert classify({"status": "success", "message": "Success"}).kind is OutcomeKind.RETRYABLE
    assert classify({"status": "success", "message": {"key": {}}}).kind is OutcomeKind.RETRYABLE


def test_quota_string_is_instance_quota_exhausted() -> None:
    text = "The number of messages you have sent per month has exceeded the maximum limit"
    out = classify({"status": "success", "message": text})
    assert (out.kind, out.problem) == (OutcomeKind.INSTANCE, InstanceProblem.QUOTA_EXHAUSTED)
    assert out.reason == text


@pytest.mark.parametrize(
    ("text", "kind", "problem"),
    [
        ("Access token is required", OutcomeKind.INSTANCE, InstanceProblem.BAD_TOKEN),
        ("Access token does not exist", OutcomeKind.INSTANCE, InstanceProblem.BAD_TOKEN),
        ("Instance ID is required", OutcomeKind.INSTANCE, InstanceProblem.INVALID_INSTANCE),
        ("Instance ID Invalidated", OutcomeKind.INSTANCE, InstanceProblem.INVALID_INSTANCE),
        (
            "This instance ID has not been activated yet",
            OutcomeKind.INSTANCE,
            InstanceProblem.NOT_ACTIVATED,
        ),
        (
            "This WhatsApp account relogin required",
            OutcomeKind.INSTANCE,
            InstanceProblem.RELOGIN_REQUIRED,
        ),
        ("Phone number is required", OutcomeKind.PERMANENT, None),
        ("Please enter media url or message", OutcomeKind.PERMANENT, None),
        ("Invalid number", OutcomeKind.PERMANENT, None),
        ("Invalid phone number", OutcomeKind.PERMANENT, None),
        ("Invalid group ID", OutcomeKind.PERMANENT, None),
        ("Media URL is required", OutcomeKind.PERMANENT, None),
        ("Invalid media url", OutcomeKind.PERMANENT, None),
        ("Invalid message: message.text must be a non-empty string", OutcomeKind.PERMANENT, None),
        ("Something went wrong", OutcomeKind.RETRYABLE, None),
        ("", OutcomeKind.RETRYABLE, None),
    ],
)
def test_http_200_error_bodies_mapped_by_text(
    text: str, kind: OutcomeKind, problem: InstanceProblem | None
) -> None:
    out = classify({"status": "error", "message": text})
    assert (out.kind, out.problem) == (kind, problem)
    assert out.message_id is None
    if text:
        assert text in out.reason


def test_error_status_wins_over_a_stray_key() -> None:
    out = classify(
        {"status": "error", "message": "Instance ID Invalidated", "data": {"key": {"id": "X"}}}
    )
    assert out.kind is OutcomeKind.INSTANCE


def test_relogin_flag() -> None:
    out = classify({"status": "error", "message": "Error", "relogin": True})
    assert (out.kind, out.problem) == (OutcomeKind.INSTANCE, InstanceProblem.RELOGIN_REQUIRED)


@pytest.mark.parametrize(
    "content", [b"[]", b"", b"   ", b"<html>502 Bad Gateway</html>", b"null", b'"ok"', b"\xff\xfe"]
)
def test_empty_list_empty_or_non_json_bodies_are_ambiguous(content: bytes) -> None:
    out = classify(content)
    assert out.kind is OutcomeKind.AMBIGUOUS
    assert out.message_id is None


@pytest.mark.parametrize("status", [429, 503, 500, 502, 408])
def test_refusals_are_retryable_with_retry_after_seconds(status: int) -> None:
    out = classify(b"busy", status=status, headers={"retry-after": "7"})
    assert (out.kind, out.retry_after, out.http_status) == (OutcomeKind.RETRYABLE, 7.0, status)


def test_retry_after_as_http_date() -> None:
    out = classify(b"", status=429, headers={"retry-after": "Fri, 02 Jan 2026 03:05:05 GMT"})
    assert out.kind is OutcomeKind.RETRYABLE
    assert out.retry_after == 60.0


def test_retry_after_parsing() -> None:
    assert parse_retry_after(None) is None
    assert parse_retry_after("") is None
    assert parse_retry_after("soon") is None
    assert parse_retry_after("nan") is None
    assert parse_retry_after("-5") == 0.0
    assert parse_retry_after("2.5") == 2.5
    assert parse_retry_after("Fri, 02 Jan 2026 03:00:00 GMT", NOW) == 0.0  # in the past


@pytest.mark.parametrize("status", [504, 524])
def test_gateway_timeouts_are_ambiguous(status: int) -> None:
    assert classify(b"", status=status).kind is OutcomeKind.AMBIGUOUS


@pytest.mark.parametrize("status", [404, 405, 301])
def test_missing_route_means_misconfigured_gateway(status: int) -> None:
    out = classify(b"Not Found", status=status)
    assert (out.kind, out.problem) == (OutcomeKind.INSTANCE, InstanceProblem.GATEWAY_MISCONFIGURED)
    assert "GATECAST_GATEWAY_URL" in out.reason


@pytest.mark.parametrize("status", [401, 403])
def test_auth_statuses_are_bad_token(status: int) -> None:
    out = classify(b"", status=status)
    assert (out.kind, out.problem) == (OutcomeKind.INSTANCE, InstanceProblem.BAD_TOKEN)


def test_other_client_errors_are_permanent() -> None:
    assert classify(b"", status=400).kind is OutcomeKind.PERMANENT
    assert classify(b"", status=414).kind is OutcomeKind.PERMANENT


def _req() -> httpx.Request:
    return httpx.Request("GET", "http://127.0.0.1:9/api/send?access_token=SECRET")


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        (httpx.ConnectError("refused", request=_req()), OutcomeKind.RETRYABLE),
        (httpx.ConnectTimeout("slow", request=_req()), OutcomeKind.RETRYABLE),
        (httpx.PoolTimeout("pool", request=_req()), OutcomeKind.RETRYABLE),
        (httpx.ReadTimeout("slow", request=_req()), OutcomeKind.AMBIGUOUS),
        (httpx.WriteTimeout("slow", request=_req()), OutcomeKind.AMBIGUOUS),
        (httpx.ReadError("reset", request=_req()), OutcomeKind.AMBIGUOUS),
        (httpx.RemoteProtocolError("dropped", request=_req()), OutcomeKind.AMBIGUOUS),
        (httpx.WriteError("broken pipe", request=_req()), OutcomeKind.AMBIGUOUS),
    ],
)
def test_transport_errors(exc: httpx.HTTPError, kind: OutcomeKind) -> None:
    assert classify_transport_error(exc).kind is kind
    assert is_certainly_unsent(exc) == (kind is OutcomeKind.RETRYABLE)


def test_extract_message_id_shapes() -> None:
    assert extract_message_id({"key": {"id": "A"}}) == "A"
    assert extract_message_id({"data": {"message": {"key": {"id": "B"}}}}) == "B"
    assert extract_message_id({"message": {"key": {"id": "  "}}}) is None
    assert extract_message_id({"message": {"key": {"id": 5}}}) is None
    assert extract_message_id([]) is None


def test_instance_responses() -> None:
    doc = interpret_instance_response(
        "create_instance",
        200,
        {},
        b'{"status":"success","message":"Instance ID generated successfully",'
        b'"instance_id":"6501A9176BD17"}',
    )
    assert instance_id_of(doc) == "6501A9176BD17"
    assert instance_id_of({"data": {"instance_id": "X1"}}) == "X1"
    with pytest.raises(GatewayError) as err:
        interpret_instance_response(
            "set_webhook",
            200,
            {},
            b'{"status":"error","message":"This instance ID has not been activated yet"}',
        )
    assert (err.value.kind, err.value.problem) == (
        OutcomeKind.INSTANCE,
        InstanceProblem.NOT_ACTIVATED,
    )
    assert str(err.value).startswith("set_webhook: ")
    with pytest.raises(GatewayError) as err:
        interpret_instance_response(
            "reconnect", 200, {}, b'{"status":"error","message":"Error","relogin":true}'
        )
    assert err.value.problem is InstanceProblem.RELOGIN_REQUIRED
    for content in (b"[]", b"", b"oops"):
        with pytest.raises(GatewayError) as err:
            interpret_instance_response("reboot", 200, {}, content)
        assert err.value.kind is OutcomeKind.AMBIGUOUS
    with pytest.raises(GatewayError) as err:
        interpret_instance_response("reboot", 503, {"retry-after": "3"}, b"")
    assert (err.value.kind, err.value.http_status) == (OutcomeKind.RETRYABLE, 503)
    with pytest.raises(GatewayError, match="You can only add up to 5 profiles") as err:
        interpret_instance_response(
            "create_instance",
            200,
            {},
            b'{"status":"error","message":"You can only add up to 5 profiles"}',
        )
    assert err.value.problem is InstanceProblem.QUOTA_EXHAUSTED


def test_qr_data_uri_shapes() -> None:
    png = "iVBORw0KGgo" + "A" * 80
    assert (
        qr_data_uri_of({"base64": "data:image/png;base64," + png}) == "data:image/png;base64," + png
    )
    assert qr_data_uri_of({"qrcode": png}) == "data:image/png;base64," + png
    assert (
        qr_data_uri_of({"data": {"base64": "data:image/png;base64,AAAA"}})
        == "data:image/png;base64,AAAA"
    )
    assert qr_data_uri_of({"status": "success", "message": "QR sent to the webhook"}) is None
