"""``gatecast contacts``: import spreadsheets, list audiences, show and opt contacts out/in."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from gatecast.commands.common import fail, open_engine_or_fail

if TYPE_CHECKING:
    from campaigns.importer import ImportReport

console = Console()
err = Console(stderr=True)
contacts_app = typer.Typer(
    help="Contacts: import spreadsheets and vCards, search, add, edit, tag, export; lists, "
    "opt-outs, erasure.",
    no_args_is_help=True,
)

#: files at least this big get a progress bar
PROGRESS_MIN_BYTES = 1024 * 1024


def _sheet(value: str | None) -> str | int | None:
    """A sheet name, or a 1-based sheet number given as digits."""
    if value is None:
        return None
    return int(value) - 1 if value.isdigit() and int(value) > 0 else value


def _report_lines(report: ImportReport) -> list[tuple[str, int]]:
    read = (f"{report.record}s read", report.rows_read)
    if report.opt_out:
        return [
            read,
            ("opted out (new contacts)", report.imported),
            ("opted out (existing contacts)", report.updated),
            ("already opted out", report.unchanged),
            ("duplicates merged", report.duplicates),
            ("invalid (rejected)", report.invalid),
        ]
    return [
        read,
        ("imported (new)", report.imported),
        ("updated", report.updated),
        ("unchanged", report.unchanged),
        ("duplicates merged", report.duplicates),
        ("invalid (rejected)", report.invalid),
        ("skipped (opted out)", report.skipped_opted_out),
    ]


def _print_report(report: ImportReport, rejects_path: Path | None) -> None:
    title = "Opt-out file" if report.opt_out else f"Import into list {escape(report.list_name)}"
    table = Table(title=title, show_header=False)
    table.add_column("what")
    table.add_column("count", justify="right")
    for label, value in _report_lines(report):
        table.add_row(label, f"{value:,}")
    console.print(table)
    mapping = f"phone column: {report.phone_column!r}, name column: {report.name_column!r}"
    console.print(escape(mapping))
    if report.tags:
        console.print(f"tags: {escape(', '.join(report.tags))}")
    if report.attribute_keys:
        attrs = ", ".join(f"{k} -> {{{{ {v} }}}}" for k, v in report.attribute_keys.items())
        console.print(f"attributes: {escape(attrs)}")
    for r in report.rejects[:10]:
        console.print(
            f"  [yellow]{report.record} {r.row_number}[/] {escape(_who(report, r.raw))}"
            f"{escape(r.column or '')}: {escape(r.reason)}"
        )
    if len(report.rejects) > 10:
        console.print(f"  ... and {len(report.rejects) - 10:,} more rejected {report.record}s")
    if rejects_path is not None:
        console.print(f"rejected rows written to {escape(str(rejects_path))}")


def _who(report: ImportReport, raw: dict[str, str]) -> str:
    """A rejected card's name (``"(Ana Silva) "``): a card has no row to look at."""
    if report.record != "card":
        return ""
    name = raw.get("name", "")
    return f"({name}) " if name else ""


@contacts_app.command("import")
def import_cmd(
    file: Annotated[Path, typer.Argument(help="CSV, XLSX, XLS, ODS or vCard (.vcf) file")],
    list_name: Annotated[str | None, typer.Option("--list", help="the list to import into")] = None,
    opt_out: Annotated[
        bool,
        typer.Option(
            "--opt-out",
            help="opt every number of the file out (unknown ones are created opted out); "
            "instead of --list",
        ),
    ] = False,
    phone_column: Annotated[str | None, typer.Option(help="header of the phone column")] = None,
    name_column: Annotated[str | None, typer.Option(help="header of the name column")] = None,
    region: Annotated[
        str | None, typer.Option(help="default region for national numbers, e.g. GB")
    ] = None,
    sheet: Annotated[str | None, typer.Option(help="sheet name or 1-based number")] = None,
    rejects: Annotated[
        Path | None, typer.Option(help="write the rejected rows to this CSV file")
    ] = None,
    tag: Annotated[
        list[str] | None,
        typer.Option(
            "--tag", help="tag every imported contact (repeatable); see also a tags column"
        ),
    ] = None,
    attribute: Annotated[
        list[str] | None,
        typer.Option(
            "--attribute",
            help="COLUMN=NAME: store the column as the attribute NAME; COLUMN= leaves it "
            "out (repeatable; other columns keep their header as the name)",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the summary as JSON")] = False,
) -> None:
    """Import contacts from a spreadsheet or a vCard file into a list (created if
    missing), or with --opt-out opt every number of the file out.

    A ``tags`` column (comma-separated) tags each row's contact; a ``timezone`` column
    must hold IANA zones (Europe/Berlin), other rows are rejected with the reason.
    A name or attribute cell of NA, N/A, null or - is read as empty."""
    from campaigns.deployment_defaults import import_region
    from campaigns.importer import ImportFailed, ImportOptions, import_file
    from gatecast.settings import get_settings

    if opt_out == (list_name is not None):
        fail(
            "give --list LIST to import into a list, or --opt-out to opt the file's "
            "numbers out (not both)"
        )
    mapped: list[tuple[str, str]] = []
    for item in attribute or ():
        column, sep, name = item.partition("=")
        if not sep or not column.strip():
            fail(f"--attribute {item!r}: write COLUMN=NAME, or COLUMN= to leave the column out")
        mapped.append((column.strip(), name.strip()))
    if not file.is_file():
        fail(f"{file}: no such file")
    engine = open_engine_or_fail(create=True)
    settings = get_settings()
    opts = ImportOptions(
        attributes=tuple(mapped),
        list_name=list_name or "",
        opt_out=opt_out,
        phone_column=phone_column,
        name_column=name_column,
        region=import_region(engine, region, settings.default_region),
        sheet=_sheet(sheet),
        tags=tuple(tag or ()),
        max_bytes=settings.import_max_bytes,
        xlsx_max_uncompressed_bytes=settings.xlsx_max_uncompressed_bytes,
        max_columns=settings.import_max_columns,
        max_rows=settings.import_max_rows,
        max_cell_chars=settings.import_max_cell_chars,
        parse_limits=settings.parse_limits(),
    )
    show_bar = not as_json and file.stat().st_size >= PROGRESS_MIN_BYTES
    try:
        if show_bar:
            with Progress(
                TextColumn("importing"),
                BarColumn(),
                TaskProgressColumn(),
                TimeElapsedColumn(),
                console=err,
                transient=True,
            ) as bar:
                task = bar.add_task("import", total=None)
                report = import_file(
                    engine, file, opts, progress=lambda d, t: bar.update(task, completed=d, total=t)
                )
        else:
            report = import_file(engine, file, opts)
    except ImportFailed as exc:
        fail(str(exc))
    finally:
        engine.dispose()
    if rejects is not None:
        try:
            report.write_rejects(rejects)
        except OSError as exc:
            fail(f"{rejects}: cannot write the rejects file ({exc.strerror})")
    if as_json:
        out = report.to_dict(include_rejects=False)
        out["rejects_file"] = str(rejects) if rejects is not None else None
        print(json.dumps(out))
    else:
        _print_report(report, rejects)


@contacts_app.command("lists")
def lists_cmd(
    as_json: Annotated[bool, typer.Option("--json", help="print as JSON")] = False,
) -> None:
    """The lists with their member counts."""
    from campaigns.audiences import list_lists

    engine = open_engine_or_fail()
    try:
        summaries = list_lists(engine)
    finally:
        engine.dispose()
    if as_json:
        print(json.dumps([s.to_dict() for s in summaries]))
        return
    table = Table(title="Lists")
    for col in ("name", "members", "opted out", "reachable", "created"):
        table.add_column(col, justify="right" if col not in ("name", "created") else "left")
    for s in summaries:
        table.add_row(
            escape(s.name),
            f"{s.members:,}",
            f"{s.opted_out:,}",
            f"{s.reachable:,}",
            s.created_at.strftime("%Y-%m-%d %H:%M UTC"),
        )
    console.print(table)


def _e164(phone: str) -> str:
    from campaigns.phones import normalise_phone
    from gatecast.settings import get_settings

    result = normalise_phone(phone, get_settings().default_region)
    if result.e164 is None:
        fail(f"{phone!r} is not a usable phone number: {result.reason}")
    return result.e164


@contacts_app.command("show")
def show_cmd(
    phone: Annotated[str, typer.Argument(help="the phone number (any format)")],
    as_json: Annotated[bool, typer.Option("--json", help="print as JSON")] = False,
) -> None:
    """Show one contact: name, attributes, opt-out state, lists and tags."""
    from campaigns.audiences import contact_lists, contact_tags, get_contact

    e164 = _e164(phone)
    engine = open_engine_or_fail()
    try:
        row = get_contact(engine, e164)
        names = contact_lists(engine, int(row.id)) if row is not None else []
        tags = contact_tags(engine, int(row.id)) if row is not None else []
    finally:
        engine.dispose()
    if row is None:
        fail(f"no contact with phone {e164}")
    data = {
        "phone": row.phone,
        "raw_phone": row.raw_phone,
        "name": row.name,
        "attributes": row.attributes,
        "opted_out": bool(row.opted_out),
        "opted_out_at": row.opted_out_at.isoformat() if row.opted_out_at else None,
        "opt_out_reason": row.opt_out_reason,
        "lists": names,
        "tags": tags,
        "created_at": row.created_at.isoformat(),
        "updated_at": row.updated_at.isoformat(),
    }
    if as_json:
        print(json.dumps(data))
        return
    for key, value in data.items():
        console.print(f"[bold]{key}[/]: {escape(str(value))}")


def _set_opt_out(phone: str, opted_out: bool, reason: str | None) -> None:
    from campaigns.audiences import set_opt_out
    from storage.types import utcnow

    e164 = _e164(phone)
    engine = open_engine_or_fail()
    try:
        found = set_opt_out(engine, e164, opted_out, reason, now=utcnow())
    finally:
        engine.dispose()
    if not found:
        fail(f"no contact with phone {e164}")
    console.print(f"{e164} {'opted out' if opted_out else 'opted back in'}")


@contacts_app.command("optout")
def optout_cmd(
    phone: Annotated[str, typer.Argument(help="the phone number (any format)")],
    reason: Annotated[str, typer.Option(help="why (kept with the contact)")] = "manual",
) -> None:
    """Opt a contact out: no campaign will message them."""
    _set_opt_out(phone, True, reason)


@contacts_app.command("optin")
def optin_cmd(phone: Annotated[str, typer.Argument(help="the phone number (any format)")]) -> None:
    """Opt a contact back in."""
    _set_opt_out(phone, False, None)


@contacts_app.command("erase")
def erase_cmd(
    phone: Annotated[str, typer.Argument(help="the phone number (any format)")],
    yes: Annotated[bool, typer.Option("--yes", help="do not ask for confirmation")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print what was erased as JSON")] = False,
) -> None:
    """Erase a contact everywhere (right to be forgotten): its contact row, lists, tags,
    replies and every stored trace of its number; its deliveries stay, anonymised, so
    campaign counts stay true. Cannot be undone. Nothing printed names the number."""
    from campaigns.erasure import NoSuchContact, erase_contact

    e164 = _e164(phone)
    if not yes and not typer.confirm(
        "Erase this contact and every stored trace of its number? This cannot be undone",
        default=False,
        err=True,
    ):
        fail("nothing erased")
    engine = open_engine_or_fail()
    try:
        erased = erase_contact(engine, phone_e164=e164)
    except NoSuchContact:
        fail("no contact with that phone number; nothing erased")
    finally:
        engine.dispose()
    if as_json:
        print(json.dumps(erased.to_dict()))
        return
    console.print(
        f"contact {erased.contact_id} erased: {erased.deliveries_anonymised:,} deliveries "
        f"anonymised, {erased.inbound_messages_scrubbed:,} incoming messages, "
        f"{erased.status_events_scrubbed:,} status events and "
        f"{erased.audit_entries_scrubbed:,} audit entries scrubbed, "
        f"{erased.memberships_removed:,} list/tag/audience rows, "
        f"{erased.import_rejects_removed:,} rejected import rows, "
        f"{erased.idempotency_records_removed:,} stored API answers, "
        f"{erased.outbound_messages_removed:,} outbound webhook messages and "
        f"{erased.test_sends_removed:,} test sends removed"
    )


def register(app: typer.Typer) -> None:
    """Add ``gatecast contacts`` to the root app."""
    from gatecast.commands import contacts_manage

    contacts_manage.register(contacts_app)
    app.add_typer(contacts_app, name="contacts")
