"""Media uploads over HTTP (SQLite and PostgreSQL): the type found from the content, the
size per kind, the signed URL served without sign-in, links that are not valid
(tampered, expired, another file's) refused without saying anything, and a delete
refused while a campaign that will still send uses the file."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from sqlalchemy import Engine, func, select

from campaigns.importer import ImportOptions, import_file
from storage import tables
from storage.types import utcnow
from tests.journeys.harness import assert_nothing_leaked, assert_problem
from tests.media_files import pdf, png
from tests.web.conftest import LiveApp


@pytest.fixture
def timed(make_live: Callable[..., LiveApp], engine: Engine) -> tuple[LiveApp, list[object]]:
    """The app with a clock the test moves (``now[0]``), its links under its public URL."""
    now = [utcnow()]
    app = make_live(engine, clock=lambda: now[0], settings_overrides={"public_url": "self"})
    return app, now  # type: ignore[return-value]


def _upload(api: httpx.Client, name: str, data: bytes, **fields: str) -> httpx.Response:
    return api.post("/api/v1/media", files={"file": (name, data)}, data=fields)


def _stored(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(tables.media)).scalar_one())


def test_upload_serves_the_same_bytes_at_a_signed_url(timed: tuple[LiveApp, list[object]]) -> None:
    app, _ = timed
    image = png(40, 30)
    with app.client() as api:
        answer = _upload(api, "Spring offer.png", image)
        assert answer.status_code == 201, answer.text
        body = answer.json()
        assert (body["name"], body["kind"], body["content_type"], body["size"]) == (
            "Spring_offer.png",
            "image",
            "image/png",
            len(image),
        )
        assert body["url"].startswith(f"{app.url}/media/{body['id']}/Spring_offer.png?")
        assert body["created_by"] == "owner key"

        # the gateway fetches it with no credential at all
        fetched = httpx.get(body["url"], timeout=10)
        assert fetched.status_code == 200
        assert fetched.content == image
        assert fetched.headers["content-type"] == "image/png"
        assert fetched.headers["x-content-type-options"] == "nosniff"
        head = httpx.head(body["url"], timeout=10)
        assert (head.status_code, head.content) == (200, b"")
        assert head.headers["content-length"] == str(len(image))

        # a fresh link of the same file, and the listing: reads that store nothing
        stored = _stored(app.ctx.engine)
        again = api.get(f"/api/v1/media/{body['id']}", params={"days": 2}).json()
        assert again["url"] != body["url"] and httpx.get(again["url"]).content == image
        listed = api.get("/api/v1/media").json()
        assert [m["id"] for m in listed["items"]] == [body["id"]] and listed["total"] == 1
        assert _stored(app.ctx.engine) == stored


def test_links_that_are_not_valid_say_nothing(timed: tuple[LiveApp, list[object]]) -> None:
    app, now = timed
    with app.client() as api:
        first = _upload(api, "menu.pdf", pdf()).json()
        other = _upload(api, "logo.png", png()).json()
    url = first["url"]
    parts = urlsplit(url)
    query = parse_qs(parts.query)
    base = f"{app.url}{parts.path}"
    signature, expires = query["signature"][0], query["expires"][0]
    nowhere = httpx.get(f"{app.url}/no/such/page", timeout=10)
    wrong = [
        httpx.get(base, params={"expires": expires, "signature": signature[:-2] + "AA"}),
        httpx.get(base, params={"expires": str(int(expires) + 1), "signature": signature}),
        httpx.get(base, params={"expires": expires}),
        httpx.get(f"{app.url}/media/{first['id']}/other.pdf", params=query),
        # another file's valid signature does not open this one
        httpx.get(base, params=parse_qs(urlsplit(other["url"]).query)),
        httpx.get(f"{app.url}/media/999999/menu.pdf", params=query),
    ]
    for answer in wrong:
        assert answer.status_code == 404, answer.text
        assert answer.headers["content-type"] == nowhere.headers["content-type"]
        assert "%PDF" not in answer.text and "menu" not in answer.text
        assert_nothing_leaked(answer.text)
    assert httpx.head(base, params={"expires": expires}).status_code == 404
    assert httpx.get(url).content == pdf()
    now[0] = now[0] + timedelta(days=31)  # type: ignore[operator]
    expired = httpx.get(url, timeout=10)
    assert_problem(expired, 403, "link_expired")
    assert "expired" in expired.json()["detail"] and "%PDF" not in expired.text
    assert httpx.head(url, timeout=10).status_code == 403


@pytest.mark.parametrize(
    ("name", "data", "words"),
    [
        ("notes.png", b"just some words, not a picture\n", "cannot be sent as media"),
        ("photo.jpg", pdf(), "its content is a PDF document, but its name ends in .jpg"),
        ("setup.exe", b"MZ\x90\x00\x03" + bytes(200), "cannot be sent as media"),
        ("page.html", b"<html><script>alert(1)</script></html>", "cannot be sent as media"),
        ("empty.pdf", b"", "empty.pdf is empty"),
    ],
)
def test_a_type_not_taken_is_refused_on_the_file_field(
    live: LiveApp, name: str, data: bytes, words: str
) -> None:
    with live.client() as api:
        answer = _upload(api, name, data)
    problem = assert_problem(answer, 422, "invalid_request")
    assert words in problem["detail"], problem
    assert [e["loc"] for e in problem["errors"]] == [["body", "file"]], problem
    assert _stored(live.ctx.engine) == 0


def test_a_file_past_its_kinds_limit_is_refused(live: LiveApp) -> None:
    big = png(padding=5 * 1024 * 1024)  # WhatsApp takes images up to 5 MiB
    with live.client() as api:
        answer = _upload(api, "poster.png", big)
    problem = assert_problem(answer, 413, "media_too_large")
    words = f"poster.png is {len(big):,} bytes: a PNG image may be at most 5 MiB (5,242,880 bytes)"
    assert words in problem["detail"], problem
    assert problem["limit"] == 5 * 1024 * 1024
    assert _stored(live.ctx.engine) == 0


def test_the_deployments_cap_lowers_every_kind_and_the_body_limit(
    make_live: Callable[..., LiveApp], sqlite_engine: Engine
) -> None:
    app = make_live(sqlite_engine, settings_overrides={"media_max_bytes": 64 * 1024})
    with app.client() as api:
        under_gate = _upload(api, "brochure.pdf", pdf() + b"%" * (100 * 1024))
        problem = assert_problem(under_gate, 413, "media_too_large")
        assert "a PDF document may be at most 64 KiB" in problem["detail"], problem
        # past the largest file allowed (plus the form's slack): refused before it is read
        past_gate = _upload(api, "brochure.pdf", pdf() + b"%" * (1024 * 1024))
        problem = assert_problem(past_gate, 413, "too_large")
        assert "GATECAST_MEDIA_MAX_BYTES" in problem["detail"], problem
        assert _upload(api, "small.pdf", pdf()).status_code == 201
    assert _stored(sqlite_engine) == 1


def _import_people(engine: Engine, tmp_path: Path) -> None:
    people = tmp_path / "people.csv"
    people.write_text("name,phone\nAda,+12025550101\n", encoding="utf-8")
    import_file(engine, people, ImportOptions(list_name="people"))


def test_delete_is_refused_while_a_campaign_will_still_send_it(
    timed: tuple[LiveApp, list[object]], engine: Engine, tmp_path: Path
) -> None:
    app, _ = timed
    _import_people(engine, tmp_path)
    with app.client() as api:
        menu = _upload(api, "menu.pdf", pdf()).json()
        other = _upload(api, "other.pdf", pdf()).json()
        start = (utcnow() + timedelta(days=3)).strftime("%Y-%m-%dT%H:%M:%S")
        spec = {
            "name": "Lunch menu",
            "list": "people",
            "message": {"type": "media", "media_url": menu["url"], "filename": "menu.pdf"},
            "schedule": {"start": start, "timezone": "UTC"},
        }
        cid = api.post("/api/v1/campaigns", json=spec).json()["id"]
        uses = api.get(f"/api/v1/media/{menu['id']}/uses").json()
        assert uses == [
            {"campaign_id": cid, "name": "Lunch menu", "state": "scheduled", "keeps": True}
        ]
        assert api.get(f"/api/v1/media/{other['id']}/uses").json() == []

        # scheduled, then paused: it will still send the file, so the file stays
        for state in ("scheduled", "paused"):
            refused = assert_problem(api.delete(f"/api/v1/media/{menu['id']}"), 409, "media_in_use")
            assert refused["campaigns"] == [cid]
            assert f"'Lunch menu' ({state})" in refused["detail"]
            assert "cancel those campaigns" in refused["detail"]
            assert httpx.get(menu["url"], timeout=10).status_code == 200
            api.post(f"/api/v1/campaigns/{cid}/pause")

        # once it will not send any more, the file can go: its link stops working
        api.post(f"/api/v1/campaigns/{cid}/cancel")
        assert api.get(f"/api/v1/media/{menu['id']}/uses").json()[0]["keeps"] is False
        assert api.delete(f"/api/v1/media/{menu['id']}").status_code == 204
        assert httpx.get(menu["url"], timeout=10).status_code == 404
        assert_problem(api.delete(f"/api/v1/media/{menu['id']}"), 404, "not_found")
        assert_problem(api.get(f"/api/v1/media/{menu['id']}/uses"), 404, "not_found")
        assert api.get("/api/v1/media").json()["total"] == 1
    assert _stored(engine) == 1
