"""An operator sends a picture they have as a file, not a URL (issue 31, item 1).

Over the HTTP API of ``gatecast serve``: upload the file, create a media campaign with
the URL gatecast gave, run it against the sandbox gateway, and check what the gateway
got: the URL, which, fetched as the gateway fetches it (no credential), gives back the
very bytes uploaded. The sandbox does not fetch media itself, so the journey does what
the gateway would. Through the CLI: a file of a type WhatsApp does not take and a file
past its kind's limit are refused in words, and a link signed for a day that is over
is refused by the server.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import httpx

from storage.types import utcnow
from tests.journeys.harness import (
    Process,
    Server,
    Workspace,
    assert_problem,
    import_over_api,
    link_sender_over_api,
    ok,
    wait_for,
)
from tests.media_files import pdf, png

PEOPLE = [("Ada Lovelace", "+12025550101"), ("Alan Turing", "+12025550102")]


def _received(sandbox: Process, to: str) -> list[dict[str, Any]]:
    answer = httpx.get(f"{sandbox.url}/sandbox/messages", params={"to": to}, timeout=10)
    answer.raise_for_status()
    body = answer.json()
    return list(body["items"] if isinstance(body, dict) else body)


def test_an_uploaded_picture_reaches_every_recipient(
    ws: Workspace, sandbox_process: Process
) -> None:
    server: Server = ws.serve()
    api = server.api()
    link_sender_over_api(api)
    people = ws.path / "people.csv"
    people.write_text("Name,Phone\n" + "".join(f"{n},{p}\n" for n, p in PEOPLE), encoding="utf-8")
    assert import_over_api(api, people, "people")["imported"] == len(PEOPLE)

    picture = png(64, 48)
    uploaded = ok(
        api.post("/api/v1/media", files={"file": ("Winter sale.png", picture, "image/png")}),
        201,
    )
    assert (uploaded["kind"], uploaded["name"]) == ("image", "Winter_sale.png")
    body = {
        "name": "Winter sale",
        "list": "people",
        "message": {
            "type": "media",
            "media_url": uploaded["url"],
            "filename": uploaded["name"],
            "caption": "Our winter sale, {{ name }}!",
        },
        "pace": {"per_minute": 600, "delay_seconds": [0, 0]},
    }
    cid = ok(api.post("/api/v1/campaigns", json=body), 201)["id"]
    final = wait_for(
        lambda: (p := ok(api.get(f"/api/v1/campaigns/{cid}/progress")))["done"] and p,
        timeout=120,
        what="the campaign to finish",
    )
    counts = final["counts"]
    assert sum(counts.get(s, 0) for s in ("sent", "delivered", "read")) == len(PEOPLE), final

    for name, phone in PEOPLE:
        got = _received(sandbox_process, phone.lstrip("+"))
        assert got, f"the gateway received nothing for {phone}"
        payload = got[-1]["payload"]
        assert payload["media_url"] == uploaded["url"], payload
        assert name.split()[0] in payload["message"], payload
        # what the gateway does with it: fetch it, with no credential of gatecast's
        fetched = httpx.get(payload["media_url"], timeout=10)
        assert fetched.status_code == 200
        assert fetched.headers["content-type"] == "image/png"
        assert fetched.content == picture

    # the operator's CLI lists it, and a file WhatsApp does not take is refused in words
    listed = ws.run("media", "list", "--json").json()
    assert [m["name"] for m in listed["items"]] == ["Winter_sale.png"]
    notes = ws.path / "notes.png"
    notes.write_text("a shopping list, not a picture\n", encoding="utf-8")
    refused = ws.run("media", "upload", str(notes), ok=False)
    assert refused.code == 1
    assert "notes.png: this type of file cannot be sent as media" in refused.output
    poster = ws.path / "poster.png"
    poster.write_bytes(png(padding=6 * 1024 * 1024))
    refused = ws.run("media", "upload", str(poster), ok=False)
    assert refused.code == 1
    assert "poster.png is 6 MiB: a PNG image may be at most 5 MiB" in refused.output
    assert len(ws.run("media", "list", "--json").json()["items"]) == 1

    # a PDF uploaded from the CLI gets a link under the running server's address
    brochure = ws.path / "brochure.pdf"
    brochure.write_bytes(pdf())
    stored = ws.run("media", "upload", str(brochure), "--json").json()
    assert stored["kind"] == "document" and stored["url"].startswith(server.url)
    assert httpx.get(stored["url"], timeout=10).content == pdf()
    # a link signed for one day, three days ago (the CLI's clock set back): over now
    three_days_ago = (utcnow() - timedelta(days=3)).isoformat()
    old = ws.run(
        "media",
        "url",
        str(stored["id"]),
        "--days",
        "1",
        "--json",
        GATECAST_CLOCK_START=three_days_ago,
    ).json()
    assert_problem(httpx.get(old["url"], timeout=10), 403, "link_expired")
    tampered = old["url"].replace("signature=", "signature=x")
    assert httpx.get(tampered, timeout=10).status_code == 404
