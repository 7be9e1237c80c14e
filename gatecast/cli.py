"""The ``gatecast`` command line: one root Typer app, command groups in ``commands``.

Command modules import their heavy libraries (SQLAlchemy, pandas, FastAPI, ...) inside
the commands, so ``--help`` and every command start without paying for the others.
"""

from __future__ import annotations

import typer

from gatecast.commands import campaign, contacts, db, demo, instance, sandbox, serve

app = typer.Typer(
    name="gatecast",
    help="Bulk campaigns and scheduling for WhatsApp-style messaging gateways.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,  # locals may hold secrets
)

for module in (instance, sandbox, contacts, campaign, serve, demo, db):
    module.register(app)


@app.callback()
def _root() -> None:
    """Bulk campaigns and scheduling for WhatsApp-style messaging gateways."""
    from gatecast.settings import get_settings

    start = get_settings().clock_start
    if start is not None:
        from scheduler.clock import install_process_clock

        install_process_clock(start)


def main() -> None:
    """Console-script entry point."""
    app()
