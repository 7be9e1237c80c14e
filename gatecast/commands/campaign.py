"""``gatecast campaign ...`` and ``gatecast report``: create, inspect and steer campaigns.

Every command prints a Rich table (or JSON with ``--json``); errors print one red line
naming the problem and exit 1, without a traceback.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, cast
from zoneinfo import ZoneInfo

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from gatecast.commands import campaign_run
from gatecast.commands.common import INT64_MAX, fail, id_argument, open_engine_or_fail

if TYPE_CHECKING:
    from campaigns.campaign_file import CampaignFileError, CampaignSpec
    from campaigns.reports import ReportSummary
    from campaigns.service import CreatedCampaign
    from scheduler.estimate import FinalCheck
    from storage.engine import Engine

console = Console()
err = Console(stderr=True)
campaign_app = typer.Typer(
    help="Campaigns: create from a campaign file, list, show, pause, resume, cancel, retry.",
    no_args_is_help=True,
)


def _delivery_states() -> tuple[str, ...]:
    """Every delivery state in lifecycle order (imported when a command runs)."""
    from storage.states import ALL

    return ALL


def _loaded(module: str, name: str) -> tuple[type[BaseException], ...]:
    """``module``'s exception class ``name`` when the module is imported, else none: no
    exception of a module not yet imported can have been raised, so a command that only
    reads does not import the domain's write path to catch its errors."""
    found = sys.modules.get(module)
    if found is None:
        return ()
    error: type[BaseException] = getattr(found, name)
    return (error,)


@contextmanager
def _errors(*also: type[Exception]) -> Iterator[None]:
    """Turn the domain's errors (and ``also``: a command's own, such as the report's) into
    one red line and exit code 1."""
    from campaigns.reading import CampaignNotFound
    from storage.engine import DatabaseError

    try:
        yield
    except Exception as exc:
        refusals: tuple[type[BaseException], ...] = (
            CampaignNotFound,
            *_loaded("campaigns.service", "CampaignSetupError"),
            *_loaded("campaigns.lifecycle", "InvalidTransition"),
            *also,
        )
        if isinstance(exc, refusals):
            fail(str(exc))
        if isinstance(exc, _loaded("campaigns.campaign_file", "CampaignFileError")):
            invalid = cast("CampaignFileError", exc)
            err.print(f"[red]error:[/] {escape(invalid.source)}: the campaign file is not valid")
            for e in invalid.errors:
                err.print(
                    f"  [red]{escape(e.path or '(file)')}[/]: {escape(e.message)}", soft_wrap=True
                )
            raise typer.Exit(1) from None
        if isinstance(exc, OSError):
            fail(f"{exc.filename or 'file'}: {exc.strerror or exc}")
        if isinstance(exc, DatabaseError):
            first = str(getattr(exc, "orig", None) or exc).splitlines()[0]
            fail(f"database error: {first}")
        raise


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def _print_json(data: Any) -> None:
    typer.echo(json.dumps(data, default=_json_default, ensure_ascii=False, indent=2))


def _when(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M UTC") if value else "-"


def _local(value: datetime, tz: str) -> str:
    """``value`` in the campaign's timezone, with UTC beside it when they differ."""
    local = value.astimezone(ZoneInfo(tz))
    if local.utcoffset() == timedelta(0) and tz in ("UTC", "Etc/UTC"):
        return _when(value)
    return f"{local:%Y-%m-%d %H:%M} {tz} ({value:%H:%M} UTC)"


def _schedule_text(start_at: datetime | None, cron: str | None, tz: str) -> str:
    """When a campaign sends, as the user wrote it: a start, or a recurrence's next run."""
    from scheduler.recurrence import upcoming_starts
    from storage.types import utcnow

    if cron:
        nxt = upcoming_starts(cron, tz, start_at, utcnow(), 1)
        return f"recurs {cron} ({tz}), next run {_local(nxt[0], tz) if nxt else 'never'}"
    if start_at is None or start_at <= utcnow():
        return "starts now"
    return f"starts {_local(start_at, tz)}"


def _audience_text(definition: dict[str, Any] | None) -> str:
    from campaigns.segments import describe

    return describe(definition) if definition else ""


def _counts_text(counts: dict[str, int]) -> str:
    return ", ".join(f"{s} {counts[s]:,}" for s in _delivery_states() if counts.get(s)) or "-"


def _preview_text(content: dict[str, Any]) -> str:
    kind = content.get("type", "")
    text = str(content.get("text") or content.get("caption") or "")
    extra = ""
    if kind == "media":
        extra = f" [{content.get('media_url')}]"
    elif kind in ("interactive", "template"):
        labels = ", ".join(b.get("display_text", "") for b in content.get("buttons", []))
        extra = f" [buttons: {labels}]"
    elif kind == "list":
        rows = sum(len(s.get("rows", [])) for s in content.get("sections", []))
        extra = f" [list '{content.get('button_text')}': {rows} rows]"
    return text + extra


@campaign_app.command("create")
def create_cmd(
    file: Annotated[Path, typer.Argument(help="The campaign file (TOML).")],
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
    strict: bool = typer.Option(
        False, "--strict", help="Refuse the campaign if any recipient's message cannot render."
    ),
    allow_unrenderable: bool = typer.Option(
        False,
        "--allow-unrenderable",
        help="Create it even when no recipient's message renders (refused by default, "
        "naming the missing variables and for whom).",
    ),
    dry_run: bool = typer.Option(
        False,
        "--dry-run",
        help="Store nothing: print the final check (messages, audience, senders, start and "
        "the estimated finish at this pace, the excluded and unrenderable counts).",
    ),
) -> None:
    """Validate a campaign file, preview its messages and schedule it."""
    from campaigns import service
    from campaigns.campaign_file import load_campaign_file

    with _errors():
        from gatecast.settings import get_settings

        spec = load_campaign_file(file)
        settings = get_settings()
        if dry_run:
            _print_check(spec, settings.contact_cooldown_hours, as_json)
            return
        from scheduler.estimate import final_check

        engine = open_engine_or_fail(create=True)
        # the estimate the dry run gives, read before the create (the same recipients)
        check = final_check(engine, spec, default_cooldown_hours=settings.contact_cooldown_hours)
        created = service.create_campaign(
            engine,
            spec,
            strict=strict,
            allow_unrenderable=allow_unrenderable,
            default_cooldown_hours=settings.contact_cooldown_hours,
            default_max_identical=settings.max_identical_in_row,
            gateway_kind=settings.gateway_kind,
        )
    _print_created(created, spec, as_json, check)


def _print_check(spec: CampaignSpec, cooldown: float, as_json: bool) -> None:
    """The final check of ``spec`` (``scheduler.estimate``), nothing stored."""
    from scheduler.estimate import final_check

    check = final_check(open_engine_or_fail(), spec, default_cooldown_hours=cooldown)
    if as_json:
        _print_json(check.to_dict())
        return
    console.print(escape(check.in_words()), soft_wrap=True)
    if check.unrenderable_words:
        console.print(f"[yellow]cannot get the message:[/] {escape(check.unrenderable_words)}")
    for moment in check.occurrences:
        console.print(f"  next start {_local(moment, spec.schedule.timezone)}")
    console.print("[dim]dry run: nothing was stored[/]")


def _print_created(
    created: CreatedCampaign, spec: CampaignSpec, as_json: bool, check: FinalCheck | None = None
) -> None:
    """What a create (or a clone) made: its state, schedule (with ``check``: the start and
    finish the estimate gives, as the dry run does), counts and first messages."""
    if as_json:
        out = asdict(created)
        out["audience"] = None if created.audience is None else created.audience.to_dict()
        if check is not None:
            out["estimate"] = check.to_dict()
        _print_json(out)
        return
    if created.audience is not None:
        console.print(f"audience: {created.audience.summary()}")
    when = _schedule_text(created.start_at, spec.schedule.cron, spec.schedule.timezone)
    if check is not None and not spec.schedule.cron:
        when = check.when()
    console.print(
        f"campaign [bold]{created.id}[/] [green]{escape(spec.name)}[/] is {created.state}, "
        f"{escape(when)}; "
        f"{created.recipients:,} recipient(s)"
        + (
            f", {created.cooldown_excluded:,} excluded by cooldown"
            if created.cooldown_excluded
            else ""
        )
        + (f", {created.opted_out:,} opted out (skipped)" if created.opted_out else "")
    )
    if created.recipients == 0:
        err.print("[yellow]warning:[/] the campaign has no recipients yet (the list is empty)")
    if created.variety is not None and created.variety.warning:
        err.print(f"[yellow]warning:[/] {escape(created.variety.warning)}")
    _print_preview(created.preview, created.unrenderable, created.unrenderable_count)
    if created.unrenderable_words:
        console.print(f"[yellow]cannot get the message:[/] {escape(created.unrenderable_words)}")


def _print_preview(
    preview: list[Any], unrenderable: list[tuple[str, str]], unrenderable_count: int
) -> None:
    if preview:
        table = Table(title="Preview (first messages, exactly as they will be sent)")
        table.add_column("to")
        table.add_column("name")
        with_variants = any(item.variant for item in preview)
        if with_variants:
            table.add_column("variant")
        table.add_column("message", overflow="fold")
        for item in preview:
            variant = (escape(item.variant or ""),) if with_variants else ()
            table.add_row(
                escape(item.target),
                escape(item.name),
                *variant,
                escape(_preview_text(item.content)),
            )
        console.print(table)
    if unrenderable_count:
        table = Table(
            title=f"{unrenderable_count:,} recipient(s) cannot render and will be skipped",
            title_style="yellow",
        )
        table.add_column("to")
        table.add_column("reason")
        for target, reason in unrenderable[:20]:
            table.add_row(escape(target), escape(reason))
        console.print(table)
        if unrenderable_count > 20:
            console.print(f"... and {unrenderable_count - 20:,} more")


@campaign_app.command("clone")
def clone_cmd(
    campaign_id: int = id_argument("The campaign to copy."),
    name: str | None = typer.Option(
        None, "--name", help='The copy\'s name (default "<name> (copy)").'
    ),
    start: str | None = typer.Option(
        None,
        "--start",
        help="The copy's start, local to its timezone (2030-05-01T09:00), or 'now'. Default: "
        "the original's (refused when already past).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Create a copy of a campaign (any state) and schedule it."""
    from campaigns import editing

    with _errors():
        from gatecast.settings import get_settings

        engine = open_engine_or_fail()
        changes: dict[str, Any] = {}
        if name is not None:
            changes["name"] = name
        if start is not None:
            schedule = editing.campaign_file(engine, campaign_id).schedule
            data = schedule.model_dump(mode="json", exclude_none=True)
            data.pop("start", None)
            if start.strip().lower() != "now":
                data["start"] = start.strip()
            changes["schedule"] = data
        created = editing.clone_campaign(
            engine,
            campaign_id,
            changes,
            default_cooldown_hours=get_settings().contact_cooldown_hours,
            gateway_kind=get_settings().gateway_kind,
        )
        spec = editing.campaign_file(engine, created.id)
    if not as_json:
        console.print(f"campaign {campaign_id} cloned")
    _print_created(created, spec, as_json)


@campaign_app.command("edit")
def edit_cmd(
    campaign_id: Annotated[
        int,
        typer.Argument(min=1, max=INT64_MAX, help="The campaign to change (scheduled or paused)."),
    ],
    file: Annotated[Path, typer.Argument(help="Its new campaign file (TOML).")],
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Give a scheduled or paused campaign a new campaign file; its rows not yet sent are
    rendered again (refused once it runs or has finished)."""
    from campaigns import editing
    from campaigns.campaign_file import load_campaign_file

    with _errors():
        from gatecast.settings import get_settings

        spec = load_campaign_file(file)
        edited = editing.edit_campaign(
            open_engine_or_fail(),
            campaign_id,
            spec,
            default_cooldown_hours=get_settings().contact_cooldown_hours,
            gateway_kind=get_settings().gateway_kind,
        )
    if as_json:
        _print_json(asdict(edited))
        return
    console.print(
        f"campaign [bold]{edited.id}[/] [green]{escape(spec.name)}[/] edited; it is "
        f"{edited.state}, {edited.recipients:,} recipient(s)"
        + (f"; {edited.rerendered:,} queued message(s) rendered again" if edited.rerendered else "")
        + (f", {edited.skipped:,} skipped (no longer renders)" if edited.skipped else "")
    )
    _print_preview(edited.preview, edited.unrenderable, edited.unrenderable_count)


@campaign_app.command("export")
def export_cmd(
    campaign_id: int = id_argument("Campaign id."),
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Write the file here (default: print it)."),
    ] = None,
) -> None:
    """Print (or write) a campaign's file as TOML: what ``campaign create`` and
    ``campaign edit`` take."""
    from campaigns import editing
    from campaigns.campaign_toml import spec_to_toml

    with _errors():
        text = spec_to_toml(editing.campaign_file(open_engine_or_fail(), campaign_id))
        if output is None:
            typer.echo(text, nl=False)
            return
        output.write_text(text, encoding="utf-8")
    console.print(f"wrote {output}")


@campaign_app.command("list")
def list_cmd(
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    state: str | None = typer.Option(
        None, "--state", help="Only campaigns in this state (draft, scheduled, running, ...)."
    ),
    name: str | None = typer.Option(None, "--name", help="Only names containing this (any case)."),
    archived: str = typer.Option(
        "no", "--archived", help="no: leave archived campaigns out; only: only them; any: both."
    ),
) -> None:
    """List campaigns, newest first, with delivery counts (deleted ones never)."""
    from campaigns import lifecycle, reading

    if state is not None and state not in lifecycle.STATES:
        fail(f"unknown campaign state {state!r}; one of: {', '.join(lifecycle.STATES)}")
    if archived not in reading.ARCHIVED_FILTERS:
        fail(f"--archived must be one of: {', '.join(reading.ARCHIVED_FILTERS)}")
    with _errors():
        engine = open_engine_or_fail()
        rows = reading.list_campaigns(engine, state=state, name=name, archived=archived).items
    if as_json:
        _print_json([asdict(r) for r in rows])
        return
    if not rows:
        if state or name:
            console.print("no campaign matches")
        else:
            console.print("no campaigns yet: create one with `gatecast campaign create FILE`")
        return
    table = Table(title="Campaigns")
    for col in ("id", "name", "state", "type", "audience", "start", "recipients", "progress"):
        table.add_column(col, justify="right" if col in ("id", "recipients") else "left")
    for r in rows:
        audience = r.list_name or ("[audience]" if r.audience else "groups")
        start = f"cron {r.cron}" if r.cron else _when(r.start_at)
        table.add_row(
            str(r.id),
            escape(r.name),
            r.state,
            r.message_type,
            escape(audience),
            escape(start),
            f"{r.total:,}" if r.total else "at start",
            _counts_text(r.counts),
        )
    console.print(table)


@campaign_app.command("show")
def show_cmd(
    campaign_id: int = id_argument("Campaign id."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    recipients: bool = typer.Option(
        False, "--recipients", help="Also show why each queued recipient waits (the first 100)."
    ),
) -> None:
    """Show one campaign: state, schedule, pace, delivery counts and what it waits for."""
    from campaigns import reading  # not campaigns.service: a read (decision 53)
    from gatecast.commands.variants_view import ab_text, variants_table
    from scheduler.holds import campaign_hold, recipient_holds
    from storage.types import utcnow

    with _errors():
        engine = open_engine_or_fail()
        if as_json:  # the whole spec, validated
            detail = reading.get_campaign(engine, campaign_id)
        else:
            d = reading.campaign_page(engine, campaign_id)
        hold = campaign_hold(engine, campaign_id, utcnow())
        waiting = recipient_holds(engine, campaign_id, utcnow()) if recipients else []
    if as_json:
        data = asdict(detail)
        data["spec"] = detail.spec.model_dump(mode="json")
        data["total"] = detail.total
        data["hold"] = hold.as_dict()
        if detail.cron:
            from scheduler.recurrence import upcoming_starts

            nxt = upcoming_starts(detail.cron, detail.timezone, detail.start_at, utcnow(), 1)
            data["next_run"] = nxt[0] if nxt else None
        if recipients:
            data["recipient_holds"] = [r.as_dict() for r in waiting]
        _print_json(data)
        return
    table = Table(title=f"Campaign {d.id}: {escape(d.name)}", show_header=False)
    table.add_column("field")
    table.add_column("value", overflow="fold")
    spec = d.spec
    window = "-".join(spec.window) if spec.window else "any time"
    if spec.recipient_timezone:
        window += " in each recipient's zone"
    for label, value in (
        ("state", d.state + (f" ({d.state_reason})" if d.state_reason else "")),
        ("message", d.message_type),
        ("audience", d.list_name or _audience_text(d.audience) or ", ".join(spec.groups)),
        ("instances", ", ".join(spec.instances) or "all connected"),
        ("start", _local(d.start_at, d.timezone) if d.start_at and not d.cron else "-"),
        ("recurrence", _schedule_text(d.start_at, d.cron, d.timezone) if d.cron else "-"),
        ("timezone / window", f"{d.timezone} / {window}"),
        (
            "pace",
            f"{spec.per_minute:g}/min, "
            f"{spec.delay_seconds[0]:g}-{spec.delay_seconds[1]:g} s apart, "
            f"cap {spec.daily_cap or 'none'}/day",
        ),
        (
            "retry",
            f"{spec.max_attempts} attempt(s)"
            + (
                f", then every {spec.retry_every or '6h'} until {spec.retry_until}"
                if spec.retry_until
                else ""
            ),
        ),
        ("started / finished", f"{_when(d.started_at)} / {_when(d.finished_at)}"),
        ("recipients", f"{d.total:,}"),
    ):
        table.add_row(label, escape(str(value)))
    if (ab := ab_text(d.variants)) is not None:
        table.add_row("A/B test", escape(ab))
    for state in _delivery_states():
        if d.counts.get(state):
            table.add_row(f"  {state}", f"{d.counts[state]:,}")
    for step in d.steps:  # follow-up steps (decision 70)
        sent = ", ".join(f"{n:,} {state}" for state, n in sorted(step.counts.items()))
        table.add_row(
            f"step {step.step}",
            escape(f"{step.condition}: {step.message_type}; {sent or 'none due yet'}"),
        )
    console.print(table)
    from gatecast.runtime.holds_view import hold_lines  # the runtime loads the engine

    for line in hold_lines(hold):
        console.print(escape(line), highlight=False)
    for r in waiting:
        why = r.hold.words if r.hold is not None else "due now"
        console.print(escape(f"  {r.target} ({r.sender or 'no sender'}): {why}"), highlight=False)
    if (compared := variants_table(d.variants)) is not None:
        console.print(compared)


def _simple(name: str, action: str, describe: Callable[[int, Any], str]) -> None:
    """Add command ``name``, which calls ``campaigns.service.<action>(engine, campaign_id)``."""

    @campaign_app.command(name)
    def command(
        campaign_id: int = id_argument("Campaign id."),
        as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    ) -> None:
        from campaigns import service

        act: Callable[[Engine, int], Any] = getattr(service, action)
        with _errors():
            engine = open_engine_or_fail()
            result = act(engine, campaign_id)
            state = service.get_campaign(engine, campaign_id).state
        if as_json:
            _print_json({"id": campaign_id, "state": state, "result": result})
        else:
            console.print(describe(campaign_id, result))

    command.__doc__ = {
        "pause": "Pause a scheduled or running campaign.",
        "resume": "Resume a paused campaign.",
        "cancel": "Cancel a campaign; its queued recipients are skipped.",
    }[name]


_simple("pause", "pause_campaign", lambda cid, _: f"campaign {cid} paused")
_simple("resume", "resume_campaign", lambda cid, state: f"campaign {cid} is {state} again")
_simple(
    "cancel",
    "cancel_campaign",
    lambda cid, n: f"campaign {cid} cancelled; {n:,} queued recipient(s) skipped",
)


@campaign_app.command("retry")
def retry_cmd(
    campaign_id: int = id_argument("Campaign id."),
    unknown: bool = typer.Option(
        False,
        "--unknown",
        help="Also resend recipients whose send was ambiguous and that no status event "
        "settled (attempted at least GATECAST_UNKNOWN_SETTLE_SECONDS ago).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Re-queue failed recipients (never those already sent)."""
    from campaigns import service
    from gatecast.settings import get_settings

    settings = get_settings()
    with _errors():
        engine = open_engine_or_fail(settings)
        done = service.retry_campaign(
            engine,
            campaign_id,
            include_unknown=unknown,
            settle=timedelta(seconds=settings.unknown_settle_seconds),
        )
        state = service.get_campaign(engine, campaign_id).state
    if as_json:
        _print_json(
            {
                "id": campaign_id,
                "state": state,
                "requeued": done.requeued,
                "left_alone": done.left_alone,
                "settled": done.settled,
                "waiting": done.waiting,
                "waiting_until": done.waiting_until.isoformat() if done.waiting_until else None,
            }
        )
        return
    console.print(
        f"campaign {campaign_id}: {done.requeued:,} recipient(s) queued again; it is {state}"
    )
    if done.left_alone:
        console.print(escape(done.describe()))


def report_cmd(
    campaign_id: Annotated[int, typer.Argument(min=1, max=INT64_MAX, help="Campaign id.")],
    output: Annotated[
        Path,
        typer.Option("--output", "-o", help="Where to write: FILE.csv, FILE.xlsx or FILE.json."),
    ],
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """Write a per-recipient report and print its summary."""
    from campaigns import reports

    with _errors(reports.ReportError):
        engine = open_engine_or_fail()
        path = reports.write_report(engine, campaign_id, output)
        summary = reports.report_summary(engine, campaign_id)
    if as_json:
        _print_json({"report": str(path), "summary": summary.as_dict()})
        return
    print_summary(summary)
    console.print(f"report written to {escape(str(path))}")


def print_summary(summary: ReportSummary) -> None:
    """A Rich table of a report summary (also used by the demo)."""

    def pct(x: float | None) -> str:
        return "-" if x is None else f"{x:.1%}"

    table = Table(title=f"Campaign {summary.campaign_id}: {escape(summary.name)} ({summary.state})")
    table.add_column("measure")
    table.add_column("value", justify="right")

    def seconds(x: float | None) -> str:
        return "-" if x is None else f"{x:.1f} s"

    for label, value in (
        ("recipients", f"{summary.total:,}"),
        ("sent", f"{summary.sent:,}"),
        ("delivered", f"{summary.delivered:,}"),
        ("read", f"{summary.read:,}"),
        ("failed", f"{summary.failed:,}"),
        ("replied", f"{summary.replied:,}"),
        ("opted out", f"{summary.opted_out:,}"),
        ("delivery rate (of sent)", pct(summary.delivery_rate)),
        ("read rate (of sent)", pct(summary.read_rate)),
        ("median time to delivery", seconds(summary.median_seconds_to_delivery)),
        ("median time to read", seconds(summary.median_seconds_to_read)),
    ):
        table.add_row(label, value)
    for state in _delivery_states():
        if summary.counts.get(state):
            table.add_row(f"  state {state}", f"{summary.counts[state]:,}")
    for tap in summary.taps:
        label = f"  tapped {tap['kind']} {escape(tap['id'])} ({escape(tap['title'])})"
        table.add_row(label, f"{tap['taps']:,} ({pct(tap['rate'])})")
    console.print(table)


def register(app: typer.Typer) -> None:
    """Add ``gatecast campaign ...`` (with ``run``) and ``gatecast report`` to the root app."""
    campaign_run.register_run(campaign_app)
    app.add_typer(campaign_app, name="campaign")
    app.command("report")(report_cmd)
