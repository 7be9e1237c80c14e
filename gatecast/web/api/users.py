"""Users and their API keys (admins only: ``gatecast.web.roles``): add, list, show, change
role, disable or enable, set a password; keys created (the key shown once), listed,
revoked."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Path, Request, Response, status
from pydantic import AwareDatetime, BaseModel, Field

from campaigns import audit, users
from gatecast.web.api.common import Id, Limit, Offset, Page, RequestBody, field_error, not_found
from gatecast.web.audit import note_changes
from gatecast.web.auth import hashing
from gatecast.web.context import AppContext, get_ctx
from gatecast.web.idempotency import IDEMPOTENT, location_of, run_once

router = APIRouter(tags=["users"])
Ctx = Annotated[AppContext, Depends(get_ctx)]
Role = Literal["viewer", "operator", "admin"]
UserName = Annotated[str, Path(max_length=64, description="The user's name")]


class UserPublic(BaseModel):
    """A user (never its password)."""

    id: int
    name: str
    role: Role
    disabled: bool
    created_at: datetime
    password_changed_at: datetime


class UserCreate(RequestBody):
    """A new user: name, role and first password."""

    name: str = Field(max_length=64, description="Letters, digits, . _ @ -")
    role: Role
    password: str = Field(max_length=users.MAX_PASSWORD, description="At least 10 characters")


class UserChange(RequestBody):
    """What to change on a user (any of them). A new password or disabling ends the
    user's dashboard sessions; a lower role lowers its keys."""

    role: Role | None = None
    disabled: bool | None = None
    password: str | None = Field(None, max_length=users.MAX_PASSWORD)


class KeyPublic(BaseModel):
    """An API key's record: its first characters, never the key."""

    id: int
    user: str
    prefix: str = Field(description="The key's first characters, to tell it apart")
    label: str
    role: Role
    state: Literal["active", "expired", "revoked"]
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None
    last_used_at: datetime | None


class KeyCreated(KeyPublic):
    """A new key: keep it, it is not shown again."""

    key: str = Field(description="gck_...: send it as 'Authorization: Bearer <key>'")


class KeyCreate(RequestBody):
    """A new key: its role (default the user's, never higher) and when it expires."""

    role: Role | None = None
    expires_at: AwareDatetime | None = Field(None, description="None: it does not expire")
    label: str = Field("", max_length=200)


def _user(u: users.User) -> UserPublic:
    return UserPublic.model_validate(u.to_dict())


def _key(k: users.ApiKey, now: datetime) -> KeyPublic:
    return KeyPublic(
        id=k.id,
        user=k.user_name,
        prefix=k.prefix,
        label=k.label,
        role=k.role,
        state=k.state(now),
        created_at=k.created_at,
        expires_at=k.expires_at,
        revoked_at=k.revoked_at,
        last_used_at=k.last_used_at,
    )


def _refused(exc: users.UserError) -> Exception:
    return field_error(("body", exc.field), exc.message, "user")


def _found(ctx: AppContext, name: str) -> users.User:
    try:
        return users.get_user(ctx.engine, name)
    except users.NoSuchUser:
        raise not_found("user", name) from None


@router.get("/users", response_model=Page[UserPublic])
def get_users(ctx: Ctx, limit: Limit = 100, offset: Offset = 0) -> Page[UserPublic]:
    """The users, by name."""
    found = users.users_page(ctx.engine, limit=limit, offset=offset)
    return Page[UserPublic](
        items=[_user(u) for u in found.items], total=found.total, limit=limit, offset=offset
    )


@router.post("/users", response_model=UserPublic, status_code=201, dependencies=[IDEMPOTENT])
def post_user(body: UserCreate, ctx: Ctx, request: Request) -> Response:
    """Add a user; 422 naming the field for a taken or malformed name or a short
    password. ``Idempotency-Key`` honoured (a repeat replays the first answer)."""

    def create() -> UserPublic:
        try:
            created = users.create_user(
                ctx.engine, body.name, body.role, body.password, hashing(ctx.settings), ctx.clock()
            )
        except users.UserError as exc:
            raise _refused(exc) from None
        return _user(created)

    return run_once(request, ctx, body, create, status.HTTP_201_CREATED, "/api/v1/users/{name}")


@router.get("/users/{name}", response_model=UserPublic)
def get_one_user(name: UserName, ctx: Ctx) -> UserPublic:
    """One user."""
    return _user(_found(ctx, name))


@router.patch("/users/{name}", response_model=UserPublic)
def patch_user(name: UserName, body: UserChange, ctx: Ctx, request: Request) -> UserPublic:
    """Change a user's role, disable or enable it, or set its password (the audit entry
    holds the role and state before and after, and that the password changed)."""
    before = _found(ctx, name)
    try:
        if body.password is not None:
            users.set_password(ctx.engine, name, body.password, hashing(ctx.settings), ctx.clock())
        if body.role is not None:
            users.set_role(ctx.engine, name, body.role)
        if body.disabled is not None:
            users.set_disabled(ctx.engine, name, body.disabled)
    except users.UserError as exc:
        raise _refused(exc) from None
    after = _found(ctx, name)
    changes = audit.changed(
        {"role": before.role, "disabled": before.disabled},
        {"role": after.role, "disabled": after.disabled},
    )
    if body.password is not None:
        changes["password"] = [None, "changed"]
    note_changes(request, changes)
    return _user(after)


@router.get("/users/{name}/keys", response_model=Page[KeyPublic])
def get_keys(name: UserName, ctx: Ctx, limit: Limit = 100, offset: Offset = 0) -> Page[KeyPublic]:
    """The user's API keys (revoked and expired ones too), by id."""
    _found(ctx, name)
    found = users.keys_page(ctx.engine, name, limit=limit, offset=offset)
    now = ctx.clock()
    return Page[KeyPublic](
        items=[_key(k, now) for k in found.items], total=found.total, limit=limit, offset=offset
    )


@router.post("/users/{name}/keys", response_model=KeyCreated, status_code=201)
def post_key(name: UserName, body: KeyCreate, ctx: Ctx, response: Response) -> KeyCreated:
    """Create an API key for the user; the answer holds the key, shown this once. 422
    for a role above the user's or an expiry in the past. No ``Idempotency-Key``: a
    replay would keep the key readable in the stored answers; a repeated call makes a
    second key, which can be revoked."""
    _found(ctx, name)
    now = ctx.clock()
    try:
        created = users.create_key(
            ctx.engine, name, now, role=body.role, expires_at=body.expires_at, label=body.label
        )
    except users.UserError as exc:
        raise _refused(exc) from None
    made = KeyCreated(**_key(created.key, now).model_dump(), key=created.secret)
    # the key's own address (it is revoked there: DELETE)
    response.headers.update(location_of("/api/v1/users/{user}/keys/{id}", made.model_dump()))
    return made


@router.delete("/users/{name}/keys/{key_id}", status_code=204)
def delete_key(name: UserName, key_id: Id, ctx: Ctx, request: Request) -> Response:
    """Revoke the key (it stays listed as revoked); the dashboard sessions it opened
    end."""
    found = users.get_key(ctx.engine, key_id)
    if found is None or found.user_name != name:
        raise not_found("API key", key_id)
    now = ctx.clock()
    users.revoke_key(ctx.engine, key_id, now)
    note_changes(request, {"state": [found.state(now), "revoked"]})
    return Response(status_code=status.HTTP_204_NO_CONTENT)
