"""Request ids (decision 67): kept when sane, made otherwise, on every answer (errors,
the webhook, /healthz), echoed in problems, named in the access and error logs."""

from __future__ import annotations

import logging

import pytest

from gatecast.web import request_ids
from tests.web.conftest import LiveApp


@pytest.mark.parametrize(
    ("given", "kept"),
    [
        ("crm-7f3a.1", True),
        ("0f8fad5b-d9cb-469f-a165-70867728950e", True),
        ("trace:abc/def@x+y=z", True),
        ("a" * 128, True),
        ("a" * 129, False),
        ("two words", False),
        ("bad\u00e9", False),
        ("", False),
    ],
)
def test_a_given_id_is_kept_only_when_sane(given: str, kept: bool) -> None:
    assert request_ids.sane(given) is kept
    scope = {"type": "http", "headers": [(b"x-request-id", given.encode("utf-8"))]}
    rid = request_ids.assign(scope)
    assert (rid == given) is kept
    assert request_ids.assign(scope) == rid  # one id per request
    assert request_ids.sane(rid)


def test_every_answer_carries_it_and_problems_echo_it(live_sqlite: LiveApp) -> None:
    with live_sqlite.client() as api:
        ok = api.get("/api/v1/campaigns", headers={"X-Request-Id": "mine-1"})
        assert ok.headers["x-request-id"] == "mine-1"
        made = api.get("/healthz")
        assert len(made.headers["x-request-id"]) == 32
        other = api.get("/healthz")
        assert other.headers["x-request-id"] != made.headers["x-request-id"]
        missing = api.get("/api/v1/campaigns/424242", headers={"X-Request-Id": "mine-2"})
        assert missing.status_code == 404
        assert missing.json()["request_id"] == "mine-2" == missing.headers["x-request-id"]
        bad = api.post("/api/v1/instances/x/pause", json={"reason": 5})
        assert bad.status_code == 422
        assert bad.json()["request_id"] == bad.headers["x-request-id"]
        hook = api.post("/webhooks/gateway/wrong-secret", json={})
        assert hook.status_code == 404 and hook.headers["x-request-id"]


def _record(name: str, level: int, msg: str, *args: object) -> logging.LogRecord:
    return logging.LogRecord(name, level, __file__, 1, msg, args, None)


def test_the_logs_name_it() -> None:
    request_ids.install_request_id_logging()
    request_ids.install_request_id_logging()  # idempotent
    access = logging.getLogger("uvicorn.access")
    errors = logging.getLogger("uvicorn.error")
    assert sum(isinstance(f, request_ids.RequestIdFilter) for f in access.filters) == 1
    line = _record(
        "uvicorn.access",
        logging.INFO,
        '%s - "%s %s HTTP/%s" %d',
        "127.0.0.1:1",
        "GET",
        "/x",
        "1.1",
        200,
    )
    failure = _record("uvicorn.error", logging.ERROR, "Exception in ASGI application")
    outside = _record("uvicorn.error", logging.ERROR, "no request")
    token = request_ids.current.set("rid-42")
    try:
        assert access.filter(line) and errors.filter(failure)
    finally:
        request_ids.current.reset(token)
    assert errors.filter(outside)
    assert line.getMessage() == '127.0.0.1:1 request_id=rid-42 - "GET /x HTTP/1.1" 200'
    assert failure.getMessage() == "Exception in ASGI application (request_id=rid-42)"
    assert outside.getMessage() == "no request"
    assert [r.__dict__["request_id"] for r in (line, failure, outside)] == ["rid-42", "rid-42", "-"]
