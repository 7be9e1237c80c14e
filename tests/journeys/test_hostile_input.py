"""Hostile input through the public faces (issue 13): ids past 64 bits, absurd pace values,
deep nesting, runaway templates, oversized spreadsheets. Each is refused with a clear 4xx
(or exit code) naming the field, quickly, and the server answers normally afterwards: no
500, no traceback, no hang (every request has a timeout).
"""

from __future__ import annotations

import httpx

from tests.journeys.harness import Workspace, assert_problem

INT64_MAX = 2**63 - 1


def _still_answers(api: httpx.Client) -> None:
    """The server is alive and well after the hostile request."""
    res = api.get("/api/v1/campaigns", timeout=10)
    assert res.status_code == 200, res.text


def _names(body: dict[str, object], *loc: str | int) -> None:
    """The problem names the parameter at ``loc`` in its errors and its detail."""
    errors = body.get("errors")
    assert isinstance(errors, list) and [*loc] in [e["loc"] for e in errors], body
    assert str(loc[-1]) in str(body["detail"]), body


def test_ids_and_offsets_past_64_bits_are_refused_naming_the_parameter(ws: Workspace) -> None:
    server = ws.serve()
    too_big = INT64_MAX + 1
    with server.api() as api:
        for method, url, loc in [
            ("GET", f"/api/v1/campaigns/{too_big}", ("path", "campaign_id")),
            ("GET", f"/api/v1/campaigns/{too_big}/progress", ("path", "campaign_id")),
            ("POST", f"/api/v1/campaigns/{too_big}/pause", ("path", "campaign_id")),
            ("POST", f"/api/v1/campaigns/{too_big}/retry", ("path", "campaign_id")),
            ("GET", f"/api/v1/campaigns/{too_big}/summary", ("path", "campaign_id")),
            ("GET", f"/api/v1/campaigns/{too_big}/report.csv", ("path", "campaign_id")),
            ("GET", f"/api/v1/campaigns/{too_big}/deliveries", ("path", "campaign_id")),
            ("GET", f"/api/v1/deliveries?campaign_id={too_big}", ("query", "campaign_id")),
            ("GET", f"/api/v1/contacts/{too_big}", ("path", "contact_id")),
            ("POST", f"/api/v1/contacts/{too_big}/opt-in", ("path", "contact_id")),
            ("GET", f"/api/v1/contacts?list_id={too_big}", ("query", "list_id")),
            ("GET", f"/api/v1/lists/{too_big}", ("path", "list_id")),
            ("GET", f"/api/v1/lists/{too_big}/contacts", ("path", "list_id")),
            ("GET", f"/api/v1/imports/{too_big}", ("path", "import_id")),
            ("GET", f"/api/v1/imports/{too_big}/rejects", ("path", "import_id")),
            ("GET", "/api/v1/imports/-1", ("path", "import_id")),
            ("GET", "/api/v1/contacts?offset=-1", ("query", "offset")),
            ("GET", f"/api/v1/contacts?offset={too_big}", ("query", "offset")),
            ("GET", f"/api/v1/deliveries?offset={10**30}", ("query", "offset")),
            ("GET", "/api/v1/lists/1/contacts?offset=-5", ("query", "offset")),
        ]:
            res = api.request(method, url, timeout=10)
            _names(assert_problem(res, 422, "invalid_request"), *loc)
        # the largest 64-bit id is a valid id that is not there
        assert_problem(api.get(f"/api/v1/campaigns/{INT64_MAX}"), 404, "not_found")
        assert api.get(f"/api/v1/contacts?offset={INT64_MAX}").json()["items"] == []
        _still_answers(api)
