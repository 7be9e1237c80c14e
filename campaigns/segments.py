"""Audiences beyond one list: the matching rules, saved segments, the count preview.

The one home of how an audience matches (issue 19): attribute values compare folded
(:func:`fold_value`: no case, no accents), tag names are folded the same way
(:func:`clean_tag`), and an audience's names are resolved to ids here, refusing what
does not exist (:class:`AudienceError` names the field and, for an attribute, the
attribute names that exist). Storage receives the resolved
:class:`storage.queries.audiences.AudienceFilter` and evaluates it in SQL: the preview
in one pass, a campaign's members at its start in ONE ``INSERT ... SELECT``.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Engine

from campaigns.campaign_file import MAX_AUDIENCE_NAME, AudienceSpec, audience_problems
from campaigns.names import name_problem
from campaigns.paging import Page
from storage.queries import audiences as aq
from storage.queries import contacts as cq
from storage.types import utcnow

#: the longest tag name
MAX_TAG = 100


class AudienceError(ValueError):
    """An audience that cannot be used as given; ``field`` is the path of its field
    (``where.city``, ``tags``, ``segment``), or None."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


def fold_value(value: object) -> str:
    """A value as audiences compare it: trimmed, no accents, case-folded
    (``" Zürich "`` -> ``"zurich"``)."""
    text = str(value)
    if text.isascii():  # nothing to decompose; ASCII case-folds as it lowers (imports: 8x)
        return text.lower().strip()
    decomposed = unicodedata.normalize("NFKD", text)
    plain = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    return plain.casefold().strip()


def fold_attributes(attributes: Mapping[str, Any]) -> dict[str, str]:
    """A contact's attributes as an audience's ``where`` compares them."""
    return {k: fold_value(v) for k, v in attributes.items()}


def clean_tag(name: str) -> str:
    """A tag name as stored (trimmed, lower case); ValueError for an unusable one."""
    tag = name.strip().casefold()
    if not tag:
        raise ValueError("a tag cannot be empty")
    if "," in tag:
        raise ValueError(f"tag {name.strip()!r} holds a comma (commas separate tags)")
    if len(tag) > MAX_TAG:
        raise ValueError(f"tag {name.strip()[:40]!r}... is longer than {MAX_TAG} characters")
    problem = name_problem(tag)
    if problem is not None:
        raise ValueError(f"the tag {problem}")
    return tag


@dataclass(frozen=True)
class AudienceCount:
    """What an audience selects now: ``matched`` by its lists, tags and where;
    ``excluded`` of those by its exclusions; ``opted_out`` of the rest (they would be
    skipped); ``cooldown`` of the rest, messaged within a campaign's contact cooldown
    (a campaign's count only: ``campaigns.cooldown``); ``recipients`` the ones a
    campaign would send to."""

    matched: int
    excluded: int
    opted_out: int
    cooldown: int = 0

    @property
    def recipients(self) -> int:
        """Contacts a campaign to this audience would message."""
        return self.matched - self.excluded - self.opted_out - self.cooldown

    def summary(self) -> str:
        """``"1,284 recipients; 37 excluded by cooldown; 12 opted out; 3 excluded"``
        (the cooldown only when it excludes anyone)."""
        cooled = f"{self.cooldown:,} excluded by cooldown; " if self.cooldown else ""
        return (
            f"{self.recipients:,} recipient{'' if self.recipients == 1 else 's'}; "
            f"{cooled}{self.opted_out:,} opted out; "
            f"{self.excluded:,} excluded"
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form."""
        return {
            "recipients": self.recipients,
            "matched": self.matched,
            "opted_out": self.opted_out,
            "excluded": self.excluded,
            "cooldown": self.cooldown,
            "summary": self.summary(),
        }


def _ids(conn: Connection, names: list[str], kind: str, field: str) -> tuple[int, ...]:
    if kind == "list":
        found = {n: cq.get_list_id(conn, n) for n in names}
        known = {n: i for n, i in found.items() if i is not None}
    else:
        known = aq.tag_ids(conn, names)
    missing = [n for n in names if n not in known]
    if missing:
        hint = "import contacts into it first" if kind == "list" else "tag contacts on import first"
        raise AudienceError(
            f"{field}: no {kind} called {', '.join(repr(m) for m in missing)} ({hint})", field
        )
    return tuple(dict.fromkeys(known[n] for n in names))


def resolve(conn: Connection, definition: Mapping[str, Any]) -> aq.AudienceFilter:
    """An audience's names resolved to ids and its ``where`` values folded.

    Raises :class:`AudienceError` for a list, tag or attribute that does not exist (an
    attribute's error lists the attribute names contacts have)."""
    where: list[tuple[str, tuple[str, ...]]] = []
    for given, values in (definition.get("where") or {}).items():
        name = given.strip().casefold()  # as the import keys a column ("City" -> city)
        if not aq.attribute_exists(conn, name):
            names = aq.attribute_names(conn)
            known = ", ".join(names) if names else "none (no contact has attributes yet)"
            raise AudienceError(
                f"where.{given}: no contact has an attribute {name!r}; the attributes "
                f"that exist: {known}",
                f"where.{given}",
            )
        where.append((name, tuple(dict.fromkeys(fold_value(v) for v in values))))
    tags = [_tag_name(t, "tags") for t in definition.get("tags") or []]
    exclude_tags = [_tag_name(t, "exclude_tags") for t in definition.get("exclude_tags") or []]
    return aq.AudienceFilter(
        list_ids=_ids(conn, list(definition.get("lists") or []), "list", "lists"),
        tag_ids=_ids(conn, tags, "tag", "tags"),
        where=tuple(where),
        exclude_list_ids=_ids(
            conn, list(definition.get("exclude_lists") or []), "list", "exclude_lists"
        ),
        exclude_tag_ids=_ids(conn, exclude_tags, "tag", "exclude_tags"),
    )


def _tag_name(name: str, field: str) -> str:
    try:
        return clean_tag(name)
    except ValueError as exc:
        raise AudienceError(f"{field}: {exc}", field) from None


def count(conn: Connection, f: aq.AudienceFilter) -> AudienceCount:
    """What the resolved audience selects now (one pass in SQL)."""
    c = aq.audience_counts(conn, f)
    return AudienceCount(matched=c.matched, excluded=c.excluded, opted_out=c.opted_out)


def _check_selects(counted: AudienceCount, what: str) -> None:
    if counted.matched - counted.excluded <= 0:
        raise AudienceError(
            f"{what} selects no contact ({counted.matched:,} match its lists, tags and "
            f"where; {counted.excluded:,} of them excluded): check its names and values",
            None,
        )


def describe(definition: Mapping[str, Any]) -> str:
    """An audience by names in one line (``lists = customers; where city is berlin``)."""
    parts = []
    for key in ("lists", "tags", "exclude_lists", "exclude_tags"):
        if definition.get(key):
            parts.append(f"{key} = {', '.join(definition[key])}")
    for name, values in (definition.get("where") or {}).items():
        parts.append(f"where {name} is {' or '.join(values)}")
    return "; ".join(parts)


# --- a campaign's audience ------------------------------------------------------------------


@dataclass(frozen=True)
class CampaignAudience:
    """A campaign's audience as created: its definition by names (a segment expanded),
    resolved, and counted."""

    definition: dict[str, Any]
    filter: aq.AudienceFilter
    count: AudienceCount
    segment: str | None


def campaign_audience(conn: Connection, spec: AudienceSpec) -> CampaignAudience:
    """Resolve a campaign's ``[audience]`` (a saved segment by name) and count it.

    Raises :class:`AudienceError` (fields prefixed ``audience.``) for a segment, list,
    tag or attribute that does not exist, and for an audience that selects nobody."""
    definition = spec.definition()
    if spec.segment is not None:
        found = aq.segment_by_name(conn, spec.segment.strip())
        if found is None:
            known = [str(r["name"]) for r in aq.segments_page(conn, limit=50, offset=0)[1]]
            listed = ", ".join(known) if known else "none yet (gatecast segment create)"
            raise AudienceError(
                f"audience.segment: no saved segment {spec.segment!r}; the segments: {listed}",
                "audience.segment",
            )
        definition = dict(found["definition"])
    try:
        resolved = resolve(conn, definition)
        counted = count(conn, resolved)
        _check_selects(counted, "the audience")
    except AudienceError as exc:
        field = f"audience.{exc.field}" if exc.field else "audience"
        raise AudienceError(f"audience.{exc}" if exc.field else str(exc), field) from None
    return CampaignAudience(definition, resolved, counted, spec.segment)


def evaluate_members(conn: Connection, campaign_id: int, definition: Mapping[str, Any]) -> int:
    """Evaluate a campaign's audience into its members, once (ONE ``INSERT ... SELECT``;
    a campaign whose members exist is left as it is); how many members it added."""
    if aq.has_audience_members(conn, campaign_id):
        return 0
    return aq.insert_audience_members(conn, campaign_id, resolve(conn, definition))


# --- saved segments -------------------------------------------------------------------------


@dataclass(frozen=True)
class SegmentRecord:
    """A saved segment and, when asked, what it selects now."""

    id: int
    name: str
    definition: dict[str, Any]
    created_at: datetime
    count: AudienceCount | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form."""
        return {
            "id": self.id,
            "name": self.name,
            "definition": self.definition,
            "created_at": self.created_at.isoformat(),
            "count": None if self.count is None else self.count.to_dict(),
        }


class SegmentExists(AudienceError):
    """A segment of that name is saved already."""


def clean_segment_name(name: str) -> str:
    """A segment's name as stored; ValueError for an empty or over-long one."""
    cleaned = name.strip()
    if not cleaned:
        raise ValueError("a segment name cannot be empty")
    if len(cleaned) > MAX_AUDIENCE_NAME:
        raise ValueError(f"segment name longer than {MAX_AUDIENCE_NAME} characters")
    problem = name_problem(cleaned)
    if problem is not None:
        raise ValueError(f"the segment name {problem}")
    return cleaned


def parse_segment(data: Mapping[str, Any]) -> AudienceSpec:
    """A segment's fields (those of ``[audience]`` without ``segment``), validated;
    :class:`AudienceError` listing every problem."""
    problems = audience_problems(data, allow_segment=False)
    unknown = sorted(set(data) - set(AudienceSpec.model_fields) - {"segment"})
    problems += [(k, "unknown field (check the spelling)") for k in unknown]
    if problems:
        raise AudienceError("; ".join(f"{p}: {m}" if p else m for p, m in problems), None)
    return AudienceSpec.model_validate(dict(data))


def create_segment(
    engine: Engine, name: str, spec: AudienceSpec, *, now: datetime | None = None
) -> SegmentRecord:
    """Save ``spec`` as the segment ``name``, with its count preview.

    Refused (:class:`AudienceError`, nothing stored) when a list, tag or attribute does
    not exist, when it selects nobody, or (:class:`SegmentExists`) when the name is taken.
    """
    try:
        name = clean_segment_name(name)
    except ValueError as exc:
        raise AudienceError(str(exc), "name") from None
    if spec.segment is not None:
        raise AudienceError("segment: a segment cannot name another segment", "segment")
    definition = spec.definition()
    now = now or utcnow()
    with engine.begin() as conn:
        counted = count(conn, resolve(conn, definition))
        _check_selects(counted, f"segment {name!r}")
        segment_id = aq.insert_segment(conn, name, definition, now)
        if segment_id is None:
            raise SegmentExists(f"a segment called {name!r} exists already", "name")
    return SegmentRecord(segment_id, name, definition, now, counted)


def change_segment(engine: Engine, name: str, spec: AudienceSpec) -> SegmentRecord | None:
    """Give the segment ``name`` the definition ``spec`` (its name stays), with its
    count preview; None when there is no such segment. Refused as a create is
    (:class:`AudienceError`, nothing changed). Campaigns created from it keep their
    audience (expanded at create)."""
    if spec.segment is not None:
        raise AudienceError("segment: a segment cannot name another segment", "segment")
    definition = spec.definition()
    with engine.begin() as conn:
        if aq.segment_by_name(conn, name.strip()) is None:
            return None
        counted = count(conn, resolve(conn, definition))
        _check_selects(counted, f"segment {name.strip()!r}")
        row = aq.update_segment(conn, name.strip(), definition)
    if row is None:  # deleted meanwhile
        return None
    record = _record(row)
    return SegmentRecord(record.id, record.name, record.definition, record.created_at, counted)


def get_segment(engine: Engine, name: str, *, counted: bool = True) -> SegmentRecord | None:
    """The segment called ``name`` with what it selects now, or None."""
    with engine.connect() as conn:
        row = aq.segment_by_name(conn, name.strip())
        if row is None:
            return None
        record = _record(row)
        if not counted:
            return record
        try:
            now_count = count(conn, resolve(conn, record.definition))
        except AudienceError:
            now_count = None  # a name it uses no longer resolves; shown without counts
    return SegmentRecord(record.id, record.name, record.definition, record.created_at, now_count)


def segments_page(engine: Engine, *, limit: int, offset: int = 0) -> Page[SegmentRecord]:
    """One page of saved segments, by id (without counts)."""
    with engine.connect() as conn:
        total, rows = aq.segments_page(conn, limit=limit, offset=offset)
    return Page([_record(r) for r in rows], total)


def delete_segment(engine: Engine, name: str) -> bool:
    """Delete the segment called ``name``; False when there is none. Campaigns created
    from it keep their audience (expanded at create)."""
    with engine.begin() as conn:
        return aq.delete_segment(conn, name.strip())


def _record(row: Any) -> SegmentRecord:
    return SegmentRecord(
        id=int(row["id"]),
        name=str(row["name"]),
        definition=dict(row["definition"]),
        created_at=row["created_at"],
    )


__all__ = [
    "MAX_TAG",
    "AudienceCount",
    "AudienceError",
    "CampaignAudience",
    "SegmentExists",
    "SegmentRecord",
    "campaign_audience",
    "change_segment",
    "clean_segment_name",
    "clean_tag",
    "count",
    "create_segment",
    "delete_segment",
    "describe",
    "evaluate_members",
    "fold_attributes",
    "fold_value",
    "get_segment",
    "parse_segment",
    "resolve",
    "segments_page",
]
