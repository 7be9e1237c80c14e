"""The ``gatecast`` command line: one root Typer app, command groups in ``commands``."""

from __future__ import annotations

import typer

from gatecast.commands import campaign, contacts, db, demo, instance, sandbox, serve
from gatecast.settings import get_settings
from scheduler.clock import install_process_clock

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
    start = get_settings().clock_start
    if start is not None:
        install_process_clock(start)


def main() -> None:
    """Console-script entry point."""
    app()
