"""``gatecast db``: schema migrations."""

from __future__ import annotations

import typer
from rich.console import Console

console = Console()
db_app = typer.Typer(help="Database schema (Alembic migrations).", no_args_is_help=True)


@db_app.command("upgrade")
def upgrade_cmd() -> None:
    """Upgrade the database schema to the latest revision."""
    from gatecast.settings import get_settings
    from storage.engine import current_revision, describe_url, make_engine, upgrade

    settings = get_settings()
    engine = make_engine(settings.database_url)
    upgrade(engine)
    console.print(
        f"schema at [bold]{current_revision(engine)}[/] on {describe_url(settings.database_url)}"
    )


@db_app.command("current")
def current_cmd() -> None:
    """Print the schema revision of the configured database."""
    from gatecast.commands.common import fail_without_database
    from gatecast.settings import get_settings
    from storage.engine import current_revision, make_engine

    settings = get_settings()
    fail_without_database(settings)
    engine = make_engine(settings.database_url)
    console.print(current_revision(engine) or "empty (run `gatecast db upgrade`)")


def register(app: typer.Typer) -> None:
    """Add ``gatecast db`` to the root app."""
    app.add_typer(db_app, name="db")
