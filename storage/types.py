"""Column types shared by every table: UTC-aware datetimes, JSON, 64-bit keys."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import JSON, BigInteger, DateTime, Integer, Text
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator, TypeEngine

#: 64-bit primary keys on PostgreSQL; SQLite needs INTEGER for its rowid alias.
BigId = BigInteger().with_variant(Integer(), "sqlite")


def _jsonb_on_postgres(dialect: Dialect, elsewhere: TypeEngine[Any]) -> TypeEngine[Any]:
    """JSONB on PostgreSQL, imported when a PostgreSQL statement first needs it (importing
    PostgreSQL's dialect costs a command on SQLite about a seventh of ``import
    sqlalchemy``: decision 44); ``elsewhere`` on SQLite."""
    if dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import JSONB

        return dialect.type_descriptor(JSONB())
    return dialect.type_descriptor(elsewhere)


class JsonbOnPostgres(TypeDecorator[Any]):
    """JSON on SQLite, JSONB on PostgreSQL: what ``JSON().with_variant(JSONB(),
    "postgresql")`` declares, without importing PostgreSQL's dialect to declare it."""

    impl = JSON
    cache_ok = True
    should_evaluate_none = True  # as JSON's: a Python None is stored as JSON ``null``

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        return _jsonb_on_postgres(dialect, self.impl_instance)


class TextOrJsonb(TypeDecorator[Any]):
    """Text on SQLite, JSONB on PostgreSQL (a staging table's JSON, parsed by ``COPY``)."""

    impl = Text
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        return _jsonb_on_postgres(dialect, self.impl_instance)


#: JSON documents: JSONB on PostgreSQL, text-backed JSON elsewhere.
JsonDoc = JsonbOnPostgres()


class UTCDateTime(TypeDecorator[datetime]):
    """Stores aware datetimes as UTC; always returns aware UTC datetimes.

    Naive datetimes are refused on the way in: every time in gatecast is UTC-aware.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if not isinstance(value, datetime):
            raise TypeError(f"expected a datetime, got {type(value).__name__}")
        if value.tzinfo is None:
            raise ValueError("naive datetime refused: pass a timezone-aware (UTC) datetime")
        as_utc: datetime = value.astimezone(UTC)
        if dialect.name == "sqlite":
            return as_utc.replace(tzinfo=None)
        return as_utc

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        assert isinstance(value, datetime)
        stored: datetime = value
        if stored.tzinfo is None:
            return stored.replace(tzinfo=UTC)
        return stored.astimezone(UTC)


#: how far this process's clock is set ahead of (or behind) the system clock
_clock_offset = timedelta(0)


def set_clock_offset(offset: timedelta) -> None:
    """Shift this process's clock (``GATECAST_CLOCK_START``: rehearsals and journey tests)."""
    global _clock_offset
    _clock_offset = offset


def clock_offset() -> timedelta:
    """How far this process's clock is shifted from the system clock (normally zero)."""
    return _clock_offset


def utcnow() -> datetime:
    """The current time, UTC-aware: the process clock (tests inject their own clocks)."""
    return datetime.now(UTC) + _clock_offset
