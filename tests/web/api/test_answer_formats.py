"""One datetime format in every API answer: UTC written with ``Z``, never ``+00:00``, on
SQLite and PostgreSQL. Every GET of the OpenAPI document whose path needs
no id or only the ids made here is read after a few things were created."""

from __future__ import annotations

import re

from tests.web.conftest import LiveApp

#: a JSON string that starts like an ISO 8601 date and time
DATETIME = re.compile(r'"(\d{4}-\d{2}-\d{2}T[^"]*)"')
#: an offset instead of ``Z`` (a time without a zone is a wall time the user wrote, in
#: the timezone given beside it: a campaign file's ``schedule.start``)
OFFSET = re.compile(r"[+-]\d{2}:?\d{2}$")
IDS = {"{campaign_id}": "1", "{endpoint_id}": "1", "{contact_id}": "1", "{list_id}": "1"}


def _offset(value: str) -> bool:
    return OFFSET.search(value) is not None


def test_every_datetime_is_utc_with_z(live: LiveApp) -> None:
    with live.client() as api:
        made = [
            api.post("/api/v1/contacts", json={"phone": "+12025550143", "list_name": "people"}),
            api.post(
                "/api/v1/campaigns",
                json={
                    "name": "later",
                    "list": "people",
                    "message": {"type": "text", "text": "Hi"},
                    "schedule": {"start": "2031-01-01T09:00", "timezone": "Europe/Berlin"},
                },
            ),
            api.post(
                "/api/v1/webhook-endpoints", json={"url": "https://x.example/", "events": ["*"]}
            ),
            api.post("/api/v1/webhook-endpoints/1/rotate-secret"),
            api.post("/api/v1/campaigns/1/pause"),
        ]
        assert all(r.status_code < 300 for r in made), [r.text for r in made]
        read = 0
        bad: list[tuple[str, str]] = []
        for answer in made:
            bad += [(str(answer.url), v) for v in DATETIME.findall(answer.text)]
        bad = [b for b in bad if _offset(b[1])]
        for path, item in api.get("/openapi.json").json()["paths"].items():
            for key, value in IDS.items():
                path = path.replace(key, value)
            if "get" not in item or "{" in path or not path.startswith("/api/v1/"):
                continue
            res = api.get(path)
            if res.headers.get("content-type", "").startswith("application/json"):
                read += 1
                bad += [(path, v) for v in DATETIME.findall(res.text) if _offset(v)]
        assert read > 20
        assert not bad, bad
