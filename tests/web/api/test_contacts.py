"""Imports, lists and contacts over HTTP: upload, background import, rejects, search, opt-out."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import Engine

from tests.web.conftest import LiveApp

SAMPLES = Path(__file__).resolve().parents[3] / "samples"


def wait_import(api: httpx.Client, import_id: int) -> dict[str, Any]:
    """Poll an import until it is no longer running."""
    deadline = time.monotonic() + 60
    while True:
        job = api.get(f"/api/v1/imports/{import_id}").json()
        if job["status"] != "running":
            return dict(job)
        assert time.monotonic() < deadline, job
        time.sleep(0.05)


def upload(api: httpx.Client, path: Path, **form: str) -> httpx.Response:
    with path.open("rb") as fh:
        return api.post(
            "/api/v1/imports",
            files={"file": (path.name, fh)},
            data={"list_name": "customers", **form},
        )


def test_import_xlsx_in_background_with_rejects(live: LiveApp) -> None:
    with live.client() as api:
        res = upload(api, SAMPLES / "contacts.xlsx")
        assert res.status_code == 202, res.text
        started = res.json()
        assert started["filename"] == "contacts.xlsx"
        job = wait_import(api, started["id"])
        assert job["status"] == "completed", job
        assert job["phone_column"] == "Phone"
        assert job["imported"] > 0
        assert job["invalid"] == job["rejects_total"] > 0
        reject = job["rejects"][0]
        assert reject["row_number"] >= 2 and reject["reason"]
        assert "Name" in reject["raw"]
        page = api.get(f"/api/v1/imports/{started['id']}/rejects", params={"limit": 1}).json()
        assert page["total"] == job["rejects_total"] and len(page["items"]) == 1

        lists = api.get("/api/v1/lists").json()["items"]
        assert [(lst["name"], lst["members"]) for lst in lists] == [("customers", job["imported"])]
        list_id = lists[0]["id"]
        assert api.get(f"/api/v1/lists/{list_id}").json()["name"] == "customers"
        members = api.get(f"/api/v1/lists/{list_id}/contacts", params={"limit": 2}).json()
        assert members["total"] == job["imported"] and len(members["items"]) == 2

        found = api.get("/api/v1/contacts", params={"q": "olivia"}).json()
        assert found["total"] == 1
        olivia = found["items"][0]
        assert olivia["phone"] == "+12025550143"
        assert api.get("/api/v1/contacts", params={"q": "+1202555"}).json()["total"] >= 1

        res = api.post(f"/api/v1/contacts/{olivia['id']}/opt-out", json={"reason": "asked"})
        assert res.status_code == 200
        assert res.json()["opted_out"] is True and res.json()["opt_out_reason"] == "asked"
        assert api.get("/api/v1/contacts", params={"opted_out": True}).json()["total"] == 1
        assert api.get(f"/api/v1/lists/{list_id}").json()["opted_out"] == 1
        res = api.post(f"/api/v1/contacts/{olivia['id']}/opt-in")
        assert res.json()["opted_out"] is False

        listed = api.get("/api/v1/imports").json()
        assert [i["id"] for i in listed] == [started["id"]]


def test_preview_shows_the_detected_mapping_and_writes_nothing(live_sqlite: LiveApp) -> None:
    with live_sqlite.client() as api, (SAMPLES / "contacts.csv").open("rb") as fh:
        res = api.post("/api/v1/imports/preview", files={"file": ("contacts.csv", fh)})
        assert res.status_code == 200, res.text
        preview = res.json()
        assert preview["phone_column"] == "Phone"
        assert preview["name_column"] == "Name"
        assert len(preview["rows"]) == 5
        assert preview["phones"][0]["e164"] == "+12025550143"
        assert api.get("/api/v1/lists").json()["items"] == []
        assert api.get("/api/v1/imports").json() == []


def test_named_column_that_does_not_exist_is_refused_before_the_import(
    live_sqlite: LiveApp,
) -> None:
    with live_sqlite.client() as api:
        res = upload(api, SAMPLES / "contacts.csv", phone_column="Mobile")
        assert res.status_code == 422, res.text
        assert res.json()["errors"][0]["loc"] == ["body", "file"]
        assert "contacts.csv" in res.json()["detail"] and "Mobile" in res.json()["detail"]
        assert api.get("/api/v1/imports").json() == []
        assert api.get("/api/v1/contacts").json()["total"] == 0


def test_oversized_upload_is_413_and_nothing_starts(
    make_live: Callable[..., LiveApp], sqlite_engine: Engine, tmp_path: Path
) -> None:
    live = make_live(sqlite_engine, settings_overrides={"import_max_bytes": 1000})
    big = tmp_path / "big.csv"
    big.write_text("Name,Phone\n" + "Someone,2025550143\n" * 200)
    with live.client() as api:
        res = upload(api, big)
        assert res.status_code == 413
        assert "1000" in res.json()["detail"]
        with big.open("rb") as fh:
            res = api.post("/api/v1/imports/preview", files={"file": ("big.csv", fh)})
        assert res.status_code == 413
        assert api.get("/api/v1/imports").json() == []


def test_import_bad_bodies_are_422_with_field_paths(live_sqlite: LiveApp) -> None:
    with live_sqlite.client() as api:
        res = api.post("/api/v1/imports", data={"list_name": "x"})
        assert res.status_code == 422
        assert res.json()["errors"][0]["loc"] == ["body", "file"]
        with (SAMPLES / "contacts.csv").open("rb") as fh:
            res = api.post(
                "/api/v1/imports", files={"file": ("c.csv", fh)}, data={"list_name": "   "}
            )
        assert res.status_code == 422
        assert res.json()["errors"][0]["loc"] == ["body", "list_name"]
        # a file with no phone column previews, saying what is wrong
        res = api.post("/api/v1/imports/preview", files={"file": ("n.csv", b"a,b\n1,2\n")})
        assert res.status_code == 200
        assert res.json()["problem"]
        # a file that cannot be read at all is a 422 on the file field
        res = api.post(
            "/api/v1/imports/preview", files={"file": ("broken.xlsx", b"\x00\x01\x02garbage")}
        )
        assert res.status_code == 422
        assert res.json()["errors"][0]["loc"] == ["body", "file"]
        res = api.post("/api/v1/lists", json={"name": ""})
        assert res.status_code == 422
        assert res.json()["errors"][0]["loc"] == ["body", "name"]
        res = api.get("/api/v1/contacts", params={"limit": 0})
        assert res.status_code == 422
        assert res.json()["errors"][0]["loc"] == ["query", "limit"]


def test_unknown_ids_are_404(live_sqlite: LiveApp) -> None:
    with live_sqlite.client() as api:
        for path in (
            "/api/v1/imports/999",
            "/api/v1/imports/999/rejects",
            "/api/v1/lists/999",
            "/api/v1/lists/999/contacts",
            "/api/v1/contacts/999",
        ):
            assert api.get(path).status_code == 404, path
        assert api.post("/api/v1/contacts/999/opt-out").status_code == 404
        assert api.post("/api/v1/contacts/999/opt-in").status_code == 404


def test_create_list(live_sqlite: LiveApp) -> None:
    with live_sqlite.client() as api:
        res = api.post("/api/v1/lists", json={"name": "vip"})
        assert res.status_code == 201
        assert res.json()["members"] == 0
        again = api.post("/api/v1/lists", json={"name": "vip"}).json()
        assert again["id"] == res.json()["id"]


def test_chunked_oversized_upload_is_cut_off_with_413(
    make_live: Callable[..., LiveApp], sqlite_engine: Engine
) -> None:
    """No Content-Length to check up front: the body limit stops the stream itself."""
    live = make_live(sqlite_engine, settings_overrides={"import_max_bytes": 1000})
    boundary = "gcboundary"

    def body() -> Iterator[bytes]:
        yield (
            f'--{boundary}\r\nContent-Disposition: form-data; name="list_name"\r\n\r\n'
            f'customers\r\n--{boundary}\r\nContent-Disposition: form-data; name="file"; '
            'filename="big.csv"\r\nContent-Type: text/csv\r\n\r\nName,Phone\r\n'
        ).encode()
        for _ in range(20_000):  # ~400 kB, far past the limit and its slack
            yield b"Someone,2025550143\r\n"
        yield f"\r\n--{boundary}--\r\n".encode()

    with live.client() as api:
        res = api.post(
            "/api/v1/imports",
            content=body(),
            headers={"content-type": f"multipart/form-data; boundary={boundary}"},
        )
        assert res.status_code == 413
        assert api.get("/api/v1/imports").json() == []
        # a route that takes no upload has the smaller JSON limit (GATECAST_REQUEST_MAX_BYTES)
        res = api.post("/api/v1/campaigns", json={"name": "x" * (1024 * 1024)})
        assert res.status_code == 413
        assert "GATECAST_REQUEST_MAX_BYTES" in res.json()["detail"]


def test_an_upload_its_first_rows_show_unusable_is_refused_before_a_job_starts(
    live_sqlite: LiveApp,
) -> None:
    unusable = {
        "empty.csv": (b"", "the file is empty"),
        "blank.csv": (b"\n\n\n", "the file is empty"),
        "broken.xlsx": (b"\x00\x01\x02garbage", "not a valid .xlsx file"),
        "binary.csv": (bytes(range(256)) * 20, "not a CSV file"),
        "names.csv": (b"name,city\nAnn,Rome\n", "no phone column found"),
    }
    with live_sqlite.client() as api:
        for name, (content, problem) in unusable.items():
            res = api.post(
                "/api/v1/imports", files={"file": (name, content)}, data={"list_name": "x"}
            )
            assert res.status_code == 422, (name, res.text)
            body = res.json()
            assert body["errors"][0]["loc"] == ["body", "file"], body
            assert name in body["detail"] and problem in body["detail"], body
            assert "gatecast-upload" not in res.text, body  # no server path
        res = api.post(
            "/api/v1/imports",
            files={"file": ("c.csv", b"name,phone\nAnn,+4915112345678\n")},
            data={"list_name": "x", "region": "XX"},
        )
        assert res.status_code == 422, res.text
        assert res.json()["errors"][0]["loc"] == ["body", "region"], res.text
        assert api.get("/api/v1/imports").json() == []
        assert api.get("/api/v1/lists").json()["items"] == []
