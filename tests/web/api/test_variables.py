"""``GET /campaigns/variables`` over HTTP (SQLite and PostgreSQL): what the composer's
"Insert a variable" menu offers for an audience: name and phone, the attributes its
contacts have (a list's, a saved segment's as it selects now, every contact's) with how
many have them, a group's one variable, and an unknown list or segment named."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from campaigns.campaign_file import AudienceSpec
from campaigns.importer import ImportOptions, import_file
from campaigns.segments import create_segment
from tests.journeys.harness import assert_problem, ok
from tests.web.conftest import LiveApp


def _import(engine: Engine, tmp_path: Path, name: str, text: str) -> None:
    path = tmp_path / f"{name}.csv"
    path.write_text(text, encoding="utf-8")
    import_file(engine, path, ImportOptions(list_name=name))


def _menu(got: dict[str, Any]) -> dict[str, tuple[str, int | None]]:
    return {v["name"]: (v["kind"], v["contacts"]) for v in got["variables"]}


def test_the_variables_of_a_list_a_segment_and_groups(
    make_live: Callable[..., LiveApp], engine: Engine, tmp_path: Path
) -> None:
    _import(
        engine,
        tmp_path,
        "shop",
        "name,phone,City,coupon\nAda,+12025550101,Berlin,A1\nBo,+12025550102,Paris,\n",
    )
    _import(engine, tmp_path, "club", "name,phone,plan\nCy,+12025550103,gold\n")
    create_segment(engine, "golden", AudienceSpec(lists=["club"], where={"plan": "gold"}))
    live = make_live(engine)
    with live.client() as api:
        shop = ok(api.get("/api/v1/campaigns/variables", params={"list": "shop"}))
        assert shop["contacts"] == 2
        # built-in first, then the attributes by name (as the import keyed them)
        assert list(_menu(shop)) == ["name", "phone", "city", "coupon"]
        assert _menu(shop)["name"] == ("built-in", None)
        assert _menu(shop)["city"] == ("attribute", 2)
        assert _menu(shop)["coupon"] == ("attribute", 1)  # Bo has no coupon

        golden = ok(api.get("/api/v1/campaigns/variables", params={"segment": "golden"}))
        assert (golden["contacts"], list(_menu(golden))) == (1, ["name", "phone", "plan"])
        both = ok(api.get("/api/v1/campaigns/variables?list=shop&list=club"))
        assert list(_menu(both)) == ["name", "phone", "city", "coupon", "plan"]
        everyone = ok(api.get("/api/v1/campaigns/variables"))
        assert everyone["contacts"] == 3
        groups = ok(api.get("/api/v1/campaigns/variables", params={"groups": 2}))
        assert _menu(groups) == {"group": ("built-in", None)}

        unknown = api.get("/api/v1/campaigns/variables", params={"list": "nope"})
        assert_problem(unknown, 422, "invalid_request")
        assert unknown.json()["errors"][0]["loc"] == ["query", "list"]
        assert "no list called 'nope'" in unknown.json()["errors"][0]["msg"]
        missing = api.get("/api/v1/campaigns/variables", params={"segment": "nope"})
        assert_problem(missing, 422, "invalid_request")
        assert missing.json()["errors"][0] == {
            "loc": ["query", "segment"],
            "msg": "no saved segment 'nope'",
            "type": "value_error",
        }
