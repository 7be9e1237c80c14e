"""The ``Idempotency-Key`` header of the creating POST routes.

A client (the dashboard's forms too) sends a key of its choosing with a request that
creates something. The first request with a key claims it in the database
(:mod:`campaigns.request_keys`) and stores its answer; a repeat with the same key
and the same request replays that answer (status and body, plus ``Idempotent-Replayed:
true``) without creating again, from any worker and after restarts. The same key with a
different request (method, path, query or body) is refused with 422
``idempotency_key_reused``. A repeat that arrives while the first is still being
processed waits for its answer (up to :data:`WAIT_FOR_FIRST`), else gets 409
``idempotency_key_in_progress``. Only successful answers are kept: when the first
request fails, its claim is dropped and the key may be used again.

Keys are scoped to the principal (the owner key in force, and the user for a user's key
or session: one user never replays another's answer) and kept :data:`KEEP_FOR` (24 hours).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import Depends, Header, Request
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse, Response
from pydantic import SecretStr

from campaigns import request_keys as keys
from campaigns.request_keys import ABANDONED_AFTER, KEEP_FOR, StoredKey
from gatecast.web.auth import identify
from gatecast.web.context import AppContext
from gatecast.web.problems import Problem

HEADER = "Idempotency-Key"
REPLAYED_HEADER = "Idempotent-Replayed"
#: how long a repeat waits for the first request's answer before answering 409
WAIT_FOR_FIRST = 30.0
MAX_KEY_LENGTH = 255


def _declare_header(
    idempotency_key: Annotated[
        str | None,
        Header(
            alias=HEADER,
            description="Your key for this creation (e.g. a UUID): a repeat with the same "
            "key and body replays the first answer instead of creating again (kept 24 h)",
        ),
    ] = None,
) -> None:
    """Declares the header in the OpenAPI document; :func:`run_once` reads and checks it."""
    del idempotency_key


#: add to a creating route's ``dependencies`` so its documentation shows the header
IDEMPOTENT = Depends(_declare_header)


def principal(request: Request) -> str:
    """Whose keys these are: a digest of the API key in force (never the key itself), and
    of the user for a user's request (one user never replays another's answer)."""
    key = request.app.state.api_key
    assert isinstance(key, SecretStr)
    identity = identify(request)
    user = b"" if identity is None or identity.user_id is None else b"\0user:%d" % identity.user_id
    digest = hashlib.sha256(b"gatecast-idempotency\0" + key.get_secret_value().encode() + user)
    return digest.hexdigest()[:32]


def request_key(request: Request) -> str | None:
    """The request's ``Idempotency-Key`` (None without one); 422 for an unusable key."""
    raw = request.headers.get(HEADER)
    if raw is None:
        return None
    key = raw.strip()
    if not key or len(key) > MAX_KEY_LENGTH or not key.isascii() or not key.isprintable():
        raise Problem(
            422,
            "invalid_idempotency_key",
            f"the {HEADER} header must be 1 to {MAX_KEY_LENGTH} printable ASCII characters",
            title="The idempotency key is not valid",
        )
    return key


def fingerprint(request: Request, body: Any) -> str:
    """What identifies a request: method, path, query and ``body`` (a JSON-able value;
    uploads pass their form fields and the file's name and SHA-256)."""
    query = sorted(request.query_params.multi_items())
    data = [request.method, request.url.path, query, jsonable_encoder(body)]
    encoded = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(encoded.encode()).hexdigest()


def _utc_z(value: datetime) -> str:
    text = value.isoformat()
    return text.removesuffix("+00:00") + "Z" if text.endswith("+00:00") else text


def answer_json(value: Any) -> Any:
    """``value`` (a model, a dataclass, JSON-able data) as JSON data, every UTC time
    written with ``Z`` as the routes' response models write it (``jsonable_encoder``
    writes a dataclass's ``+00:00``): one datetime format in every answer."""
    return jsonable_encoder(value, custom_encoder={datetime: _utc_z})


def location_of(template: str | None, answer: Any) -> dict[str, str]:
    """The ``Location`` header of a creation: ``template`` (``/api/v1/campaigns/{id}``)
    filled from the answer's fields, each quoted as a path segment; none without a
    template or when the answer lacks a field."""
    if template is None or not isinstance(answer, dict):
        return {}
    try:
        return {
            "Location": template.format_map({k: quote(str(v), safe="") for k, v in answer.items()})
        }
    except KeyError:
        return {}


def _replay(stored: StoredKey, location: str | None) -> Response:
    assert stored.status_code is not None
    body = stored.response_body or ""
    try:
        answer = json.loads(body)
    except ValueError:
        answer = None
    return Response(
        content=body.encode(),
        status_code=stored.status_code,
        media_type="application/json",
        headers={REPLAYED_HEADER: "true", **location_of(location, answer)},
    )


def _reused(key: str, stored: StoredKey) -> Problem:
    return Problem(
        422,
        "idempotency_key_reused",
        f"the {HEADER} {key!r} was already used for a different request "
        f"({stored.method} {stored.path} with another body); use a new key for a new request",
        title="Idempotency key already used for another request",
    )


def run_once(
    request: Request,
    ctx: AppContext,
    body: Any,
    create: Callable[[], Any],
    status_code: int,
    location: str | None = None,
) -> Response:
    """Answer ``create()`` (a model or JSON-able value) with ``status_code``, at most once
    per ``Idempotency-Key``; without the header, simply create. ``location``: the new
    resource's path template, filled from the answer (:func:`location_of`), sent as
    ``Location`` (on a replay too)."""
    key = request_key(request)
    if key is None:
        answer = answer_json(create())
        return JSONResponse(answer, status_code, headers=location_of(location, answer))
    who = principal(request)
    mine = fingerprint(request, body)
    asked = keys.KeyRequest(who, key, mine, request.method, request.url.path)
    deadline = time.monotonic() + WAIT_FOR_FIRST
    while True:
        now = ctx.clock()
        claimed, stored = keys.claim(ctx.engine, asked, now=now)
        if claimed:
            break
        if stored.fingerprint != mine:
            raise _reused(key, stored)
        if stored.done:
            return _replay(stored, location)
        if time.monotonic() > deadline:
            raise Problem(
                409,
                "idempotency_key_in_progress",
                f"a request with the {HEADER} {key!r} is still being processed; "
                "ask again in a moment to get its answer",
                title="The first request with this key is still running",
            )
        time.sleep(0.1)
    try:
        answer = answer_json(create())
        response = JSONResponse(answer, status_code, headers=location_of(location, answer))
    except BaseException:
        keys.release(ctx.engine, stored.id)
        raise
    keys.complete(
        ctx.engine,
        stored.id,
        status_code=status_code,
        response_body=bytes(response.body).decode(),
        now=ctx.clock(),
    )
    return response


__all__ = [
    "ABANDONED_AFTER",
    "HEADER",
    "IDEMPOTENT",
    "KEEP_FOR",
    "REPLAYED_HEADER",
    "WAIT_FOR_FIRST",
    "answer_json",
    "fingerprint",
    "location_of",
    "principal",
    "request_key",
    "run_once",
]
