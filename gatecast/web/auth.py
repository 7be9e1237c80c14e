"""API-key authentication for the REST API, /metrics and the dashboard.

The key comes from ``GATECAST_API_KEY``. When that is unset, :func:`ensure_api_key`
generates one on first start and keeps it in a file (``.gatecast-api-key`` beside the
SQLite database, or in the working directory for PostgreSQL), readable by the owner
only; later starts read the same file. The caller prints a newly generated key once.

A key shorter than :data:`MIN_KEY_LENGTH` characters is refused (:class:`WeakApiKey`):
generated keys are 43 characters.

Clients authenticate with ``Authorization: Bearer <key>``; the dashboard signs in with
the same key and then carries a session cookie that points at a server-side record
(:mod:`gatecast.web.sessions`), throttled per client address
(:mod:`gatecast.web.sign_in_throttle`). Keys are compared in constant time and never
appear in responses, logs or reprs.

Users (issue 15): besides the owner key (``GATECAST_API_KEY``, acting as ``admin``),
named users sign in to the dashboard with their name and password, or call the API with
their own keys (``gck_...``, ``campaigns.users``). Who a request is (:class:`Identity`:
actor name, role, user, key) is worked out once per request (:func:`identify`), with one
role rule whatever the credential (``campaigns.users.acting_role``): a session opened with
a user's key carries that key, its role (never above it), its expiry and its revocation,
checked at every request. What that role may call is :mod:`gatecast.web.roles`, enforced
by :func:`require_api_key` for the API, /docs and /metrics and by the dashboard's
``require_session`` for its pages.

Cross-site request forgery: the session cookie is ``SameSite=Lax`` and, on top of that, a
request that changes something (any method but GET, HEAD, OPTIONS) authenticated by the
cookie alone must carry the :data:`DASHBOARD_HEADER` the dashboard's scripts send. A page
on another site can make a browser post a form with the cookie, but cannot add a custom
header without a CORS preflight, which gatecast never grants.
"""

from __future__ import annotations

import hmac
import os
import secrets
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Annotated

from fastapi import Depends, HTTPException, Request, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import SecretStr

from campaigns import dashboard_sessions, users
from campaigns.audit import OWNER_ACTOR
from gatecast.settings import Settings
from gatecast.web import roles, sessions
from gatecast.web.context import get_ctx
from gatecast.web.sign_in_throttle import SignInThrottle
from storage.engine import sqlite_file

KEY_FILE_NAME = ".gatecast-api-key"
#: the shortest API key accepted (generated keys are 43 characters)
MIN_KEY_LENGTH = 24
#: the header (and value) a cookie-authenticated state-changing request must carry
DASHBOARD_HEADER = ("X-Gatecast-Dashboard", "1")
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


@dataclass(frozen=True)
class ApiKey:
    """The API key in force, where it came from, and whether it was just generated."""

    value: SecretStr
    source: str  # "environment" | "file"
    path: Path | None = None
    created: bool = False


class WeakApiKey(ValueError):
    """The configured API key is too short to protect the API and the dashboard."""


def key_file_path(settings: Settings) -> Path:
    """Where a generated key is kept: beside the SQLite file, else the working directory."""
    database_file = sqlite_file(settings.database_url)
    if database_file is not None:
        return database_file.resolve().parent / KEY_FILE_NAME
    return Path.cwd() / KEY_FILE_NAME


def require_strong_key(value: str, where: str) -> None:
    """Raise :class:`WeakApiKey` when ``value`` (from ``where``) is shorter than
    :data:`MIN_KEY_LENGTH` characters."""
    if len(value) < MIN_KEY_LENGTH:
        raise WeakApiKey(
            f"the API key in {where} is {len(value)} characters long; it must be at least "
            f"{MIN_KEY_LENGTH} (it guards the API and the dashboard): choose a longer one, "
            "e.g. python3 -c 'import secrets; print(secrets.token_urlsafe(32))', or unset "
            "GATECAST_API_KEY and delete the key file to have one generated"
        )


def ensure_api_key(settings: Settings, *, key_file: Path | None = None) -> ApiKey:
    """The API key: from settings, else read from (or generated into) the key file.

    Raises :class:`WeakApiKey` for a configured or stored key that is too short."""
    configured = settings.api_key.get_secret_value()
    if configured:
        require_strong_key(configured, "GATECAST_API_KEY")
        return ApiKey(SecretStr(configured), "environment")
    path = key_file or key_file_path(settings)
    if path.exists():
        stored = path.read_text(encoding="utf-8").strip()
        if stored:
            require_strong_key(stored, str(path))
            return ApiKey(SecretStr(stored), "file", path)
    path.parent.mkdir(parents=True, exist_ok=True)
    value = secrets.token_urlsafe(32)
    # create with owner-only permissions from the start; O_EXCL: never clobber a racer's key
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return ApiKey(SecretStr(path.read_text(encoding="utf-8").strip()), "file", path)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(value + "\n")
    return ApiKey(SecretStr(value), "file", path, created=True)


def api_key_notice(key: ApiKey) -> str | None:
    """The one message that shows a newly generated key (print it once); None otherwise."""
    if not key.created:
        return None
    return (
        f"generated an API key (kept in {key.path}; set GATECAST_API_KEY to choose one):\n"
        f"  {key.value.get_secret_value()}\n"
        "use it to sign in to the dashboard and as 'Authorization: Bearer <key>' for the API"
    )


def sign_in_hint(key: ApiKey, base_url: str, *, show_key: bool) -> str:
    """How to sign in to the dashboard at ``base_url`` with the owner key ``key``: the key
    itself when ``show_key`` (the terminal of whoever started the server, never a log or
    a pipe), else where to read it."""
    login = f"{base_url.rstrip('/')}/login"
    if key.source == "environment":
        where = "the key in GATECAST_API_KEY"
    elif show_key:
        where = f"the owner key {key.value.get_secret_value()} (kept in {key.path})"
    else:
        where = f"the owner key kept in the file {key.path} (e.g. cat it)"
    return (
        f"sign in at {login} with {where}: paste it into the API key box, user name empty; "
        "add users and their own keys on the Users page"
    )


def dashboard_addresses(base_url: str) -> str:
    """Where the dashboard, the API and its docs are, for the start-up banner."""
    base = base_url.rstrip("/")
    return f"dashboard {base}/   API {base}/api/v1   docs {base}/docs"


def key_matches(expected: SecretStr, presented: str | None) -> bool:
    """Constant-time comparison of a presented key with the expected one."""
    if not presented:
        return False
    want = expected.get_secret_value().encode("utf-8")
    return bool(want) and hmac.compare_digest(want, presented.encode("utf-8"))


def bearer_token(request: Request) -> str | None:
    """The token of an ``Authorization: Bearer`` header, if any."""
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer":
        return None
    return token.strip() or None


def _expected(request: Request) -> SecretStr:
    key = request.app.state.api_key
    assert isinstance(key, SecretStr)
    return key


@dataclass(frozen=True)
class Identity:
    """Who a request is: the actor's name (a user's, or ``owner key``), the role it acts
    with, the user's id (None for the owner key), how it came (``key`` or ``session``)
    and the user's key behind it (the bearer key, or the key that opened the session;
    None for a password's session and the owner key)."""

    actor: str
    role: str
    user_id: int | None = None
    via: str = "key"
    key_id: int | None = None


OWNER = Identity(OWNER_ACTOR, roles.ADMIN)
IDENTITY_STATE = "gatecast_identity"


def identify(request: Request) -> Identity | None:
    """Who the request is: the owner key or a user's key (``Authorization: Bearer``),
    else a signed-in dashboard session; None when neither. Worked out once a request."""
    if hasattr(request.state, IDENTITY_STATE):
        found: Identity | None = getattr(request.state, IDENTITY_STATE)
        return found
    found = _identify(request)
    setattr(request.state, IDENTITY_STATE, found)
    return found


def _identify(request: Request) -> Identity | None:
    token = bearer_token(request)
    if token is not None:
        if key_matches(_expected(request), token):
            return OWNER
        ctx = get_ctx(request)
        holder = users.key_holder(ctx.engine, token, ctx.clock())
        if holder is not None:
            return Identity(holder.name, holder.role, holder.user_id, "key", holder.key_id)
    if not sessions.cookie_of(request):
        return None
    ctx = get_ctx(request)
    session = sessions.lookup(request, ctx.engine, _expected(request), ctx.clock())
    if session is None:
        return None
    if session.user_id is None:
        return Identity(OWNER_ACTOR, roles.ADMIN, None, "session")
    return Identity(
        session.name or "", session.role or roles.VIEWER, session.user_id, "session", session.key_id
    )


def is_authenticated(request: Request) -> bool:
    """True for a valid bearer key (the owner's or a user's) or a signed-in session."""
    return identify(request) is not None


def route_template(request: Request) -> str:
    """The matched route's path as declared (``/api/v1/campaigns/{campaign_id}/pause``):
    the request's path with each path parameter's segment named again, from the right
    (the router gives no prefixed template for routes of included routers)."""
    return template_of(request.scope["path"], request.scope.get("path_params") or {})


def template_of(path: str, params: dict[str, object]) -> str:
    """``path`` with the segments holding ``params``' values (in order, matched from the
    right) written as ``{name}``; ``path`` itself when a value is not one segment."""
    parts = path.split("/")
    end = len(parts)
    for name, value in reversed(list(params.items())):
        text = str(value)
        for i in range(end - 1, 0, -1):
            if parts[i] == text:
                parts[i] = "{" + name + "}"
                end = i
                break
        else:
            return path
    return "/".join(parts)


def authorise(request: Request, identity: Identity) -> None:
    """A 403 problem (``role_required``) unless ``identity``'s role may call this route
    (:func:`gatecast.web.roles.required_role`)."""
    template = route_template(request)
    needed = roles.required_role(request.method, template)
    if not users.at_least(identity.role, needed):
        raise roles.refusal(identity.role, needed, identity.actor, template)


def is_forgeable(request: Request) -> bool:
    """True for a state-changing request that only the session cookie authenticates and
    that lacks the dashboard's header: what a page on another site could make a browser
    send."""
    if request.method in _SAFE_METHODS:
        return False
    identity = identify(request)
    if identity is not None and identity.via == "key":
        return False
    name, value = DASHBOARD_HEADER
    return request.headers.get(name) != value


def unauthenticated() -> HTTPException:
    """The 401 answer to a request nobody is signed in for."""
    return HTTPException(
        status.HTTP_401_UNAUTHORIZED,
        detail="missing or wrong API key: send 'Authorization: Bearer <GATECAST_API_KEY>'"
        " or a user's key",
        headers={"WWW-Authenticate": "Bearer"},
    )


#: declares the scheme in the OpenAPI document (the /docs "Authorize" button); the check
#: itself is :func:`require_api_key`, which also accepts the dashboard's session
bearer_scheme = HTTPBearer(
    auto_error=False,
    scheme_name="apiKey",
    description="The API key: GATECAST_API_KEY, or the key `gatecast serve` generated",
)


def require_api_key(
    request: Request,
    _credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer_scheme)] = None,
) -> None:
    """FastAPI dependency: 401 unless the request carries a key (the owner's or a user's)
    or a session; 403 for a cookie-only state-changing request without the dashboard's
    header, and 403 ``role_required`` when the role may not call the route
    (:mod:`gatecast.web.roles`)."""
    identity = identify(request)
    if identity is None:
        raise unauthenticated()
    if is_forgeable(request):
        raise HTTPException(
            status.HTTP_403_FORBIDDEN,
            detail=f"refused: a request signed in by the session cookie must send the "
            f"{DASHBOARD_HEADER[0]} header (as the dashboard does), or use the API key",
        )
    authorise(request, identity)


@dataclass(frozen=True)
class SignIn:
    """What a sign-in attempt came to: a session id, or the HTTP status and words saying
    why not (with the seconds to wait when throttled)."""

    session_id: str | None
    status: int = status.HTTP_303_SEE_OTHER
    error: str | None = None
    retry_after: int | None = None
    #: who signed in (or tried to: the name given) and the role, for the audit log
    actor: str = ""
    role: str = ""


def client_address(request: Request) -> str:
    """The client's address (a trusted proxy's ``X-Forwarded-For``, applied by uvicorn)."""
    return request.client.host if request.client else "unknown"


def sign_in_throttle(request: Request) -> SignInThrottle:
    """The process's sign-in throttle (made with the app)."""
    throttle = request.app.state.sign_in_throttle
    assert isinstance(throttle, SignInThrottle)
    return throttle


def hashing(settings: Settings) -> users.Hashing:
    """The argon2 cost of new password hashes (``GATECAST_ARGON2_*``)."""
    return users.Hashing(settings.argon2_memory_kib, settings.argon2_time_cost)


def sign_in(request: Request, presented: str, *, name: str = "", password: str = "") -> SignIn:
    """Start a dashboard session for ``name`` and ``password`` (a user), or for the key
    ``presented`` (the owner key, or a user's key: the session carries it, its role and
    its expiry; with a ``name`` and no password, only a key of that user); refused when
    wrong, or when this address has failed too often lately (429, nothing even compared)."""
    throttle = sign_in_throttle(request)
    address = client_address(request)
    wait = throttle.retry_after(address)
    if wait is not None:
        return SignIn(
            None,
            status.HTTP_429_TOO_MANY_REQUESTS,
            f"Too many wrong keys from your address. Try again in {wait} "
            f"second{'' if wait == 1 else 's'}.",
            wait,
        )
    ctx = get_ctx(request)
    now = ctx.clock()
    user_id: int | None = None
    key_id: int | None = None
    key_expires_at: datetime | None = None
    actor, role = OWNER_ACTOR, roles.ADMIN
    if name and presented and not password:  # a user's name with that user's key
        if key_matches(_expected(request), presented):
            throttle.failed(address)  # counted as any refusal: no free guesses this way
            return SignIn(
                None,
                status.HTTP_401_UNAUTHORIZED,
                "That key is the deployment's owner key, not a key of a user: "
                "leave User empty to sign in with it.",
                actor=name[:64],
            )
        holder = users.key_holder(ctx.engine, presented, now)
        if holder is not None and holder.name != name:
            holder = None
        wrong = f"That key is not a key of user {name[:64]!r}, or it was revoked or expired."
    elif name:
        holder = users.authenticate(ctx.engine, name, password, hashing(ctx.settings))
        wrong = "That user name or password is not right."
    elif key_matches(_expected(request), presented):
        holder, wrong = None, ""
    else:
        holder = users.key_holder(ctx.engine, presented, now)
        wrong = "That key is not right."
        if holder is None:
            name = "(a key)"
    if holder is not None:
        user_id, key_id, actor, role = holder.user_id, holder.key_id, holder.name, holder.role
        key_expires_at = holder.expires_at
    elif wrong:
        throttle.failed(address)
        return SignIn(None, status.HTTP_401_UNAUTHORIZED, wrong, actor=name[:64])
    throttle.succeeded(address)
    sessions.end(ctx.engine, sessions.cookie_of(request))  # signing in again: a new session
    session_id = dashboard_sessions.open_session(
        ctx.engine,
        _expected(request),
        now,
        user_id=user_id,
        api_key_id=key_id,
        key_expires_at=key_expires_at,
    )
    return SignIn(session_id, actor=actor, role=role)


def sign_out(request: Request) -> None:
    """End the dashboard session: its record is deleted, so its cookie no longer works."""
    sessions.end(get_ctx(request).engine, sessions.cookie_of(request))


__all__ = [
    "KEY_FILE_NAME",
    "MIN_KEY_LENGTH",
    "OWNER",
    "ApiKey",
    "Identity",
    "SignIn",
    "WeakApiKey",
    "api_key_notice",
    "authorise",
    "bearer_token",
    "client_address",
    "dashboard_addresses",
    "ensure_api_key",
    "hashing",
    "identify",
    "is_authenticated",
    "is_forgeable",
    "key_file_path",
    "key_matches",
    "require_api_key",
    "require_strong_key",
    "route_template",
    "sign_in",
    "sign_in_hint",
    "sign_out",
    "template_of",
    "unauthenticated",
]
