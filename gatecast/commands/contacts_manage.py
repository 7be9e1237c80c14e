"""``gatecast contacts`` search, add, edit, tag, untag, delete, export: the CLI face of
``campaigns.contacts`` (registered on ``contacts_app`` by ``gatecast.commands.contacts``)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from gatecast.commands.common import fail, open_engine_or_fail

if TYPE_CHECKING:
    from campaigns.audiences import ContactRecord
    from storage.engine import Engine

console = Console()

#: contacts a search prints per page by default
PAGE_SIZE = 20


@contextmanager
def _engine(*, create: bool = False) -> Iterator[Engine]:
    """An engine for one command (``create``: the database made if missing); a
    ContactError ends the command with its message."""
    from campaigns.contacts import ContactError

    engine = open_engine_or_fail(create=create)
    try:
        yield engine
    except ContactError as exc:
        fail(str(exc))
    finally:
        engine.dispose()


def _region() -> str:
    from gatecast.settings import get_settings

    return get_settings().default_region


def _contact_dict(c: ContactRecord) -> dict[str, object]:
    return {
        "id": c.id,
        "phone": c.phone,
        "name": c.name,
        "attributes": c.attributes,
        "opted_out": c.opted_out,
    }


def search_cmd(
    query: Annotated[
        str, typer.Argument(help="part of a name, a phone, or any attribute value")
    ] = "",
    list_name: Annotated[
        str | None, typer.Option("--list", help="only members of this list")
    ] = None,
    tag: Annotated[str | None, typer.Option(help="only contacts with this tag")] = None,
    opted_out: Annotated[
        bool | None, typer.Option("--opted-out/--not-opted-out", help="only (not) opted out")
    ] = None,
    page: Annotated[
        int, typer.Option(min=1, help="which page (1 is the first; slower than --cursor)")
    ] = 1,
    per_page: Annotated[int, typer.Option(min=1, max=500, help="contacts per page")] = PAGE_SIZE,
    cursor: Annotated[
        str | None,
        typer.Option(help="start at this cursor (printed under a page; 'last': the last page)"),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print as JSON")] = False,
) -> None:
    """Search contacts by name, phone or any attribute value (no case, no accents)."""
    from campaigns.contacts import Search, search
    from campaigns.paging import BadCursor

    if cursor is not None and page > 1:
        raise typer.BadParameter("give either --cursor or --page, not both", param_hint="--cursor")
    with _engine() as engine:
        try:
            found = search(
                engine,
                Search(query=query, list_name=list_name, tag=tag, opted_out=opted_out),
                limit=per_page,
                offset=(page - 1) * per_page,
                cursor=cursor,
            )
        except BadCursor as exc:
            raise typer.BadParameter(str(exc), param_hint="--cursor") from None
    if as_json:
        items = [_contact_dict(c) for c in found.items]
        out = {"items": items, "total": found.total, "total_exact": found.total_exact}
        walk = {"next_cursor": found.next_cursor, "prev_cursor": found.prev_cursor}
        print(json.dumps({**out, "page": page, **walk}))
        return
    noun = "contact" if found.total == 1 else "contacts"
    more = "" if found.total_exact else "more than "
    table = Table(title=f"{more}{found.total:,} {noun}")
    for col in ("phone", "name", "attributes", "opted out"):
        table.add_column(col)
    for c in found.items:
        attrs = ", ".join(f"{k}={v}" for k, v in c.attributes.items())
        table.add_row(c.phone, escape(c.name), escape(attrs), "yes" if c.opted_out else "")
    console.print(table)
    if found.next_cursor:
        console.print(f"next page: --cursor {found.next_cursor}")
    if found.prev_cursor:
        console.print(f"previous page: --cursor {found.prev_cursor}")


def add_cmd(
    phone: Annotated[str, typer.Argument(help="the phone number (any format)")],
    name: Annotated[str, typer.Option(help="the contact's name")] = "",
    attr: Annotated[
        list[str] | None, typer.Option("--attr", help="an attribute key=value (repeatable)")
    ] = None,
    tag: Annotated[list[str] | None, typer.Option("--tag", help="a tag (repeatable)")] = None,
    list_name: Annotated[
        str | None, typer.Option("--list", help="put the contact in this list (created if missing)")
    ] = None,
) -> None:
    """Add one contact."""
    from campaigns.contacts import add_contact, attributes_from
    from storage.types import utcnow

    with _engine(create=True) as engine:
        made = add_contact(
            engine,
            phone,
            region=_region(),
            now=utcnow(),
            name=name,
            attributes=attributes_from(attr or []),
            tags=tag or (),
            list_name=list_name,
        )
    console.print(f"contact {made.phone} added")


def edit_cmd(
    phone: Annotated[str, typer.Argument(help="the phone number (any format)")],
    name: Annotated[str | None, typer.Option(help="a new name")] = None,
    attr: Annotated[
        list[str] | None, typer.Option("--attr", help="set an attribute key=value (repeatable)")
    ] = None,
    unset: Annotated[
        list[str] | None, typer.Option("--unset", help="remove an attribute (repeatable)")
    ] = None,
    tag: Annotated[list[str] | None, typer.Option("--tag", help="add a tag (repeatable)")] = None,
    untag: Annotated[
        list[str] | None, typer.Option("--untag", help="remove a tag (repeatable)")
    ] = None,
) -> None:
    """Change a contact's name, attributes or tags."""
    from campaigns.contacts import Edit, attributes_from, edit_contact
    from storage.types import utcnow

    with _engine() as engine:
        edit = Edit(
            name=name,
            set_attributes=attributes_from(attr or []),
            unset_attributes=unset or (),
            add_tags=tag or (),
            remove_tags=untag or (),
        )
        done = edit_contact(engine, phone, edit, region=_region(), now=utcnow())
    console.print(f"contact {done.phone} changed")


def _tag_command(add: bool) -> Callable[..., None]:
    def command(
        tag: Annotated[str, typer.Argument(help="the tag")],
        phone: Annotated[str | None, typer.Argument(help="one contact's phone")] = None,
        query: Annotated[
            str | None, typer.Option("--query", help="every contact this search finds")
        ] = None,
        file: Annotated[
            Path | None, typer.Option("--file", help="a file of phone numbers, one per line")
        ] = None,
    ) -> None:
        from campaigns.contacts import Search, Targets, change_tag, phones_in_file
        from storage.types import utcnow

        if sum(x is not None for x in (phone, query, file)) != 1:
            fail("give one of: a PHONE, --query or --file")
        with _engine() as engine:
            targets = Targets(
                phone=phone,
                search=Search(query=query) if query is not None else None,
                phones=phones_in_file(file, _region()) if file is not None else None,
            )
            n = change_tag(engine, tag, targets, add=add, region=_region(), now=utcnow())
        verb = "tagged" if add else "untagged"
        console.print(f"{n:,} contact{'s' if n != 1 else ''} {verb} {escape(tag.strip())!r}")

    command.__doc__ = (
        "Tag one contact, every contact a search finds, or those of a file."
        if add
        else "Take a tag off one contact, every contact a search finds, or those of a file."
    )
    return command


def delete_cmd(
    phone: Annotated[str, typer.Argument(help="the phone number (any format)")],
    list_name: Annotated[
        str | None, typer.Option("--list", help="the list to remove the contact from")
    ] = None,
    all_lists: Annotated[bool, typer.Option("--all-lists", help="remove from every list")] = False,
) -> None:
    """Remove a contact from a list (or from every list); the contact itself stays."""
    from campaigns.contacts import remove_from_lists

    if (list_name is None) == (not all_lists):
        fail("give one of: --list LIST or --all-lists")
    with _engine() as engine:
        n = remove_from_lists(engine, phone, list_name, region=_region())
    where = f"list {list_name!r}" if list_name is not None else f"{n} list{'s' if n != 1 else ''}"
    console.print(f"removed from {escape(where)}")


def export_cmd(
    output: Annotated[Path, typer.Argument(help="the file to write (.csv or .xlsx)")],
    list_name: Annotated[str | None, typer.Option("--list", help="export this list")] = None,
    segment: Annotated[str | None, typer.Option(help="export this saved segment")] = None,
    opted_out: Annotated[
        bool, typer.Option("--opted-out", help="export the opted-out contacts")
    ] = False,
) -> None:
    """Export contacts (phone, name, attributes, tags, opt-out) to CSV or XLSX."""
    from campaigns.contacts import ContactError, ExportSource, export

    fmt = output.suffix.lower().lstrip(".")
    with _engine() as engine:
        if fmt not in ("csv", "xlsx"):
            raise ContactError(f"{output.name}: name a .csv or .xlsx file", "file")
        src = ExportSource(list_name=list_name, segment=segment, opted_out=opted_out)
        try:
            n = export(engine, src, output, fmt)
        except OSError as exc:
            fail(f"{output}: cannot write ({exc.strerror})")
    noun = "contact" if n == 1 else "contacts"
    console.print(f"{n:,} {noun} written to {escape(str(output))}")


def register(app: typer.Typer) -> None:
    """Add the management commands to ``gatecast contacts``."""
    app.command("search")(search_cmd)
    app.command("add")(add_cmd)
    app.command("edit")(edit_cmd)
    app.command("tag")(_tag_command(True))
    app.command("untag")(_tag_command(False))
    app.command("delete")(delete_cmd)
    app.command("export")(export_cmd)
