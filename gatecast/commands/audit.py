"""``gatecast audit``: the audit log (who changed what, when, from where): list with
filters and paging, export as CSV."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from gatecast.commands.common import fail, open_engine_or_fail

if TYPE_CHECKING:
    from campaigns.audit import AuditFilter

console = Console()
audit_app = typer.Typer(
    help="The audit log: who changed what, when and from where (list, export).",
    no_args_is_help=True,
)

Actor = Annotated[
    str | None, typer.Option("--actor", help='exactly this actor (a user, "owner key", cli:...)')
]
Action = Annotated[str | None, typer.Option("--action", help="actions containing this text")]
Outcome = Annotated[str | None, typer.Option("--outcome", help="ok, refused or failed")]
Since = Annotated[
    str | None, typer.Option("--since", help="at or after (ISO 8601, UTC unless it says)")
]
Until = Annotated[str | None, typer.Option("--until", help="before (ISO 8601, UTC unless it says)")]


def _time(option: str, value: str | None) -> datetime | None:
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        fail(f"{option} {value!r}: write a date and time like 2026-11-25T09:00 (UTC)")
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _filter(
    actor: str | None, action: str | None, outcome: str | None, since: str | None, until: str | None
) -> AuditFilter:
    from campaigns.audit import OUTCOMES, AuditFilter

    if outcome is not None and outcome not in OUTCOMES:
        fail(f"--outcome {outcome!r}: use {', '.join(OUTCOMES)}", 2)
    return AuditFilter(
        actor=actor,
        action=action,
        outcome=outcome,
        since=_time("--since", since),
        until=_time("--until", until),
    )


@audit_app.command("list")
def list_cmd(
    actor: Actor = None,
    action: Action = None,
    outcome: Outcome = None,
    since: Since = None,
    until: Until = None,
    limit: Annotated[int, typer.Option("--limit", min=1, max=10_000)] = 50,
    offset: Annotated[int, typer.Option("--offset", min=0)] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="print as JSON")] = False,
) -> None:
    """The audit log, newest first."""
    from campaigns.audit import entries

    where = _filter(actor, action, outcome, since, until)
    engine = open_engine_or_fail()
    try:
        page = entries(engine, where, limit=limit, offset=offset)
    finally:
        engine.dispose()
    if as_json:
        print(
            json.dumps(
                {
                    "items": [e.to_dict() for e in page.items],
                    "total": page.total,
                    "limit": limit,
                    "offset": offset,
                }
            )
        )
        return
    table = Table(title=f"Audit log ({page.total} entries)")
    for column in ("at (UTC)", "actor", "role", "action", "target", "changed", "from", "outcome"):
        table.add_column(column, overflow="fold")
    for e in page.items:
        target = f"{e.target_type or ''} {e.target_id or ''}".strip()
        actor = e.actor if e.key_id is None else f"{e.actor} (key {e.key_id})"
        table.add_row(
            e.at.strftime("%Y-%m-%d %H:%M:%S"),
            escape(actor),
            e.role,
            escape(e.action),
            escape(target),
            escape(_changes(e.changes)),
            escape(e.source),
            e.outcome,
        )
    console.print(table)


def _changes(changes: dict[str, list[object]] | None) -> str:
    """``role: operator -> viewer``, a line per changed field."""
    shown = []
    for name, pair in (changes or {}).items():
        before, after = [("-" if v is None else v) for v in [*pair, None, None][:2]]
        shown.append(f"{name}: {before} -> {after}")
    return "\n".join(shown)


@audit_app.command("export")
def export_cmd(
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="write the CSV here (default: stdout)")
    ] = None,
    actor: Actor = None,
    action: Action = None,
    outcome: Outcome = None,
    since: Since = None,
    until: Until = None,
) -> None:
    """The matching entries as CSV, oldest first."""
    import sys

    from campaigns.audit import export_lines

    where = _filter(actor, action, outcome, since, until)
    engine = open_engine_or_fail()
    try:
        if output is None:
            for line in export_lines(engine, where):
                sys.stdout.write(line)
            return
        with output.open("w", encoding="utf-8", newline="") as fh:
            for line in export_lines(engine, where):
                fh.write(line)
    finally:
        engine.dispose()
    console.print(f"wrote {output}")


def register(app: typer.Typer) -> None:
    """Add ``gatecast audit`` to the root app."""
    app.add_typer(audit_app, name="audit")
