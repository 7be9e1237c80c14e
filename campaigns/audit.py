"""The audit log: who changed what, when, from where, and how it ended (issue 15).

An entry is written for every change made through the API or the dashboard (the web's
middleware, ``gatecast.web.audit``), every sign-in, failed sign-in and sign-out, every
refused API key, every export of personal data, every replayed idempotent request, and
every changing CLI command (``gatecast.commands.common.record_cli_command``). The actor is
a user name, ``owner key`` (the deployment's ``GATECAST_API_KEY``) or ``cli:<os user>``;
``key_id`` names the user's API key that acted, and ``changes`` what a change replaced
(``{"role": ["operator", "viewer"]}``).

The detail is a small JSON object: never a password, key, secret or request body.
:func:`clean_detail` drops members whose name says they hold a secret. An erasure
(``campaigns.erasure``) rewrites the entries whose detail or target still holds the
erased number (:func:`scrub_number`).
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Engine, RowMapping

from campaigns.paging import Page
from gateway.text import storable
from storage.queries import audit as q
from storage.queries.audit import AuditFilter

OWNER_ACTOR = "owner key"
#: how a change ended: done, refused (no right, wrong password), or failed (an error)
OUTCOMES = ("ok", "refused", "failed")
#: the columns of an export, in order
EXPORT_COLUMNS = q.COLUMNS
#: a detail member whose name matches this is dropped (it may hold a secret)
_SECRET_NAME = re.compile(r"pass|secret|token|key|authorization|cookie", re.IGNORECASE)
_MAX_TEXT = 200
_MAX_MEMBERS = 20


@dataclass(frozen=True)
class Entry:
    """One audit entry."""

    id: int
    at: datetime
    actor: str
    role: str
    action: str
    target_type: str | None
    target_id: str | None
    source: str
    outcome: str
    status: int | None
    detail: dict[str, Any]
    #: the API key that acted (None: the owner key, a password session, the CLI)
    key_id: int | None = None
    #: what a change replaced: ``{"role": ["operator", "viewer"]}`` (before, after)
    changes: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form."""
        return {**self.__dict__, "at": self.at.isoformat()}


def outcome_of(status: int) -> str:
    """An HTTP status as an outcome: ``ok`` below 400, ``refused`` for 401, 403 and 429,
    ``failed`` otherwise."""
    if status < 400:
        return "ok"
    if status in (401, 403, 429):
        return "refused"
    return "failed"


def clean_detail(detail: Mapping[str, Any] | None) -> dict[str, Any]:
    """``detail`` without members that may hold a secret, texts cut at 200 characters,
    at most 20 members."""
    out: dict[str, Any] = {}
    for name, value in list((detail or {}).items())[:_MAX_MEMBERS]:
        if _SECRET_NAME.search(str(name)):
            continue
        if isinstance(value, str):
            value = value[:_MAX_TEXT]
        elif isinstance(value, list):
            value = [v[:_MAX_TEXT] if isinstance(v, str) else v for v in value[:_MAX_MEMBERS]]
        elif not isinstance(value, int | float | bool | None):
            value = str(value)[:_MAX_TEXT]
        out[str(name)] = value
    return out


def changed(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, list[Any]]:
    """The fields whose value differs between ``before`` and ``after``, as
    ``{field: [before, after]}`` (what :func:`record` keeps as ``changes``)."""
    return {k: [before.get(k), v] for k, v in after.items() if before.get(k) != v}


def clean_changes(
    changes: Mapping[str, tuple[Any, Any] | list[Any]] | None,
) -> dict[str, list[Any]] | None:
    """``changes`` without fields that may hold a secret (a password is never kept, only
    that it changed: ``[null, "changed"]``), values as text cut at 200 characters unless
    numbers, booleans or null; None when nothing changed."""
    out: dict[str, list[Any]] = {}
    for name, pair in list((changes or {}).items())[:_MAX_MEMBERS]:
        values = list(pair)[:2]
        if _SECRET_NAME.search(str(name)):
            values = [None, "changed"]
        out[str(name)] = [
            v if isinstance(v, int | float | bool | None) else str(v)[:_MAX_TEXT] for v in values
        ]
    return out or None


def record(
    engine: Engine,
    *,
    at: datetime,
    actor: str,
    role: str,
    action: str,
    outcome: str,
    source: str = "",
    target_type: str | None = None,
    target_id: object = None,
    status: int | None = None,
    detail: Mapping[str, Any] | None = None,
    key_id: int | None = None,
    changes: Mapping[str, tuple[Any, Any] | list[Any]] | None = None,
) -> int:
    """Append one entry; returns its id. ``changes``: each changed field's value before
    and after (:func:`clean_changes`). What a request said is recorded as it was, less
    the characters no database stores (:mod:`gateway.text`): a sign-in refused for a NUL
    in its user name is still recorded."""
    if outcome not in OUTCOMES:
        raise ValueError(f"outcome {outcome!r}: use {', '.join(OUTCOMES)}")
    return q.append(
        engine,
        at=at,
        actor=storable(actor[:100]),
        role=role[:16],
        action=storable(action[:200]),
        target_type=None if target_type is None else storable(target_type[:40]),
        target_id=None if target_id is None else storable(str(target_id)[:100]),
        source=storable(source[:100]),
        outcome=outcome,
        status=status,
        detail=storable(clean_detail(detail)),
        key_id=key_id,
        changes=storable(clean_changes(changes)),
    )


def _entry(row: RowMapping) -> Entry:
    return Entry(**{c: row[c] for c in q.COLUMNS})


def entries(
    engine: Engine, where: AuditFilter | None = None, *, limit: int = 50, offset: int = 0
) -> Page[Entry]:
    """One page of entries matching ``where``, newest first."""
    total, rows = q.entries_page(engine, where or AuditFilter(), limit=limit, offset=offset)
    return Page([_entry(r) for r in rows], total)


def export_lines(engine: Engine, where: AuditFilter | None = None) -> Iterator[str]:
    """The matching entries as CSV lines (a header first), oldest first; a cell that
    starts like a formula is neutralised with a leading apostrophe."""
    from campaigns.reports.columns import neutralise

    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")

    def line(values: list[Any]) -> str:
        buffer.seek(0)
        buffer.truncate()
        writer.writerow(values)
        return buffer.getvalue()

    yield line(list(EXPORT_COLUMNS))
    for row in q.all_entries(engine, where or AuditFilter()):
        entry = _entry(row)
        cells: list[Any] = []
        for column in EXPORT_COLUMNS:
            value = getattr(entry, column)
            if column == "at":
                value = entry.at.isoformat()
            elif column in ("detail", "changes") and value is not None:
                import json

                value = json.dumps(value, sort_keys=True, separators=(",", ":"))
            cells.append(neutralise(value) if isinstance(value, str) else value)
        yield line(cells)


def scrub_number(conn: Connection, holds: Callable[[Any], bool], replacement_target: str) -> int:
    """In the erasure's transaction: every entry whose detail or target holds the erased
    number (``holds``) gets the detail ``{"erased": true}`` (and ``replacement_target``
    for a target that held it); how many entries."""
    detail_ids: list[int] = []
    target_ids: list[int] = []
    for page in q.detail_pages(conn):
        for entry_id, (target_id, detail) in page:
            if holds(target_id):
                target_ids.append(entry_id)
            elif holds(detail):
                detail_ids.append(entry_id)
    done = q.scrub(conn, detail_ids, detail={"erased": True})
    done += q.scrub(conn, target_ids, detail={"erased": True}, target_id=replacement_target)
    return done


__all__ = [
    "EXPORT_COLUMNS",
    "OUTCOMES",
    "OWNER_ACTOR",
    "AuditFilter",
    "Entry",
    "changed",
    "clean_changes",
    "clean_detail",
    "entries",
    "export_lines",
    "outcome_of",
    "record",
    "scrub_number",
]


def names_of(engine: Engine, table: str, ids: list[int]) -> dict[int, str]:
    """The names of rows ``ids`` of ``table`` (campaigns, lists, segments, webhook
    endpoints by URL): how the audit page names an entry's target."""
    return q.names_of(engine, table, ids)
