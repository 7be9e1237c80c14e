"""What every command module shares: failing with one red line, opening the database,
ids as 64-bit arguments, the log lines of long-running commands."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape

if TYPE_CHECKING:
    from gatecast.settings import Settings
    from storage.engine import Engine

err_console = Console(stderr=True)

#: the largest id a database row has (a signed 64-bit integer)
INT64_MAX = 2**63 - 1


def log_to_stderr(level: str | int) -> None:
    """Log ``level`` and above to stderr, one ``LEVEL logger: message`` line each."""
    import logging

    if isinstance(level, str):
        level = level.upper()
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")


def id_argument(help: str) -> Any:
    """A row id argument: 1 to 2^63-1, anything else is a usage error naming it (exit 2)."""
    return typer.Argument(..., min=1, max=INT64_MAX, help=help)


def configured_secrets(settings: Settings | None = None) -> tuple[str, ...]:
    """The secret values a message must never show (access token, webhook secret, API key)."""
    from gatecast.settings import get_settings

    s = settings or get_settings()
    values = (s.access_token, s.webhook_secret, s.api_key)
    return tuple(v.get_secret_value() for v in values if v.get_secret_value())


def fail(message: str, code: int = 1) -> NoReturn:
    """Print ``error: message`` in red on stderr (secrets redacted) and exit with ``code``."""
    from gateway.errors import redact

    shown = redact(message, configured_secrets())
    err_console.print(f"[red]error:[/] {escape(shown)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def missing_database(settings: Settings) -> str | None:
    """Why there is no database to read (a SQLite file that does not exist), in the
    user's words, or None when there is one (or it is a server's)."""
    from storage.engine import sqlite_file

    database = sqlite_file(settings.database_url)
    if database is None or database.exists():
        return None
    return (
        f"there is no gatecast database here: {database.absolute()} does not exist. "
        "Run gatecast in your project's folder (where you imported contacts or created "
        "campaigns), or point GATECAST_DATABASE_URL at its database "
        "(e.g. sqlite:////path/to/project/gatecast.db)"
    )


def fail_without_database(settings: Settings) -> None:
    """End a command that only works on an existing database when there is none, rather
    than create an empty one (a command run in the wrong folder)."""
    problem = missing_database(settings)
    if problem is not None:
        fail(problem)


def open_engine_or_fail(settings: Settings | None = None, *, create: bool = False) -> Engine:
    """The configured database, or a clean exit naming what is wrong with it. Only a
    command that creates (``create``: an import, ``campaign create``, ``instance
    create`` ...) makes a SQLite file that does not exist yet."""
    from gatecast.runtime import SchemaOutOfDate, open_engine
    from gatecast.settings import get_settings

    settings = settings or get_settings()
    if not create:
        fail_without_database(settings)
    try:
        return open_engine(settings)
    except SchemaOutOfDate as exc:
        fail(str(exc), 2)
    except Exception as exc:  # unreachable server, bad URL, permissions
        fail(f"database: {exc}")


# --- the audit log of the command line ------------------------------------------------

#: leaf commands that only read (never audited)
READ_ONLY_COMMANDS = frozenset(
    {
        "list",
        "show",
        "status",
        "qr",
        "search",
        "export",
        "lists",
        "deliveries",
        "current",
        "uses",
        "replies",
    }
)
#: commands that run a process rather than make a change (never audited)
PROCESS_COMMANDS = frozenset({"sandbox", "serve", "receive", "worker", "demo", "report"})
#: an option whose value is never recorded (it may hold a secret)
_SECRET_OPTION = ("pass", "secret", "token", "key")


def command_path(root: typer.Typer, argv: list[str]) -> tuple[list[str], list[str]]:
    """``(the command's words, the arguments after them)`` of ``argv`` for the Typer app
    ``root``: ``campaign pause 3`` -> ``(["campaign", "pause"], ["3"])``.

    Walks the apps' registered groups and commands (every group here is added with its
    name) rather than build Click's command tree again: that costs a light command a
    tenth of a second after it ran (docs/architecture.md, decision 38)."""
    from typer.main import get_command_name

    app: typer.Typer | None = root
    path: list[str] = []
    rest = list(argv)
    while rest and app is not None:
        word = rest[0]
        if word.startswith("-"):
            rest.pop(0)
            continue
        groups = {group.name: group.typer_instance for group in app.registered_groups}
        commands = {
            command.name or get_command_name(command.callback.__name__)
            for command in app.registered_commands
            if command.callback is not None
        }
        if word in groups:
            app = groups[word]
        elif word not in commands:
            break
        else:
            app = None  # a leaf command: what follows are its arguments
        path.append(rest.pop(0))
    return path, rest


def _redacted(args: list[str]) -> list[str]:
    out: list[str] = []
    hide_next = False
    for arg in args:
        name = arg.split("=", 1)[0].lower()
        if hide_next:
            out.append("***")
            hide_next = False
        elif arg.startswith("--") and any(s in name for s in _SECRET_OPTION):
            if "=" in arg:
                out.append(name + "=***")
            else:
                out.append(arg)
                hide_next = not arg.endswith("-stdin")
        else:
            out.append(arg)
    return out


def is_changing(path: list[str], args: list[str]) -> bool:
    """Whether the command ``path`` (with ``args``) changes something: not a read, not a
    process, not ``--help``."""
    if not path or "--help" in args or "--version" in args:
        return False
    return not (path[0] in PROCESS_COMMANDS or path[-1] in READ_ONLY_COMMANDS)


#: what this process's command replaced, for its audit entry (:func:`note_changes`)
_NOTED_CHANGES: dict[str, Any] = {}


def note_changes(changes: dict[str, Any]) -> None:
    """For the command's audit entry: what it replaced, ``{field: [before, after]}``."""
    _NOTED_CHANGES.update(changes)


def record_cli_command(root: Any, argv: list[str], exit_code: int) -> None:
    """One audit entry for a changing command (:func:`is_changing`) that ended with
    ``exit_code``: actor ``cli:<os user>``, from this host, the command's words as the
    action, its first argument as the target, its arguments (option values that may be
    secrets hidden) in the detail. A usage error (exit 2) changed nothing and is not
    recorded; an entry that cannot be stored after a success is said on stderr."""
    if "--help" in argv:  # also ``campaign --help``: the group's words pass over the option
        return
    path, args = command_path(root, argv)
    if exit_code == 2 or not is_changing(path, args):
        return
    import getpass
    import socket

    from campaigns import audit
    from gatecast.runtime import open_engine
    from gatecast.settings import get_settings
    from storage.engine import sqlite_file
    from storage.types import utcnow

    settings = get_settings()
    database = sqlite_file(settings.database_url)
    if database is not None and not database.exists():
        return  # the command made no database: nothing to record in

    target = next((a for a in args if not a.startswith("-")), None)
    if path[-1] == "erase":  # the erased number must not outlive the erasure here
        target, args = "erased contact", [a for a in args if a.startswith("-")]
    kind = path[0].rstrip("s").replace("-", "_")
    if path[:2] == ["users", "key"]:
        kind = "api_key" if path[-1] == "revoke" else "user"
    try:
        engine = open_engine(settings)
        try:
            audit.record(
                engine,
                at=utcnow(),
                actor=f"cli:{getpass.getuser()}",
                role="cli",
                action=" ".join(path),
                outcome="ok" if exit_code == 0 else "failed",
                source=socket.gethostname(),
                target_type=kind,
                target_id=target,
                status=exit_code,
                detail={"command": " ".join(path), "args": _redacted(args)},
                changes=_NOTED_CHANGES if exit_code == 0 else None,
            )
        finally:
            engine.dispose()
    except Exception as exc:
        if exit_code == 0:
            err_console.print(f"warning: the audit log did not record this command: {exc}")
