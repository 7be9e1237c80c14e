"""Users, their roles and their API keys (issue 15).

Roles, lowest first: ``viewer`` (reads), ``operator`` (reads and changes campaigns,
contacts, imports, instances), ``admin`` (everything, users and keys included). Which
route needs which role is ``gatecast.web.roles``; this module holds the words and their
order (:data:`ROLES`, :func:`at_least`).

A password is kept as an argon2id hash (argon2-cffi); its cost is the caller's
:class:`Hashing` (``GATECAST_ARGON2_MEMORY_KIB`` / ``GATECAST_ARGON2_TIME_COST``). An API key is
``gck_`` and 43 random characters, shown once; only its SHA-256 is stored (a key that
random cannot be guessed back from its digest, so a slow hash adds nothing). A key has a
role no higher than its user's when it is made, and acts with the lower of the two
afterwards (demoting a user demotes its keys at once).

What a user's credential may do is one rule (:func:`acting_role`), whatever the
credential: a password session acts with the user's current role; a key, and a dashboard
session opened with a key, with the lower of the key's and the user's current role, and
only while the key is in force (neither revoked nor expired).

Ending access: disabling a user refuses its sign-ins, sessions and keys; a password change
ends its sessions; revoking a key ends it and the dashboard sessions it opened, and so does
its expiry (checked at every request).
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from sqlalchemy import Engine, RowMapping

from campaigns.names import name_problem
from campaigns.paging import Page
from storage.queries import users as q

#: the roles, lowest first
ROLES = ("viewer", "operator", "admin")
_RANK = {role: n for n, role in enumerate(ROLES)}
#: what an API key starts with (tells it from the owner key in logs and scanners)
KEY_PREFIX = "gck_"
#: characters of a key kept in clear to tell keys apart in listings
SHOWN_PREFIX = 12
MIN_PASSWORD = 10
MAX_PASSWORD = 1024
#: the furthest ahead a key's expiry may be (about five years): a later date is a typo or
#: a key meant never to expire (give no expiry then)
MAX_KEY_LIFETIME = timedelta(days=1826)
#: the longest key label
MAX_KEY_LABEL = 200
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$")


def at_least(role: str, needed: str) -> bool:
    """Whether ``role`` may do what ``needed`` may (unknown roles may nothing)."""
    return role in _RANK and _RANK[role] >= _RANK[needed]


def lower(a: str, b: str) -> str:
    """The lower of two roles."""
    return a if _RANK.get(a, -1) <= _RANK.get(b, -1) else b


def acting_role(user_role: str, key_role: str | None) -> str:
    """THE rule for what a user's credential acts as: the user's current role, lowered to
    the key's when it came with a key (the key itself, or a dashboard session opened with
    it). The owner key is not a user's: it acts as ``admin``."""
    return user_role if key_role is None else lower(key_role, user_role)


class UserError(ValueError):
    """A request about users or keys refused: ``field`` names what is wrong."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class NoSuchUser(LookupError):
    """No user by that name (or id)."""


@dataclass(frozen=True)
class Hashing:
    """The argon2id cost of new password hashes (existing hashes carry their own)."""

    memory_kib: int = 65536
    time_cost: int = 3

    def hasher(self) -> PasswordHasher:
        """A hasher with this cost."""
        return PasswordHasher(time_cost=self.time_cost, memory_cost=self.memory_kib, parallelism=1)


@dataclass(frozen=True)
class User:
    """A user as the faces show it (never the hash)."""

    id: int
    name: str
    role: str
    disabled: bool
    created_at: datetime
    password_changed_at: datetime

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form."""
        return {**self.__dict__}


@dataclass(frozen=True)
class ApiKey:
    """An API key as listings show it: its first characters, never the key."""

    id: int
    user_id: int
    user_name: str
    prefix: str
    label: str
    role: str
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None
    last_used_at: datetime | None

    def state(self, now: datetime) -> str:
        """``active``, ``expired`` or ``revoked``."""
        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at is not None and self.expires_at <= now:
            return "expired"
        return "active"


@dataclass(frozen=True)
class CreatedKey:
    """A new key: the key itself (shown this once) and its record."""

    secret: str
    key: ApiKey


@dataclass(frozen=True)
class Holder:
    """Who a key or a password belongs to, the role it acts with and, for a key, its id
    and when it expires (None: never)."""

    user_id: int
    name: str
    role: str
    key_id: int | None = None
    expires_at: datetime | None = None


def _user(row: RowMapping) -> User:
    return User(**{c: row[c] for c in q.USER_COLUMNS})


def _key(row: RowMapping) -> ApiKey:
    return ApiKey(**{c: row[c] for c in (*q.KEY_COLUMNS, "user_name")})


def check_role(role: str, field: str = "role") -> str:
    """``role`` when it is one of :data:`ROLES`, else :class:`UserError`."""
    if role not in _RANK:
        raise UserError(field, f"{role!r} is not a role: use {', '.join(ROLES)}")
    return role


def check_name(name: str) -> str:
    """A user name: 1 to 64 letters, digits, ``. _ @ -``, starting with a letter or digit."""
    name = name.strip()
    if not _NAME.match(name):
        raise UserError(
            "name", "use 1 to 64 letters, digits, '.', '_', '@' or '-', starting with a letter"
        )
    return name


def check_password(password: str) -> str:
    """A password of :data:`MIN_PASSWORD` to :data:`MAX_PASSWORD` characters."""
    if len(password) < MIN_PASSWORD:
        raise UserError("password", f"use at least {MIN_PASSWORD} characters")
    if len(password) > MAX_PASSWORD:
        raise UserError("password", f"use at most {MAX_PASSWORD} characters")
    return password


def create_user(
    engine: Engine, name: str, role: str, password: str, hashing: Hashing, now: datetime
) -> User:
    """A new user; :class:`UserError` for a taken or malformed name, a role that is not
    one, or a short password (nothing stored then)."""
    name = check_name(name)
    check_role(role)
    check_password(password)
    if q.user_by_name(engine, name) is not None:
        raise UserError("name", f"a user named {name!r} exists already")
    user_id = q.add_user(
        engine, name=name, role=role, password_hash=hashing.hasher().hash(password), now=now
    )
    if user_id is None:  # stored by a request that ran beside this one (a double click)
        raise UserError("name", f"a user named {name!r} exists already")
    found = q.user_by_id(engine, user_id)
    assert found is not None
    return _user(found)


def get_user(engine: Engine, name: str) -> User:
    """The user named ``name``, or :class:`NoSuchUser`."""
    found = q.user_by_name(engine, name)
    if found is None:
        raise NoSuchUser(f"no user named {name!r}")
    return _user(found)


def users_page(engine: Engine, *, limit: int = 100, offset: int = 0) -> Page[User]:
    """One page of the users, by name."""
    total, rows = q.users_page(engine, limit=limit, offset=offset)
    return Page([_user(r) for r in rows], total)


#: verified when the name is unknown, so an unknown name takes as long as a wrong password
_DUMMY: dict[Hashing, str] = {}


def authenticate(engine: Engine, name: str, password: str, hashing: Hashing) -> Holder | None:
    """The user when ``name`` and ``password`` match an enabled user, else None."""
    name = name.strip()
    # a name no user can have is not looked up (a NUL would fail on PostgreSQL)
    found = q.user_by_name(engine, name) if _NAME.match(name) else None
    hasher = hashing.hasher()
    if found is None:
        dummy = _DUMMY.setdefault(hashing, hasher.hash(secrets.token_urlsafe(16)))
        with contextlib.suppress(VerificationError):
            hasher.verify(dummy, password)
        return None
    try:
        hasher.verify(found["password_hash"], password)
    except (VerificationError, InvalidHashError):
        return None
    if found["disabled"]:
        return None
    return Holder(int(found["id"]), str(found["name"]), str(found["role"]))


def set_role(engine: Engine, name: str, role: str) -> User:
    """Give the user ``role``; its keys above it are lowered to it. Its sessions go on
    with at most the new role (a session reads the user's and its key's role at each
    request: :func:`acting_role`)."""
    check_role(role)
    user = get_user(engine, name)
    allowed = tuple(r for r in ROLES if at_least(role, r))
    q.change_user(engine, user.id, role=role, cap_keys_to=(role, allowed))
    return get_user(engine, name)


def set_disabled(engine: Engine, name: str, disabled: bool = True) -> User:
    """Disable (or enable again) the user; disabling ends its sessions, and its keys are
    refused while it stays disabled."""
    user = get_user(engine, name)
    q.change_user(engine, user.id, disabled=disabled, end_sessions=disabled)
    return get_user(engine, name)


def set_password(engine: Engine, name: str, password: str, hashing: Hashing, now: datetime) -> User:
    """A new password for the user; its dashboard sessions end."""
    check_password(password)
    user = get_user(engine, name)
    q.change_user(
        engine,
        user.id,
        password_hash=hashing.hasher().hash(password),
        password_changed_at=now,
        end_sessions=True,
    )
    return get_user(engine, name)


def key_digest(secret: str) -> str:
    """The stored form of an API key."""
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def create_key(
    engine: Engine,
    user_name: str,
    now: datetime,
    *,
    role: str | None = None,
    expires_at: datetime | None = None,
    label: str = "",
) -> CreatedKey:
    """A new API key for the user, with ``role`` (default: the user's), which may not be
    higher than the user's; ``expires_at`` must be in the future, and at most
    :data:`MAX_KEY_LIFETIME` ahead."""
    user = get_user(engine, user_name)
    if user.disabled:
        raise UserError("user", f"{user.name} is disabled")
    role = check_role(role or user.role)
    if not at_least(user.role, role):
        raise UserError("role", f"{user.name} is {user.role}: a key may not be {role}")
    if expires_at is not None and expires_at <= now:
        raise UserError("expires_at", "is not in the future")
    if expires_at is not None and expires_at > now + MAX_KEY_LIFETIME:
        latest = (now + MAX_KEY_LIFETIME).date().isoformat()
        raise UserError(
            "expires_at",
            f"is more than {MAX_KEY_LIFETIME.days} days ahead (at most {latest}); "
            "give no expiry for a key that does not expire",
        )
    if len(label) > MAX_KEY_LABEL:
        raise UserError("label", f"use at most {MAX_KEY_LABEL} characters")
    if (problem := name_problem(label)) is not None:
        raise UserError("label", problem)
    secret = KEY_PREFIX + secrets.token_urlsafe(32)
    key_id = q.add_key(
        engine,
        user_id=user.id,
        digest=key_digest(secret),
        prefix=secret[:SHOWN_PREFIX],
        label=label,
        role=role,
        now=now,
        expires_at=expires_at,
    )
    found = q.key_by_id(engine, key_id)
    assert found is not None
    return CreatedKey(secret, _key(found))


def key_holder(engine: Engine, secret: str, now: datetime) -> Holder | None:
    """Who the key ``secret`` belongs to and the role it acts with (the lower of the
    key's and the user's), when it is in force; None for anything else."""
    if not secret.startswith(KEY_PREFIX) or len(secret) > 200:
        return None
    found = q.key_holder(engine, key_digest(secret), now)
    if found is None:
        return None
    return Holder(
        int(found["user_id"]),
        str(found["name"]),
        acting_role(str(found["user_role"]), str(found["key_role"])),
        int(found["key_id"]),
        found["expires_at"],
    )


def keys_page(
    engine: Engine, user_name: str | None = None, *, limit: int = 100, offset: int = 0
) -> Page[ApiKey]:
    """One page of API keys (one user's, or everyone's), by id."""
    user_id = None if user_name is None else get_user(engine, user_name).id
    total, rows = q.keys_page(engine, user_id=user_id, limit=limit, offset=offset)
    return Page([_key(r) for r in rows], total)


def get_key(engine: Engine, key_id: int) -> ApiKey | None:
    """One API key's record, or None."""
    found = q.key_by_id(engine, key_id)
    return None if found is None else _key(found)


def revoke_key(engine: Engine, key_id: int, now: datetime) -> bool:
    """Revoke the key (it stays listed as revoked); the dashboard sessions it opened end.
    False when there is no such key."""
    return q.revoke_key(engine, key_id, now)


__all__ = [
    "KEY_PREFIX",
    "ROLES",
    "ApiKey",
    "CreatedKey",
    "Hashing",
    "Holder",
    "NoSuchUser",
    "User",
    "UserError",
    "acting_role",
    "at_least",
    "authenticate",
    "check_name",
    "check_password",
    "check_role",
    "create_key",
    "create_user",
    "get_key",
    "get_user",
    "key_digest",
    "key_holder",
    "keys_page",
    "lower",
    "revoke_key",
    "set_disabled",
    "set_password",
    "set_role",
    "users_page",
]
