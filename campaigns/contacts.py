"""Contact management: search, add, edit, tag, take out of lists, one contact's history,
export. The one home of these rules; the CLI, the API and the dashboard only call it.

* A search is folded like an audience's values (:func:`campaigns.segments.fold_value`: no
  case, no accents) and matches the folded name, any folded attribute value, or (its
  digits) the phone.
* An attribute is typed ``key=value``; keys are folded as the import folds a column
  header (``City`` -> ``city``); an empty value is refused (unset it instead).
* A contact added or edited keeps ``folded`` and ``folded_name`` beside its attributes and
  name, as the import does.
* Unknown lists, tags, phones and segments are refused with their name; nothing is stored
  then (each change is one transaction).
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine

from campaigns.audiences import ContactRecord, clean_list_name
from campaigns.names import name_problem
from campaigns.paging import CursorPage, cursors, decode_cursor
from campaigns.phones import normalise_phone
from campaigns.reports.columns import iso, neutralise
from campaigns.segments import clean_tag, fold_attributes, fold_value, resolve
from storage.engine import let_writers_in
from storage.queries import audiences as aq
from storage.queries import contact_search as cs
from storage.queries import contacts as q
from storage.queries.paging import KeysetRows

#: deliveries and replies one contact's page shows at most
HISTORY_LIMIT = 200
#: attribute keys and values: at most this long
MAX_ATTRIBUTE_KEY = 100
MAX_ATTRIBUTE_VALUE = 1000
#: a name: at most this long (the column's size)
MAX_NAME = 300
#: the most attributes a contact holds (set by hand; an import has its own columns)
MAX_ATTRIBUTES = 100
#: the most tags one request adds (or removes) to a contact
MAX_TAGS = 100
#: the most phones one bulk change lists (a file or a request; a search reaches any number)
MAX_PHONES = 10_000
#: contact ids one transaction of a search's tag change covers (measured on SQLite:
#: 100,000 contacts tagged in one statement held the write lock 1.5 s; by windows, another
#: writer waited at most 0.44 s, the whole change took 1.8 s)
TAG_WINDOW = 10_000

#: a delivery's state in plain words (the contact's page)
STATE_WORDS: dict[str, str] = {
    "queued": "waiting to be sent",
    "sending": "being sent",
    "sent": "sent, not yet delivered",
    "delivered": "delivered",
    "read": "read",
    "failed": "not delivered (failed)",
    "unknown": "sent, outcome unknown",
    "skipped": "skipped",
}

_CONTACT_COLUMNS = tuple(ContactRecord.__dataclass_fields__)
_NOT_DIGITS = re.compile(r"\D+")
#: what a search may hold besides digits to be compared with phones too
_PHONE_CHARS = re.compile(r"^[\s+()./-]*\d[\d\s+()./-]*$")


class ContactError(ValueError):
    """A request the contacts cannot take, in the user's words; ``field`` names the part
    of the request at fault (``phone``, ``attr``, ``tag``, ``list``, ``name``, ...)."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


class ContactNotFound(ContactError):
    """No contact with that phone (or id)."""


# --- parsing what a user typed --------------------------------------------------------------


def phone_e164(raw: str, region: str) -> str:
    """``raw`` as E.164, or :class:`ContactError` with the reason."""
    result = normalise_phone(raw, region)
    if result.e164 is None:
        raise ContactError(f"{raw!r} is not a usable phone number: {result.reason}", "phone")
    return result.e164


def parse_attribute(text: str) -> tuple[str, str]:
    """``key=value`` -> ``(key folded, value)``; :class:`ContactError` when malformed."""
    key, sep, value = text.partition("=")
    key = key.strip().casefold()
    if not sep or not key:
        raise ContactError(f"attribute {text!r} is not key=value (e.g. city=Berlin)", "attributes")
    if not value.strip():
        raise ContactError(
            f"attribute {key!r} has an empty value (unset it to remove it)", "attributes"
        )
    if len(key) > MAX_ATTRIBUTE_KEY:
        raise ContactError(
            f"attribute name {key[:40]!r}... is longer than {MAX_ATTRIBUTE_KEY} characters",
            "attributes",
        )
    if len(value) > MAX_ATTRIBUTE_VALUE:
        raise ContactError(
            f"attribute {key!r}: value longer than {MAX_ATTRIBUTE_VALUE} characters", "attributes"
        )
    return key, value.strip()


def attributes_from(pairs: Iterable[str] | Mapping[str, Any]) -> dict[str, str]:
    """Typed ``key=value`` strings, or a mapping, as cleaned attributes (at most
    :data:`MAX_ATTRIBUTES`)."""
    if isinstance(pairs, Mapping):
        out = dict(parse_attribute(f"{k}={v}") for k, v in pairs.items())
    else:
        out = dict(parse_attribute(p) for p in pairs)
    _at_most_attributes(len(out))
    return out


def _at_most_attributes(n: int) -> None:
    if n > MAX_ATTRIBUTES:
        raise ContactError(
            f"{n} attributes: a contact holds at most {MAX_ATTRIBUTES}", "attributes"
        )


def clean_tags(names: Sequence[str], field: str = "tag") -> list[str]:
    """Tag names as stored (at most :data:`MAX_TAGS`); :class:`ContactError` for an empty
    or unusable one, or too many."""
    if len(names) > MAX_TAGS:
        raise ContactError(f"{len(names)} tags: at most {MAX_TAGS} in one request", field)
    out: list[str] = []
    for name in names:
        try:
            out.append(clean_tag(name))
        except ValueError as exc:
            raise ContactError(str(exc), field) from None
    return list(dict.fromkeys(out))


def _clean_name(name: str) -> str:
    cleaned = name.strip()
    if len(cleaned) > MAX_NAME:
        raise ContactError(f"the name is longer than {MAX_NAME} characters", "name")
    problem = name_problem(cleaned)
    if problem is not None:
        raise ContactError(f"the name {problem}", "name")
    return cleaned


# --- search ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Search:
    """What a user searches: text (name, phone, any attribute value) and filters by name."""

    query: str = ""
    list_name: str | None = None
    list_id: int | None = None
    tag: str | None = None
    opted_out: bool | None = None


def _list_id(conn: Connection, name: str) -> int:
    found = q.get_list_id(conn, name.strip())
    if found is None:
        raise ContactError(f"no list called {name.strip()!r}", "list")
    return found


def _tag_id(conn: Connection, name: str) -> int:
    tag = clean_tags([name])[0]
    found = aq.tag_ids(conn, [tag]).get(tag)
    if found is None:
        raise ContactError(f"no tag called {tag!r}", "tag")
    return found


def _filter(conn: Connection, s: Search) -> cs.ContactFilter:
    text = fold_value(s.query)
    digits = _NOT_DIGITS.sub("", text) if _PHONE_CHARS.match(text) else ""
    return cs.ContactFilter(
        text=text,
        digits=digits,
        list_id=s.list_id if s.list_name is None else _list_id(conn, s.list_name),
        tag_id=None if s.tag is None else _tag_id(conn, s.tag),
        opted_out=s.opted_out,
    )


#: a search resolved to the filter the bulk statements take (an unknown list or tag: ContactError)
resolve_search = _filter


@dataclass(frozen=True)
class SearchPage(CursorPage[ContactRecord]):
    """One page of a search; ``total_exact`` False: more than ``total`` match (a search
    counts up to :data:`storage.queries.contact_search.COUNT_CAP`, past the page when
    read by offset)."""


def search(
    engine: Engine, s: Search, *, limit: int, offset: int = 0, cursor: str | None = None
) -> SearchPage:
    """One page of the contacts the search selects (by id) and how many it selects: from
    ``cursor`` (a ``next_cursor`` / ``prev_cursor`` of an earlier page, or "last"; the same
    cost on any page) or ``offset`` rows in (slower as rows grow). ``BadCursor`` for a
    cursor this listing did not give out."""
    at = decode_cursor("contacts", cursor)
    with engine.connect() as conn:
        wanted = _filter(conn, s)
        if offset:
            total, exact, rows = cs.search_page(
                conn, _CONTACT_COLUMNS, wanted, limit=limit + 1, offset=offset
            )
            found = KeysetRows(rows[:limit], True, len(rows) > limit)
        else:
            total, exact, found = cs.search_keyset(
                conn, _CONTACT_COLUMNS, wanted, limit=limit, at=at
            )
    after, before = cursors("contacts", found, [int(r["id"]) for r in found.rows])
    return SearchPage(
        [ContactRecord(**r) for r in found.rows],
        total,
        total_exact=exact,
        next_cursor=after,
        prev_cursor=before,
    )


# --- one contact's changes -------------------------------------------------------------------


def _record(conn: Connection, contact_id: int) -> ContactRecord:
    row = q.contact_by_id(conn, _CONTACT_COLUMNS, contact_id)
    assert row is not None
    return ContactRecord(**row)


def add_contact(
    engine: Engine,
    phone: str,
    *,
    region: str,
    now: datetime,
    name: str = "",
    attributes: Mapping[str, str] | None = None,
    tags: Sequence[str] = (),
    list_name: str | None = None,
) -> ContactRecord:
    """Create a contact (tagged, in a list if given: created if missing); ContactError
    when the phone is unusable or already a contact, or an attribute or tag is."""
    e164 = phone_e164(phone, region)
    attrs = attributes_from(attributes or {})
    tag_names = clean_tags(tags, "tags")
    clean = _clean_name(name)
    list_clean: str | None = None
    if list_name is not None:
        try:
            list_clean = clean_list_name(list_name)
        except ValueError as exc:
            raise ContactError(str(exc), "list_name") from None
    with engine.begin() as conn:
        q.wait_for_imports(conn)
        contact_id = cs.insert_contact(
            conn,
            {
                "phone": e164,
                "raw_phone": phone.strip()[:200],
                "name": clean,
                "folded_name": fold_value(clean),
                "attributes": attrs,
                "folded": fold_attributes(attrs),
                "opted_out": False,
                "created_at": now,
                "updated_at": now,
            },
        )
        if contact_id is None:
            raise ContactError(f"{e164} is already a contact (edit it instead)", "phone")
        _tag(conn, contact_id, tag_names, now)
        if list_clean is not None:
            list_id, _ = q.ensure_list(conn, list_clean, now)
            cs.add_member(conn, list_id, contact_id, now)
        return _record(conn, contact_id)


def _tag(conn: Connection, contact_id: int, names: Sequence[str], now: datetime) -> None:
    """Tag one contact with ``names`` (created where missing): two statements, whatever
    their number."""
    cs.tag_contact(conn, contact_id, list(aq.ensure_tags(conn, names, now).values()))


@dataclass(frozen=True)
class Edit:
    """A change to one contact: a new name (None: kept), attributes set and unset, tags
    added and removed."""

    name: str | None = None
    set_attributes: Mapping[str, str] = field(default_factory=dict)
    unset_attributes: Sequence[str] = ()
    add_tags: Sequence[str] = ()
    remove_tags: Sequence[str] = ()


def edit_contact(
    engine: Engine, phone: str, edit: Edit, *, region: str, now: datetime
) -> ContactRecord:
    """Apply ``edit`` to the contact ``phone`` in one transaction."""
    e164 = phone_e164(phone, region)
    attrs_set = attributes_from(edit.set_attributes)
    _at_most_attributes(len(edit.unset_attributes))
    unset = [k.strip().casefold() for k in edit.unset_attributes]
    add_tags = clean_tags(edit.add_tags, "add_tags")
    remove_tags = clean_tags(edit.remove_tags, "remove_tags")
    with engine.begin() as conn:
        row = cs.contact_for_update(conn, e164)
        if row is None:
            raise ContactNotFound(f"no contact with phone {e164}", "phone")
        contact_id = int(row["id"])
        attrs = dict(row["attributes"] or {})
        missing = [k for k in unset if k not in attrs]
        if missing:
            have = ", ".join(sorted(attrs)) or "none"
            raise ContactError(
                f"the contact has no attribute {missing[0]!r} (it has: {have})", "unset"
            )
        for k in unset:
            attrs.pop(k)
        attrs.update(attrs_set)
        _at_most_attributes(len(attrs))
        values: dict[str, Any] = {
            "attributes": attrs,
            "folded": fold_attributes(attrs),
            "updated_at": now,
        }
        if edit.name is not None:
            values["name"] = _clean_name(edit.name)
            values["folded_name"] = fold_value(values["name"])
        cs.update_contact(conn, contact_id, values)
        _tag(conn, contact_id, add_tags, now)
        cs.untag_contact(conn, contact_id, list(aq.tag_ids(conn, remove_tags).values()))
        return _record(conn, contact_id)


@dataclass(frozen=True)
class Targets:
    """Which contacts a bulk change reaches: one phone, the contacts of a search, or the
    phones of a file (one per line, or the first column of a CSV)."""

    phone: str | None = None
    search: Search | None = None
    phones: Sequence[str] | None = None


def phones_in_file(path: Path, region: str) -> list[str]:
    """The E.164 phones of a file of numbers (one per line or the first CSV column; a
    header line is skipped); ContactError naming the first unusable line."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise ContactError(f"{path.name}: cannot be read ({exc})", "file") from None
    out: list[str] = []
    for number, row in enumerate(csv.reader(text.splitlines()), start=1):
        cell = row[0].strip() if row else ""
        if not cell or (number == 1 and not any(ch.isdigit() for ch in cell)):
            continue
        result = normalise_phone(cell, region)
        if result.e164 is None:
            raise ContactError(f"{path.name}, line {number}: {cell!r}: {result.reason}", "file")
        out.append(result.e164)
    if not out:
        raise ContactError(f"{path.name}: holds no phone number", "file")
    return list(dict.fromkeys(out))


def _targets(conn: Connection, t: Targets, region: str) -> cs.ContactFilter:
    if t.phone is not None:
        e164 = phone_e164(t.phone, region)
        if q.get_contact(conn, e164) is None:
            raise ContactNotFound(f"no contact with phone {e164}", "phone")
        return cs.ContactFilter(where=(cs.contacts.c.phone == e164,))
    if t.phones is not None:
        if len(t.phones) > MAX_PHONES:
            raise ContactError(
                f"{len(t.phones)} phones: at most {MAX_PHONES} in one change "
                "(tag a list or a search instead)",
                "phones",
            )
        missing, f = cs.phones_filter(conn, list(t.phones))
        if missing:
            more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
            raise ContactNotFound(f"no contact with phone {missing[0]}{more}", "phone")
        return f
    assert t.search is not None
    return _filter(conn, t.search)


def change_tag(
    engine: Engine, tag: str, targets: Targets, *, add: bool, region: str, now: datetime
) -> int:
    """Tag (``add``) or untag the contacts of ``targets``; how many changed. Untagging with
    a tag nobody has is refused as unknown.

    A phone or a list of phones (at most :data:`MAX_PHONES`) changes in one transaction; a
    search's contacts change :data:`TAG_WINDOW` ids at a time, each window its own
    transaction, so tagging a million contacts never holds the write lock for long (a
    failure half-way leaves the first windows changed: run it again, it is idempotent)."""
    name = clean_tags([tag])[0]
    with engine.begin() as conn:
        f = _targets(conn, targets, region)
        tag_id = aq.ensure_tags(conn, [name], now)[name] if add else _tag_id(conn, name)
        change = cs.tag_contacts if add else cs.untag_contacts
        if targets.search is None:
            return change(conn, tag_id, f)
        windows = cs.id_windows(conn, TAG_WINDOW)
    changed = 0
    for n, (first, last) in enumerate(windows):
        if n:
            let_writers_in(engine)
        with engine.begin() as conn:
            changed += change(conn, tag_id, cs.within(f, first, last))
    return changed


def remove_from_lists(engine: Engine, phone: str, list_name: str | None, *, region: str) -> int:
    """Take the contact out of the list ``list_name`` (None: every list); how many
    memberships went. The contact itself stays."""
    e164 = phone_e164(phone, region)
    with engine.begin() as conn:
        row = q.get_contact(conn, e164)
        if row is None:
            raise ContactNotFound(f"no contact with phone {e164}", "phone")
        list_ids = None if list_name is None else [_list_id(conn, list_name)]
        removed = cs.remove_member(conn, int(row.id), list_ids)
        if list_name is not None and not removed:
            raise ContactError(f"{e164} is not in the list {list_name.strip()!r}", "list")
        return removed


def contact_id_for(engine: Engine, phone: str, *, region: str) -> int:
    """The id of the contact ``phone``; ContactNotFound when there is none."""
    e164 = phone_e164(phone, region)
    with engine.connect() as conn:
        row = q.get_contact(conn, e164)
    if row is None:
        raise ContactNotFound(f"no contact with phone {e164}", "phone")
    return int(row.id)


# --- one contact's page ----------------------------------------------------------------------


@dataclass(frozen=True)
class DeliveryLine:
    """A message the contact got: its campaign, state (and in plain words), times."""

    campaign_id: int
    campaign_name: str
    state: str
    state_words: str
    error: str | None
    queued_at: datetime
    sent_at: datetime | None
    delivered_at: datetime | None
    read_at: datetime | None
    failed_at: datetime | None
    replied_at: datetime | None


@dataclass(frozen=True)
class ReplyLine:
    """A message the contact sent (``is_opt_out``: it opted them out)."""

    text: str
    received_at: datetime
    is_opt_out: bool


@dataclass(frozen=True)
class ContactDetail:
    """One contact with its lists, tags, the deliveries it got and its replies."""

    contact: ContactRecord
    lists: list[str]
    tags: list[str]
    deliveries: list[DeliveryLine]
    replies: list[ReplyLine]

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form (times ISO 8601)."""
        out = asdict(self)
        return json.loads(json.dumps(out, default=lambda v: v.isoformat()))  # type: ignore[no-any-return]


def detail(engine: Engine, contact_id: int) -> ContactDetail | None:
    """The contact ``contact_id`` with its history (last :data:`HISTORY_LIMIT`), or None."""
    with engine.connect() as conn:
        row = q.contact_by_id(conn, _CONTACT_COLUMNS, contact_id)
        if row is None:
            return None
        lists = [n for _, n in cs.contact_list_ids(conn, contact_id)]
        tags = aq.contact_tag_names(conn, contact_id)
        sent = cs.contact_deliveries(conn, contact_id, limit=HISTORY_LIMIT)
        replies = cs.contact_replies(conn, contact_id, limit=HISTORY_LIMIT)
    return ContactDetail(
        contact=ContactRecord(**row),
        lists=lists,
        tags=tags,
        deliveries=[
            DeliveryLine(
                campaign_id=int(d["campaign_id"]),
                campaign_name=str(d["campaign_name"]),
                state=str(d["state"]),
                state_words=STATE_WORDS.get(str(d["state"]), str(d["state"])),
                error=d["error"],
                queued_at=d["queued_at"],
                sent_at=d["sent_at"],
                delivered_at=d["delivered_at"],
                read_at=d["read_at"],
                failed_at=d["failed_at"],
                replied_at=d["replied_at"],
            )
            for d in sent
        ],
        replies=[
            ReplyLine(
                text=str(r["text"]), received_at=r["received_at"], is_opt_out=bool(r["is_opt_out"])
            )
            for r in replies
        ],
    )


# --- export ---------------------------------------------------------------------------------

EXPORT_FORMATS = ("csv", "xlsx")


@dataclass(frozen=True)
class ExportSource:
    """What to export: a list, a saved segment, or the opted-out contacts (one of them)."""

    list_name: str | None = None
    segment: str | None = None
    opted_out: bool = False


def _export_filter(conn: Connection, src: ExportSource) -> cs.ContactFilter:
    given = [x for x in (src.list_name, src.segment) if x is not None] + (
        ["opted out"] if src.opted_out else []
    )
    if len(given) != 1:
        raise ContactError("export one of: a list, a saved segment, or the opted-out", "source")
    if src.list_name is not None:
        return cs.ContactFilter(list_id=_list_id(conn, src.list_name))
    if src.segment is not None:
        seg = aq.segment_by_name(conn, src.segment.strip())
        if seg is None:
            raise ContactError(f"no saved segment called {src.segment.strip()!r}", "segment")
        return cs.ContactFilter(where=tuple(aq.selected(resolve(conn, seg["definition"]))))
    return cs.ContactFilter(opted_out=True)


def _export_lines(conn: Connection, f: cs.ContactFilter) -> tuple[list[str], list[list[str]]]:
    batches = list(cs.export_rows(conn, f))
    keys = sorted({k for batch in batches for r, _ in batch for k in (r["attributes"] or {})})
    header = ["phone", "name", *keys, "tags", "opted_out", "opted_out_at"]
    lines: list[list[str]] = []
    for batch in batches:
        for r, tag_names in batch:
            attrs = r["attributes"] or {}
            lines.append(
                [
                    str(r["phone"]),
                    neutralise(str(r["name"])),
                    *(neutralise(str(attrs.get(k, ""))) for k in keys),
                    ",".join(tag_names),
                    "yes" if r["opted_out"] else "no",
                    iso(r["opted_out_at"]),
                ]
            )
    return header, lines


def export(engine: Engine, src: ExportSource, path: Path, fmt: str) -> int:
    """Write the contacts of ``src`` to ``path`` as CSV or XLSX (phone, name, one column per
    attribute, tags, opt-out state); how many rows."""
    if fmt not in EXPORT_FORMATS:
        raise ContactError(f"format {fmt!r}: use csv or xlsx", "format")
    with engine.connect() as conn:
        header, lines = _export_lines(conn, _export_filter(conn, src))
    if fmt == "csv":
        with path.open("w", newline="", encoding="utf-8") as out:
            writer = csv.writer(out)
            writer.writerow(header)
            writer.writerows(lines)
    else:
        from openpyxl import Workbook

        book = Workbook(write_only=True)
        sheet = book.create_sheet("Contacts")
        sheet.append(header)
        for line in lines:
            sheet.append(line)
        book.save(path)
    return len(lines)


__all__ = [
    "EXPORT_FORMATS",
    "HISTORY_LIMIT",
    "STATE_WORDS",
    "ContactDetail",
    "ContactError",
    "ContactNotFound",
    "DeliveryLine",
    "Edit",
    "ExportSource",
    "ReplyLine",
    "Search",
    "SearchPage",
    "Targets",
    "add_contact",
    "attributes_from",
    "change_tag",
    "clean_tags",
    "contact_id_for",
    "detail",
    "edit_contact",
    "export",
    "parse_attribute",
    "phone_e164",
    "phones_in_file",
    "remove_from_lists",
    "search",
]
