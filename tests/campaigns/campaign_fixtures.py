"""Helpers for campaign tests: contacts, lists and campaigns written with plain Core."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, insert, select

from campaigns.campaign_file import CampaignSpec, parse_campaign
from storage import tables

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)

contacts = tables.contacts
lists = tables.lists
members = tables.list_members


def phone(i: int) -> str:
    """A distinct E.164 number for index ``i``."""
    return f"+1415{i:07d}"


def make_list(
    engine: Engine,
    name: str,
    people: Sequence[dict[str, Any]],
) -> int:
    """A list with contacts (dicts with phone, name, attributes, opted_out)."""
    with engine.begin() as conn:
        list_id = int(
            conn.execute(
                insert(lists)
                .values(name=name, description="", created_at=NOW)
                .returning(lists.c.id)
            ).scalar_one()
        )
        rows = [
            {
                "phone": p["phone"],
                "raw_phone": p["phone"],
                "name": p.get("name", ""),
                "attributes": p.get("attributes", {}),
                "opted_out": p.get("opted_out", False),
                "created_at": NOW,
                "updated_at": NOW,
            }
            for p in people
        ]
        if rows:
            conn.execute(insert(contacts), rows)
            ids = conn.execute(
                select(contacts.c.id).where(contacts.c.phone.in_([p["phone"] for p in people]))
            ).scalars()
            conn.execute(
                insert(members),
                [{"list_id": list_id, "contact_id": i, "added_at": NOW} for i in ids],
            )
    return list_id


def people(n: int, *, start: int = 0, city: bool = True) -> list[dict[str, Any]]:
    """``n`` contacts named P<i>, with a city attribute unless ``city`` is False."""
    return [
        {"phone": phone(i), "name": f"P{i}", "attributes": {"city": f"C{i}"} if city else {}}
        for i in range(start, start + n)
    ]


def spec(**overrides: Any) -> CampaignSpec:
    """A text campaign to list "customers" (overrides replace top-level keys)."""
    data: dict[str, Any] = {
        "name": "promo",
        "list": "customers",
        "message": {"type": "text", "text": "{Hi|Hello} {{ name }} in {{ city }}"},
    }
    data.update(overrides)
    return parse_campaign(data)


ROOT = Path(__file__).resolve().parents[2]


def kill_when_ready(args: Sequence[str], ready: Path, what: str) -> None:
    """Run ``python -c ARGS`` from the project and SIGKILL it once it wrote ``ready``
    (``what``: the moment it waits for, in a failure's words)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        deadline = time.monotonic() + 60
        while not ready.exists():
            assert proc.poll() is None, "the process ended before it was killed"
            assert time.monotonic() < deadline, f"the process never reached {what}"
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
