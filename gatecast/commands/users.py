"""``gatecast users``: named users with a role (viewer, operator, admin) and their API
keys: the first admin, add, list, disable, enable, set-role, passwd; ``users key``
create, list, revoke."""

from __future__ import annotations

import json
import sys
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from gatecast.commands.common import fail, id_argument, note_changes, open_engine_or_fail

if TYPE_CHECKING:
    from campaigns.users import ApiKey, Hashing, User

console = Console()
users_app = typer.Typer(
    help="Users and roles: the first admin, add, list, disable, set a role or password; "
    "their API keys.",
    no_args_is_help=True,
)
key_app = typer.Typer(help="A user's API keys: create (shown once), list, revoke.")
users_app.add_typer(key_app, name="key")

NameArg = Annotated[str, typer.Argument(help="the user's name")]
PasswordStdin = Annotated[
    bool,
    typer.Option(
        "--password-stdin", help="read the password from the first line of stdin (no prompt)"
    ),
]
RoleOption = Annotated[str, typer.Option("--role", "-r", help="viewer, operator or admin")]


def _hashing() -> Hashing:
    from campaigns.users import Hashing
    from gatecast.settings import get_settings

    s = get_settings()
    return Hashing(s.argon2_memory_kib, s.argon2_time_cost)


def _password(from_stdin: bool) -> str:
    if from_stdin:
        line = sys.stdin.readline()
        if not line:
            fail("--password-stdin: nothing on stdin")
        return line.rstrip("\r\n")
    return str(typer.prompt("password", hide_input=True, confirmation_prompt=True))


def _now() -> datetime:
    from storage.types import utcnow

    return utcnow()


def _show_user(u: User) -> None:
    state = "disabled" if u.disabled else "enabled"
    console.print(f"user {escape(u.name)}: {u.role}, {state}")


def _add(name: str, role: str, from_stdin: bool) -> None:
    from campaigns.users import UserError, check_name, check_role, create_user

    try:  # said before the password is asked for
        check_name(name)
        check_role(role)
    except UserError as exc:
        fail(str(exc))
    password = _password(from_stdin)
    engine = open_engine_or_fail(create=True)
    try:
        _show_user(create_user(engine, name, role, password, _hashing(), _now()))
    except UserError as exc:
        fail(str(exc))
    finally:
        engine.dispose()


@users_app.command("create-admin")
def create_admin_cmd(name: NameArg, password_stdin: PasswordStdin = False) -> None:
    """Create an admin user (the first one: it then signs in to the dashboard and
    manages the others)."""
    _add(name, "admin", password_stdin)


@users_app.command("add")
def add_cmd(
    name: NameArg, role: RoleOption = "operator", password_stdin: PasswordStdin = False
) -> None:
    """Add a user with a role and a password (asked for, or --password-stdin)."""
    _add(name, role, password_stdin)


@users_app.command("list")
def list_cmd(
    as_json: Annotated[bool, typer.Option("--json", help="print as JSON")] = False,
) -> None:
    """The users, by name."""
    from campaigns.users import users_page

    engine = open_engine_or_fail()
    try:
        page = users_page(engine, limit=10_000)
    finally:
        engine.dispose()
    if as_json:
        print(json.dumps([u.to_dict() for u in page.items], default=str))
        return
    if not page.items:
        console.print("no users yet: gatecast users create-admin NAME")
        return
    table = Table(title="Users")
    for column in ("name", "role", "state", "created"):
        table.add_column(column)
    for u in page.items:
        state = "disabled" if u.disabled else "enabled"
        table.add_row(escape(u.name), u.role, state, u.created_at.strftime("%Y-%m-%d %H:%M"))
    console.print(table)


def _change(name: str, change: str, value: object = None) -> None:
    from campaigns.users import (
        NoSuchUser,
        UserError,
        get_user,
        set_disabled,
        set_password,
        set_role,
    )

    engine = open_engine_or_fail()
    try:
        before = get_user(engine, name)
        if change == "role":
            user = set_role(engine, name, str(value))
        elif change == "password":
            user = set_password(engine, name, str(value), _hashing(), _now())
        else:
            user = set_disabled(engine, name, bool(value))
    except (UserError, NoSuchUser) as exc:
        fail(str(exc).strip('"'))
    finally:
        engine.dispose()
    if change == "password":
        note_changes({"password": [None, "changed"]})
    else:
        note_changes({change: [getattr(before, change), getattr(user, change)]})
    _show_user(user)


@users_app.command("disable")
def disable_cmd(name: NameArg) -> None:
    """Disable a user: its sessions end, its sign-ins and keys are refused."""
    _change(name, "disabled", True)


@users_app.command("enable")
def enable_cmd(name: NameArg) -> None:
    """Enable a disabled user again (its keys work again unless revoked)."""
    _change(name, "disabled", False)


@users_app.command("set-role")
def set_role_cmd(
    name: NameArg, role: Annotated[str, typer.Argument(help="viewer, operator or admin")]
) -> None:
    """Give a user another role (its keys above it are lowered to it)."""
    _change(name, "role", role)


@users_app.command("passwd")
def passwd_cmd(name: NameArg, password_stdin: PasswordStdin = False) -> None:
    """Set a user's password (its dashboard sessions end)."""
    _change(name, "password", _password(password_stdin))


def _key_row(k: ApiKey, now: datetime) -> dict[str, object]:
    return {
        "id": k.id,
        "user": k.user_name,
        "prefix": k.prefix,
        "label": k.label,
        "role": k.role,
        "state": k.state(now),
        "created_at": k.created_at.isoformat(),
        "expires_at": k.expires_at.isoformat() if k.expires_at else None,
        "last_used_at": k.last_used_at.isoformat() if k.last_used_at else None,
    }


@key_app.command("create")
def key_create_cmd(
    name: NameArg,
    role: Annotated[
        str | None, typer.Option("--role", "-r", help="default: the user's; never higher")
    ] = None,
    expires_in_days: Annotated[
        float | None,
        typer.Option("--expires-in-days", min=0.0001, help="the key stops working after this"),
    ] = None,
    label: Annotated[str, typer.Option("--label", help="what the key is for")] = "",
    as_json: Annotated[bool, typer.Option("--json", help="print as JSON")] = False,
) -> None:
    """Create an API key for a user and print it (shown this once: keep it)."""
    from campaigns.users import NoSuchUser, UserError, create_key

    now = _now()
    # a huge number of days is refused by create_key (MAX_KEY_LIFETIME), not by an overflow
    days = None if expires_in_days is None else min(expires_in_days, 1e6)
    expires = now + timedelta(days=days) if days is not None else None
    engine = open_engine_or_fail()
    try:
        created = create_key(engine, name, now, role=role, expires_at=expires, label=label)
    except (UserError, NoSuchUser) as exc:
        fail(str(exc).strip('"'))
    finally:
        engine.dispose()
    if as_json:
        print(json.dumps({**_key_row(created.key, now), "key": created.secret}))
        return
    k = created.key
    until = f", expires {k.expires_at:%Y-%m-%d %H:%M} UTC" if k.expires_at else ""
    console.print(f"API key {k.id} for {escape(k.user_name)}: {k.role}{until}")
    console.print(f"key (shown once, keep it): {created.secret}", highlight=False)


@key_app.command("list")
def key_list_cmd(
    name: Annotated[str | None, typer.Argument(help="only this user's keys")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print as JSON")] = False,
) -> None:
    """API keys (revoked and expired ones too): their first characters, never the key."""
    from campaigns.users import NoSuchUser, keys_page

    now = _now()
    engine = open_engine_or_fail()
    try:
        page = keys_page(engine, name, limit=10_000)
    except NoSuchUser as exc:
        fail(str(exc).strip('"'))
    finally:
        engine.dispose()
    rows = [_key_row(k, now) for k in page.items]
    if as_json:
        print(json.dumps(rows))
        return
    table = Table(title="API keys")
    for column in ("id", "user", "prefix", "role", "state", "expires", "label"):
        table.add_column(column)
    for r in rows:
        table.add_row(
            str(r["id"]),
            escape(str(r["user"])),
            str(r["prefix"]),
            str(r["role"]),
            str(r["state"]),
            str(r["expires_at"] or "never"),
            escape(str(r["label"])),
        )
    console.print(table)


@key_app.command("revoke")
def key_revoke_cmd(key_id: Annotated[int, id_argument("the key's id (users key list)")]) -> None:
    """Revoke an API key: refused from now on; dashboard sessions it opened end."""
    from campaigns.users import get_key, revoke_key

    engine = open_engine_or_fail()
    try:
        found = get_key(engine, key_id)
        done = revoke_key(engine, key_id, _now())
    finally:
        engine.dispose()
    if not done or found is None:
        fail(f"no API key {key_id} (gatecast users key list)")
    note_changes({"state": [found.state(_now()), "revoked"]})
    console.print(f"API key {key_id} revoked")


def register(app: typer.Typer) -> None:
    """Add ``gatecast users`` to the root app."""
    app.add_typer(users_app, name="users")
