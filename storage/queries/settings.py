"""SQL for the deployment settings (``settings``: one row per name, its value as JSON).

What the names and values mean is the caller's (``campaigns.deployment_defaults``).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Engine, delete, insert, select

from storage import tables

_s = tables.settings


def read_settings(conn_or_engine: Connection | Engine) -> dict[str, Any]:
    """Every stored setting: ``{name: value}`` (empty when none was ever saved)."""
    query = select(_s.c.name, _s.c.value)
    if isinstance(conn_or_engine, Engine):
        with conn_or_engine.connect() as conn:
            rows = conn.execute(query).all()
    else:
        rows = conn_or_engine.execute(query).all()
    return {name: value for name, value in rows}


def write_settings(
    engine: Engine, values: Mapping[str, Any], *, now: datetime, by: str | None
) -> None:
    """Store ``values`` in one transaction: a name whose value is None is removed (its
    built-in default applies again), any other is replaced."""
    with engine.begin() as conn:
        conn.execute(delete(_s).where(_s.c.name.in_(list(values))))
        rows = [
            {"name": name, "value": value, "updated_at": now, "updated_by": by}
            for name, value in values.items()
            if value is not None
        ]
        if rows:
            conn.execute(insert(_s), rows)
