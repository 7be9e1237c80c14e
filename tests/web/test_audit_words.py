"""The Audit page's sentences (``gatecast.web.dashboard.audit_words``): each kind of
entry said as a person would, never as its route."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from campaigns.audit import Entry
from gatecast.web.dashboard.audit_words import sentence, target_names


def _entry(action: str, outcome: str = "ok", status: int | None = 200, **more: object) -> Entry:
    values: dict[str, object] = {
        "id": 1,
        "at": datetime(2030, 1, 1, tzinfo=UTC),
        "actor": "olga",
        "role": "admin",
        "action": action,
        "target_type": None,
        "target_id": None,
        "source": "127.0.0.1",
        "outcome": outcome,
        "status": status,
        "detail": {},
        **more,
    }
    return Entry(**values)  # type: ignore[arg-type]


NAMES = {("campaign", "7"): "November promo", ("list", "4"): "customers"}


@pytest.mark.parametrize(
    ("entry", "said"),
    [
        (
            _entry(
                "POST /api/v1/campaigns/{campaign_id}/pause", target_type="campaign", target_id="7"
            ),
            "olga paused campaign 'November promo'",
        ),
        (
            _entry("POST /api/v1/campaigns", status=201, target_type="campaign", target_id="7"),
            "olga created campaign 'November promo'",
        ),
        (
            _entry(
                "DELETE /api/v1/lists/{list_id}",
                outcome="refused",
                status=409,
                target_type="list",
                target_id="4",
            ),
            "olga tried to delete list 'customers': refused "
            "(not possible in its current state, 409)",
        ),
        (
            _entry("PATCH /api/v1/users/{name}", target_type="user", target_id="vic"),
            "olga changed user 'vic'",
        ),
        (
            _entry("replay POST /api/v1/users", status=201, target_type="user", target_id="3"),
            "olga added user 3 (a repeated request: answered from the first, done once)",
        ),
        (_entry("export GET /api/v1/contacts/export"), "olga exported the contacts"),
        (
            _entry("PUT /api/v1/settings", target_type="setting"),
            "olga changed the deployment settings",
        ),
        (_entry("POST /api/v1/contacts/bulk/add-to-list"), "olga added contacts to a list"),
        (
            _entry("POST /api/v1/contacts/bulk/erase", outcome="refused", status=403),
            "olga tried to erase contacts: refused (not allowed for this role, 403)",
        ),
        (_entry("sign-in"), "olga signed in"),
        (_entry("sign-in", outcome="refused", status=401), "a sign-in as 'olga' was refused"),
        (
            _entry("campaign pause", status=0, target_type="campaign", target_id="7"),
            "olga ran 'gatecast campaign pause' (campaign 'November promo')",
        ),
    ],
)
def test_an_entry_in_words(entry: Entry, said: str) -> None:
    assert sentence(entry, NAMES) == said


def test_targets_are_named_by_one_lookup_per_table() -> None:
    asked: list[tuple[str, list[int]]] = []

    def lookup(table: str, ids: list[int]) -> dict[int, str]:
        asked.append((table, ids))
        return {i: f"{table} {i}" for i in ids}

    entries = [
        _entry("POST /api/v1/campaigns/{campaign_id}/pause", target_type="campaign", target_id="7"),
        _entry(
            "POST /api/v1/campaigns/{campaign_id}/resume", target_type="campaign", target_id="2"
        ),
        _entry("PATCH /api/v1/users/{name}", target_type="user", target_id="vic"),
    ]
    assert target_names(entries, lookup) == {
        ("campaign", "7"): "campaigns 7",
        ("campaign", "2"): "campaigns 2",
    }
    assert asked == [("campaigns", [2, 7])]
