"""Imports over HTTP (issue 31, item 4): a file of UK local numbers previewed with the
default region US gets a region hint, imports with GB, its columns mapped to attributes
(one renamed, one left out), ``NA`` read as no name, the attributes rendered in a
message, and the rejected rows downloaded as CSV with their reasons."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import httpx

from tests.web.api.test_contacts import upload, wait_import
from tests.web.conftest import LiveApp

UK_CSV = (
    "Name,Phone,City,Notes\n"
    "Olga Brown,07911 123456,Leeds,call after 5\n"
    "NA,07911 123457,York,-\n"
    "Sam Green,07911 12345,Bath,short number\n"
    "Ian Gray,07400 123458,N/A,\n"
    "Lee Park,call me,Hull,no number\n"
)


def _preview(api: httpx.Client, path: Path, **form: str) -> dict[str, Any]:
    res = api.post(
        "/api/v1/imports/preview", files={"file": (path.name, path.read_bytes())}, data=form
    )
    assert res.status_code == 200, res.text
    return dict(res.json())


def test_uk_file_hint_mapping_and_rejected_rows_csv(live: LiveApp, tmp_path: Path) -> None:
    path = tmp_path / "uk customers.csv"
    path.write_text(UK_CSV, encoding="utf-8")
    with live.client() as api:
        first = _preview(api, path)  # the default region: US
        assert first["region"] == "US"
        assert first["phones"][0] == {"e164": None, "reason": "too long"}
        hint = first["region_hint"]
        assert (hint["region"], hint["calling_code"]) == ("GB", 44), hint
        assert hint["message"] == (
            "Most numbers look like United Kingdom (+44) local numbers: use GB?"
        )
        assert first["attribute_keys"] == {"City": "city", "Notes": "notes"}

        mapping = json.dumps({"City": "town", "Notes": None})
        again = _preview(api, path, region="gb", attributes=mapping)
        assert again["region"] == "GB" and again["region_hint"] is None
        assert [p["e164"] for p in again["phones"][:2]] == ["+447911123456", "+447911123457"]
        assert again["attribute_keys"] == {"City": "town"}

        res = upload(api, path, region="GB", attributes=mapping)
        assert res.status_code == 202, res.text
        job = wait_import(api, res.json()["id"])
        assert job["status"] == "completed", job
        assert (job["imported"], job["invalid"]) == (3, 2), job
        page = api.get(f"/api/v1/lists/{job['list_id']}/contacts").json()
        stored = {c["phone"]: (c["name"], c["attributes"]) for c in page["items"]}
        assert stored == {
            "+447911123456": ("Olga Brown", {"town": "Leeds"}),
            "+447911123457": ("", {"town": "York"}),  # "NA": no name
            "+447400123458": ("Ian Gray", {}),  # "N/A": no town
        }

        message = {"type": "text", "text": "Hi {{ name }} in {{ town }}"}
        check = api.post(
            "/api/v1/campaigns/preview",
            json={"name": "Town", "list": "customers", "message": message},
        )
        assert check.status_code == 200, check.text
        texts = {p["content"]["text"] for p in check.json()["preview"]}
        assert "Hi Olga Brown in Leeds" in texts, texts

        res = api.get(f"/api/v1/imports/{job['id']}/rejects.csv")
        assert res.status_code == 200, res.text
        assert res.headers["content-type"].startswith("text/csv")
        assert "uk_customers-rejected-rows.csv" in res.headers["content-disposition"]
        rows = list(csv.DictReader(io.StringIO(res.text)))
        assert [(r["row_number"], r["column"], r["reason"]) for r in rows] == [
            ("4", "Phone", "invalid for its region"),
            ("6", "Phone", "contains letters"),
        ]
        assert (rows[0]["Name"], rows[0]["Phone"], rows[0]["Notes"]) == (
            "Sam Green",
            "07911 12345",
            "short number",
        )
        assert api.get("/api/v1/imports/999999/rejects.csv").status_code == 404


def test_mapping_mistakes_are_named_on_their_field(live: LiveApp, tmp_path: Path) -> None:
    path = tmp_path / "uk.csv"
    path.write_text(UK_CSV, encoding="utf-8")
    with live.client() as api:
        for attributes, words in [
            ("city=town", "JSON object"),
            (json.dumps({"Phone": "mobile"}), "is the phone or name column"),
            (json.dumps({"City": "place", "Notes": "Place"}), "both mapped"),
            (json.dumps({"Country": "country"}), "no column named 'Country'"),
        ]:
            res = upload(api, path, region="GB", attributes=attributes)
            assert res.status_code == 422, res.text
            errors = res.json()["errors"]
            assert errors[0]["loc"][-1] == "attributes", errors
            assert words in errors[0]["msg"], errors
