"""``gatecast segment``: saved audiences (create with a count preview, list, show, delete)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, overload

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from gatecast.commands.common import fail, open_engine_or_fail

if TYPE_CHECKING:
    from campaigns.segments import SegmentRecord

console = Console()
segment_app = typer.Typer(
    help="Saved segments: audiences by lists, tags and attributes, reused by name.",
    no_args_is_help=True,
)


@contextmanager
def _errors() -> Iterator[None]:
    from campaigns.segments import AudienceError

    try:
        yield
    except AudienceError as exc:
        fail(str(exc))


def _where(values: list[str]) -> dict[str, list[str]]:
    """``--where city=Berlin --where plan=gold,silver`` as a ``where`` table."""
    out: dict[str, list[str]] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            fail(f"--where {item!r}: write attribute=value or attribute=value1,value2")
        out.setdefault(key.strip(), []).extend(v.strip() for v in value.split(",") if v.strip())
    return out


def _from_file(file: Path) -> dict[str, Any]:
    import tomllib

    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except OSError as exc:
        fail(f"{file}: {exc.strerror or exc}")
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        fail(f"{file}: not valid TOML ({exc})")
    section = data.get("audience", data)
    if not isinstance(section, dict):
        fail(f"{file}: [audience] must be a table")
    return section


def _print(record: SegmentRecord) -> None:
    from campaigns.segments import describe

    console.print(f"segment [bold]{escape(record.name)}[/]: {escape(describe(record.definition))}")
    if record.count is not None:
        console.print(record.count.summary())


_FILE = typer.Option("--file", help="a TOML file with the fields of [audience] (or that table)")
_LISTS = typer.Option("--list", help="a list (repeatable: union)")
_TAGS = typer.Option("--tag", help="a tag every contact has (repeatable)")
_WHERE = typer.Option("--where", help="attribute=value or attribute=v1,v2 (repeatable)")
_EXCLUDE_LISTS = typer.Option("--exclude-list", help="never members of this list")
_EXCLUDE_TAGS = typer.Option("--exclude-tag", help="never contacts with this tag")
_JSON = typer.Option("--json", help="print as JSON")


def _definition(
    file: Path | None,
    lists: list[str] | None,
    tags: list[str] | None,
    where: list[str] | None,
    exclude_lists: list[str] | None,
    exclude_tags: list[str] | None,
) -> dict[str, Any]:
    """The definition options (and ``--file``) as a segment's fields."""
    data: dict[str, Any] = _from_file(file) if file is not None else {}
    for key, given in (
        ("lists", lists),
        ("tags", tags),
        ("exclude_lists", exclude_lists),
        ("exclude_tags", exclude_tags),
    ):
        if given:
            data[key] = [*data.get(key, []), *given]
    if where:
        data["where"] = {**data.get("where", {}), **_where(where)}
    return data


@overload
def _save(name: str, data: dict[str, Any], *, change: Literal[False]) -> SegmentRecord: ...
@overload
def _save(name: str, data: dict[str, Any], *, change: bool = True) -> SegmentRecord | None: ...
def _save(name: str, data: dict[str, Any], *, change: bool = True) -> SegmentRecord | None:
    """Store ``data`` as the segment ``name``: a new one, or (``change``) the definition
    of an existing one (None: there is none). Refusals as one red line."""
    from campaigns.segments import change_segment, create_segment, parse_segment

    engine = open_engine_or_fail()
    try:
        with _errors():
            store = change_segment if change else create_segment
            return store(engine, name, parse_segment(data))
    finally:
        engine.dispose()


def _done(record: SegmentRecord, as_json: bool) -> None:
    if as_json:
        print(json.dumps(record.to_dict(), ensure_ascii=False))
        return
    _print(record)


@segment_app.command("create")
def create_cmd(
    name: Annotated[str, typer.Argument(help="the segment's name (campaigns use it)")],
    file: Annotated[Path | None, _FILE] = None,
    lists: Annotated[list[str] | None, _LISTS] = None,
    tags: Annotated[list[str] | None, _TAGS] = None,
    where: Annotated[list[str] | None, _WHERE] = None,
    exclude_lists: Annotated[list[str] | None, _EXCLUDE_LISTS] = None,
    exclude_tags: Annotated[list[str] | None, _EXCLUDE_TAGS] = None,
    as_json: Annotated[bool, _JSON] = False,
) -> None:
    """Save a segment and show what it selects now ("1,284 recipients; 12 opted out;
    3 excluded"). Unknown lists, tags or attributes are refused, and so is a segment
    that selects nobody; nothing is stored then."""
    data = _definition(file, lists, tags, where, exclude_lists, exclude_tags)
    _done(_save(name, data, change=False), as_json)


@segment_app.command("edit")
def edit_cmd(
    name: Annotated[str, typer.Argument(help="the segment's name")],
    file: Annotated[Path | None, _FILE] = None,
    lists: Annotated[list[str] | None, _LISTS] = None,
    tags: Annotated[list[str] | None, _TAGS] = None,
    where: Annotated[list[str] | None, _WHERE] = None,
    exclude_lists: Annotated[list[str] | None, _EXCLUDE_LISTS] = None,
    exclude_tags: Annotated[list[str] | None, _EXCLUDE_TAGS] = None,
    as_json: Annotated[bool, _JSON] = False,
) -> None:
    """Replace a segment's definition with the one given (as `segment create` takes it)
    and show what it selects now; refused as create refuses, nothing changed then.
    Campaigns created from it keep their audience."""
    record = _save(name, _definition(file, lists, tags, where, exclude_lists, exclude_tags))
    if record is None:
        fail(f"no segment called {name!r} (gatecast segment list)")
    _done(record, as_json)


@segment_app.command("list")
def list_cmd(
    as_json: Annotated[bool, typer.Option("--json", help="print as JSON")] = False,
) -> None:
    """The saved segments, oldest first."""
    from campaigns.segments import segments_page

    engine = open_engine_or_fail()
    try:
        page = segments_page(engine, limit=10_000)
    finally:
        engine.dispose()
    if as_json:
        print(json.dumps([r.to_dict() for r in page.items], ensure_ascii=False))
        return
    if not page.items:
        console.print("no segments yet: create one with `gatecast segment create NAME --list ...`")
        return
    from campaigns.segments import describe

    table = Table(title="Segments")
    table.add_column("name")
    table.add_column("definition", overflow="fold")
    for r in page.items:
        table.add_row(escape(r.name), escape(describe(r.definition)))
    console.print(table)


@segment_app.command("show")
def show_cmd(
    name: Annotated[str, typer.Argument(help="the segment's name")],
    as_json: Annotated[bool, typer.Option("--json", help="print as JSON")] = False,
) -> None:
    """One segment with what it selects now."""
    from campaigns.segments import get_segment

    engine = open_engine_or_fail()
    try:
        record = get_segment(engine, name)
    finally:
        engine.dispose()
    if record is None:
        fail(f"no segment called {name!r} (gatecast segment list)")
    _done(record, as_json)


@segment_app.command("delete")
def delete_cmd(name: Annotated[str, typer.Argument(help="the segment's name")]) -> None:
    """Delete a segment (campaigns created from it keep their audience)."""
    from campaigns.segments import delete_segment

    engine = open_engine_or_fail()
    try:
        deleted = delete_segment(engine, name)
    finally:
        engine.dispose()
    if not deleted:
        fail(f"no segment called {name!r} (gatecast segment list)")
    console.print(f"segment {escape(name)} deleted")


def register(app: typer.Typer) -> None:
    """Add ``gatecast segment`` to the root app."""
    app.add_typer(segment_app, name="segment")
