"""Errors as problem details, HTML error pages, web terms, and Idempotency-Key over HTTP."""

from __future__ import annotations

import httpx
import pytest
from fastapi import FastAPI

from gatecast.web.problems import install_problem_handlers, web_terms
from tests.web.conftest import LiveApp, serve

PROBLEM = "application/problem+json"


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (
            "/tmp/gatecast-upload-x1/shop.csv: no phone column found among the headers: a, b; "
            "name it with --phone-column",
            "shop.csv: no phone column found among the headers: a, b; "
            "choose it in the phone_column field",
        ),
        ("/home/ann/data/c.csv: the file is empty", "c.csv: the file is empty"),
        ("use --region or --list", "use the region field or the list_name field"),
        ("schema is old: run `gatecast db upgrade`", "schema is old"),
        ("see https://gw.example/api/x", "see https://gw.example/api/x"),
        ("1/2/2026 and a-b/c", "1/2/2026 and a-b/c"),
    ],
)
def test_web_terms(text: str, said: str) -> None:
    assert web_terms(text) == said


def test_api_errors_share_one_shape(live_sqlite: LiveApp) -> None:
    with live_sqlite.client() as api:
        for res, status, code in [
            (api.get("/api/v1/campaigns/5"), 404, "not_found"),
            (api.get("/api/v1/nowhere"), 404, "not_found"),
            (api.put("/api/v1/lists"), 405, "method_not_allowed"),
            (api.post("/api/v1/lists", json={"name": 5}), 422, "invalid_request"),
            (api.get("/api/v1/contacts", params={"offset": 10**20}), 422, "invalid_request"),
            (api.get(f"/api/v1/campaigns/{2**63}"), 422, "invalid_request"),
        ]:
            assert res.status_code == status, res.text
            assert res.headers["content-type"].startswith(PROBLEM)
            body = res.json()
            assert body["status"] == status and body["code"] == code
            assert body["type"] == f"tag:gatecast,2026:problem/{code}"
            assert isinstance(body["detail"], str) and body["title"]
            assert "Traceback" not in res.text and "OverflowError" not in res.text
        too_far = api.get("/api/v1/contacts", params={"offset": 10**20}).json()
        assert too_far["errors"][0]["loc"] == ["query", "offset"], too_far
    with live_sqlite.client(key=None) as anon:
        res = anon.get("/api/v1/campaigns")
        assert res.status_code == 401 and res.json()["code"] == "unauthorized"
        assert res.headers["www-authenticate"] == "Bearer"


def test_an_unexpected_error_is_a_500_problem_with_a_reference() -> None:
    app = FastAPI()
    install_problem_handlers(app)

    @app.get("/api/v1/crash")
    def crash() -> None:
        raise OverflowError("Python int too large to convert to SQLite INTEGER")

    url, stop = serve(app)
    try:
        with httpx.Client(base_url=url) as api:
            res = api.get("/api/v1/crash")
            assert res.status_code == 500 and res.headers["content-type"].startswith(PROBLEM)
            body = res.json()
            assert body["code"] == "internal_error" and body["reference"] in body["detail"]
            assert "Traceback" not in res.text and "OverflowError" not in res.text
            assert api.get("/api/v1/crash").status_code == 500  # the server still answers
    finally:
        stop()


def test_dashboard_errors_are_html_pages(live_sqlite: LiveApp) -> None:
    with httpx.Client(base_url=live_sqlite.url, headers={"Accept": "text/html"}) as browser:
        res = browser.get("/no-such-page")
        assert res.status_code == 404
        assert res.headers["content-type"].startswith("text/html")
        assert "Not found" in res.text and "Traceback" not in res.text


def test_idempotency_key_replays_and_refuses(live_sqlite: LiveApp) -> None:
    with live_sqlite.client() as api:
        key = {"Idempotency-Key": "list-1"}
        first = api.post("/api/v1/lists", json={"name": "vip"}, headers=key)
        again = api.post("/api/v1/lists", json={"name": "vip"}, headers=key)
        assert first.status_code == again.status_code == 201
        assert first.content == again.content
        assert again.headers["idempotent-replayed"] == "true"
        other = api.post("/api/v1/lists", json={"name": "vip2"}, headers=key)
        assert other.status_code == 422 and other.json()["code"] == "idempotency_key_reused"
        assert [x["name"] for x in api.get("/api/v1/lists").json()["items"]] == ["vip"]
        # a failed first attempt keeps nothing: the key can be used again
        key2 = {"Idempotency-Key": "list-2"}
        bad = api.post("/api/v1/lists", json={"name": "  "}, headers=key2)
        assert bad.status_code == 422
        assert api.post("/api/v1/lists", json={"name": "new"}, headers=key2).status_code == 201
        blank = api.post(
            "/api/v1/lists", json={"name": "x"}, headers={"Idempotency-Key": "k" * 300}
        )
        assert blank.status_code == 422 and blank.json()["code"] == "invalid_idempotency_key"
