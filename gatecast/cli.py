"""The ``gatecast`` command line: one root Typer app, command groups in ``commands``.

Command modules import their heavy libraries (SQLAlchemy, pandas, FastAPI, ...) inside
the commands, so ``--help`` and every command start without paying for the others.
"""

from __future__ import annotations

from typing import Annotated

import typer

from gatecast.commands import (
    audit,
    campaign,
    campaign_operator,
    contacts,
    db,
    demo,
    instance,
    media,
    message,
    receive,
    rules,
    sandbox,
    segment,
    serve,
    stop,
    users,
    web,
    webhook_endpoints,
    worker,
)

app = typer.Typer(
    name="gatecast",
    help="Bulk campaigns and scheduling for WhatsApp-style messaging gateways.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,  # locals may hold secrets
)

for module in (
    instance,
    sandbox,
    contacts,
    segment,
    campaign,
    campaign_operator,
    message,
    rules,
    media,
    webhook_endpoints,
    users,
    audit,
    serve,
    receive,
    web,
    stop,
    worker,
    demo,
    db,
):
    module.register(app)


def _print_version(value: bool) -> None:
    if value:
        from gatecast.entry import version_text

        typer.echo(version_text())
        raise typer.Exit()


@app.callback()
def _root(
    _version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_print_version,
            is_eager=True,
            help="Print the installed version and the database schema it needs, then exit.",
        ),
    ] = False,
) -> None:
    """Bulk campaigns and scheduling for WhatsApp-style messaging gateways."""
    from pydantic import ValidationError

    from gatecast.settings import get_settings

    try:
        settings = get_settings()
    except ValidationError as exc:  # a setting's value is refused: name it, not a traceback
        for error in exc.errors(include_input=False, include_url=False):
            if error["loc"]:
                name = "GATECAST_" + "_".join(str(part) for part in error["loc"]).upper()
                typer.echo(f"error: {name}: {error['msg']}", err=True)
            else:  # a rule between settings: its message names them
                typer.echo(f"error: {error['msg'].removeprefix('Value error, ')}", err=True)
        raise typer.Exit(2) from None
    from scheduler.care import configure

    configure(settings.care())  # sender care settings of this process (GATECAST_*)
    start = settings.clock_start
    if start is not None:
        from scheduler.clock import install_process_clock

        install_process_clock(start)


def for_command(root: typer.Typer, argv: list[str]) -> typer.Typer:
    """``root`` holding only the group and command that ``argv``'s first words name, each
    level as far as a word names one of its groups or commands exactly (a copy: ``root``
    is unchanged). Typer builds the Click command of every command an app holds (their
    parameters from the functions' type hints) before it parses the arguments: for all
    73 that is about as much CPU as the command itself (docs/architecture.md, decision
    48). What the command prints (its help, its usage errors) is the full tree's: a word
    that names nothing (a typo, an option) stops the narrowing there, so Click sees every
    choice where it lists them."""
    import copy

    from typer.main import get_command_name

    narrowed = copy.copy(root)
    level = narrowed
    for word in argv:
        groups = [g for g in level.registered_groups if g.name == word]
        commands = [
            c
            for c in level.registered_commands
            if c.callback is not None and (c.name or get_command_name(c.callback.__name__)) == word
        ]
        if len(groups) + len(commands) != 1:
            break
        level.registered_groups, level.registered_commands = groups, commands
        if commands:
            break
        group = copy.copy(groups[0])
        assert group.typer_instance is not None
        group.typer_instance = copy.copy(group.typer_instance)
        level.registered_groups = [group]
        level = group.typer_instance
    return narrowed


def main() -> None:
    """Console-script entry point; a changing command is recorded in the audit log
    (``gatecast.commands.common.record_cli_command``). Shell completion (Click's
    ``_GATECAST_COMPLETE``) gets the whole tree."""
    import os
    import sys

    from gatecast.commands.common import record_cli_command

    whole = "_GATECAST_COMPLETE" in os.environ
    try:
        (app if whole else for_command(app, sys.argv[1:]))()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        record_cli_command(app, sys.argv[1:], code)
        raise
    except Exception:
        record_cli_command(app, sys.argv[1:], 1)
        raise
