"""The webhook journal: accepted events kept in a local file while the database is away.

When a batch cannot be stored because the database is locked, full or unreachable, the
batcher (:mod:`campaigns.inbox.batcher`) appends its events here (one JSON line per event,
fsynced) and acknowledges them; it drains the file into the database, oldest first, once
the database answers again. Storing is idempotent (status events dedupe by message id
and status, replies by message id), so an event stored twice (a drain cut short) changes
nothing. The file I/O is
:class:`storage.journal.Journal`'s, and so is the choice of its folder
(:func:`storage.journal.journal_folder`); this module encodes events and names the file.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from gateway.events import ConnectionStatus, DeliveryStatus, Event, IncomingMessage, MessageStatus
from storage.engine import Engine
from storage.journal import Journal, journal_folder

#: the journal's file name, in ``GATECAST_JOURNAL_DIR`` (default: next to a SQLite file)
JOURNAL_FILE = "gatecast-webhook-journal.jsonl"

_KINDS: dict[str, type[MessageStatus | IncomingMessage | ConnectionStatus]] = {
    "status": MessageStatus,
    "incoming": IncomingMessage,
    "connection": ConnectionStatus,
}
_KIND_OF: dict[type, str] = {cls: kind for kind, cls in _KINDS.items()}


def encode(event: Event) -> str:
    """One journal line for ``event`` (a status, a reply or a connection state)."""
    kind = _KIND_OF.get(type(event))
    if kind is None:
        raise TypeError(f"not a journalled event: {type(event).__name__}")
    fields: dict[str, Any] = asdict(event)
    if isinstance(fields.get("at"), datetime):
        fields["at"] = fields["at"].isoformat()
    return json.dumps({"kind": kind, **fields}, ensure_ascii=True, separators=(",", ":"))


def decode(line: str) -> Event:
    """The event a journal line holds (:func:`encode`'s inverse)."""
    fields: dict[str, Any] = json.loads(line)
    cls = _KINDS[fields.pop("kind")]
    if fields.get("at") is not None:
        fields["at"] = datetime.fromisoformat(fields["at"])
    if cls is MessageStatus:
        fields["status"] = DeliveryStatus(fields["status"])
    return cls(**fields)


class JournalSettings(Protocol):
    """What the journal's place depends on (``gatecast.settings.Settings`` has it)."""

    @property
    def journal_dir(self) -> str | None:
        """``GATECAST_JOURNAL_DIR``: the journal's folder, when set."""
        ...


class EventJournal:
    """Events in a :class:`storage.journal.Journal` file (see the module docstring)."""

    @classmethod
    def for_settings(cls, settings: JournalSettings, engine: Engine) -> EventJournal | None:
        """The journal at :func:`journal_path`, or None where there is none."""
        path = journal_path(settings, engine)
        return cls(path) if path is not None else None

    def __init__(self, path: str | Path) -> None:
        self.file = Journal(path)

    def append(self, events: list[Event]) -> None:
        """Append ``events``; durable (fsynced) on return."""
        self.file.append([encode(e) for e in events])

    def read(self) -> list[Event]:
        """The journalled events, oldest first."""
        return [decode(line) for line in self.file.read()]

    def entries(self) -> list[tuple[str, Event]]:
        """The journalled lines with their events, oldest first (for :meth:`drop`)."""
        return [(line, decode(line)) for line in self.file.read()]

    def drop(self, lines: list[str]) -> None:
        """Forget ``lines`` (from :meth:`entries`), the oldest ones, once stored."""
        self.file.truncate(lines)

    def clear(self) -> None:
        """Empty the file."""
        self.file.truncate()

    def __bool__(self) -> bool:
        """True while the journal holds events not yet drained."""
        return bool(self.file)


def journal_path(settings: JournalSettings, engine: Engine) -> Path | None:
    """Where the journal file goes: the setting, else next to a SQLite file, else here.

    None for an in-memory SQLite database (nothing outlives the process anyway).
    """
    folder = journal_folder(engine, settings.journal_dir)
    return folder / JOURNAL_FILE if folder is not None else None


__all__ = ["JOURNAL_FILE", "EventJournal", "JournalSettings", "decode", "encode", "journal_path"]
