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


def open_engine_or_fail(settings: Settings | None = None) -> Engine:
    """The configured database, or a clean exit naming what is wrong with it."""
    from gatecast.runtime import SchemaOutOfDate, open_engine
    from gatecast.settings import get_settings

    try:
        return open_engine(settings or get_settings())
    except SchemaOutOfDate as exc:
        fail(str(exc), 2)
    except Exception as exc:  # unreachable server, bad URL, permissions
        fail(f"database: {exc}")
