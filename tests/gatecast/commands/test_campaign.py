"""``gatecast campaign ...`` and ``gatecast report`` through the real CLI on an SQLite file."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, update
from typer.testing import CliRunner

from campaigns import lifecycle
from campaigns.delivery_rows import materialise
from gatecast.cli import app
from gatecast.settings import get_settings
from storage import tables
from storage.engine import make_engine, upgrade
from storage.types import utcnow
from tests.campaigns.campaign_fixtures import NOW, make_list, people, phone

SAMPLES = Path(__file__).resolve().parents[3] / "samples"
deliveries = tables.deliveries
runner = CliRunner()


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Engine]:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    monkeypatch.setenv("GATECAST_DATABASE_URL", url)
    monkeypatch.chdir(tmp_path)
    get_settings.cache_clear()
    engine = make_engine(url)
    upgrade(engine)
    yield engine
    engine.dispose()
    get_settings.cache_clear()


def _customers(engine: Engine, n: int = 4) -> None:
    crowd = people(n)
    crowd[1]["attributes"] = {}  # no city
    make_list(engine, "customers", crowd)


def test_create_shows_preview_and_unrenderable(db: Engine) -> None:
    _customers(db)
    result = runner.invoke(app, ["campaign", "create", str(SAMPLES / "campaign.toml")])
    assert result.exit_code == 0, result.output
    assert "campaign 1" in result.output and "scheduled" in result.output
    assert "Preview" in result.output and "P0" in result.output
    assert "cannot render" in result.output and phone(1) in result.output
    assert "city" in result.output
    assert "cannot get the message: city is missing for 1 of 4 contacts: P1" in result.output


def test_create_json_and_strict(db: Engine) -> None:
    _customers(db)
    strict = runner.invoke(app, ["campaign", "create", str(SAMPLES / "campaign.toml"), "--strict"])
    assert strict.exit_code == 1
    assert "strict" in strict.output and "Traceback" not in strict.output
    ok = runner.invoke(app, ["campaign", "create", str(SAMPLES / "campaign.toml"), "--json"])
    assert ok.exit_code == 0, ok.output
    data = json.loads(ok.stdout)
    assert data["state"] == "scheduled" and data["unrenderable_count"] == 1
    assert data["preview"][0]["content"]["type"] == "text"


def test_create_refuses_a_campaign_that_sends_nothing(db: Engine) -> None:
    make_list(db, "customers", people(3, city=False))
    campaign = str(SAMPLES / "campaign.toml")
    refused = runner.invoke(app, ["campaign", "create", campaign])
    assert refused.exit_code == 1 and "Traceback" not in refused.output
    assert "nothing would be sent: city is missing for 3 of 3 contacts: P0, P1, P2" in " ".join(
        refused.output.split()
    ), refused.output
    assert "no campaigns yet" in runner.invoke(app, ["campaign", "list"]).output
    made = runner.invoke(app, ["campaign", "create", campaign, "--allow-unrenderable", "--json"])
    assert made.exit_code == 0, made.output
    assert json.loads(made.stdout)["unrenderable_count"] == 3


def test_invalid_file_lists_every_error(db: Engine, tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(
        'name = "x"\nlist = "customers"\n[message]\ntype = "media"\n[pace]\nper_minute = -1\n'
    )
    result = runner.invoke(app, ["campaign", "create", str(bad)])
    assert result.exit_code == 1
    assert "message.media_url" in result.output and "pace.per_minute" in result.output
    assert "Traceback" not in result.output


def test_unknown_list_and_missing_campaign(db: Engine) -> None:
    result = runner.invoke(app, ["campaign", "create", str(SAMPLES / "campaign.toml")])
    assert result.exit_code == 1
    assert "list 'customers' does not exist" in result.output
    for cmd in (["show", "7"], ["pause", "7"], ["resume", "7"], ["cancel", "7"], ["retry", "7"]):
        r = runner.invoke(app, ["campaign", *cmd])
        assert r.exit_code == 1 and "campaign 7 does not exist" in r.output, cmd
    r = runner.invoke(app, ["report", "7", "--output", "x.csv"])
    assert r.exit_code == 1 and "campaign 7 does not exist" in r.output


def test_lifecycle_commands_and_report(db: Engine, tmp_path: Path) -> None:
    _customers(db)
    assert runner.invoke(app, ["campaign", "create", str(SAMPLES / "campaign.toml")]).exit_code == 0
    listed = runner.invoke(app, ["campaign", "list", "--json"])
    assert json.loads(listed.stdout)[0]["state"] == "scheduled"
    named = runner.invoke(
        app, ["campaign", "list", "--json", "--state", "scheduled", "--name", "PROMO"]
    )
    assert [c["id"] for c in json.loads(named.stdout)] == [1]
    assert (
        "no campaign matches"
        in runner.invoke(app, ["campaign", "list", "--state", "paused"]).output
    )
    bogus = runner.invoke(app, ["campaign", "list", "--state", "bogus"])
    assert bogus.exit_code == 1 and "unknown campaign state 'bogus'; one of: draft" in bogus.output
    assert "paused" in runner.invoke(app, ["campaign", "pause", "1"]).output
    again = runner.invoke(app, ["campaign", "pause", "1"])
    assert again.exit_code == 1
    assert "only a running or scheduled campaign can be paused" in again.output
    assert "scheduled again" in runner.invoke(app, ["campaign", "resume", "1"]).output
    with db.begin() as conn:
        lifecycle.transition(conn, 1, lifecycle.RUNNING, now=NOW)
        materialise(conn, 1, now=NOW, instances=["A"])
        conn.execute(
            update(deliveries)
            .where(deliveries.c.target == phone(0))
            .values(state="failed", error="invalid number", attempts=4)
        )
        conn.execute(
            update(deliveries)
            .where(deliveries.c.target == phone(2))
            .values(state="unknown", attempts=1)
        )
    show = runner.invoke(app, ["campaign", "show", "1", "--json"])
    assert json.loads(show.stdout)["counts"]["failed"] == 1
    human = runner.invoke(app, ["campaign", "show", "1"])
    assert "failed" in human.output and "all connected" in human.output
    retry = runner.invoke(app, ["campaign", "retry", "1", "--unknown", "--json"])
    assert json.loads(retry.stdout)["requeued"] == 2
    report = runner.invoke(app, ["report", "1", "--output", str(tmp_path / "out" / "r.xlsx")])
    assert report.exit_code == 0, report.output
    assert (tmp_path / "out" / "r.xlsx").exists() and "delivery rate" in report.output
    cancel = runner.invoke(app, ["campaign", "cancel", "1"])
    assert cancel.exit_code == 0 and "3 queued recipient(s) skipped" in cancel.output
    bad = runner.invoke(app, ["report", "1", "--output", "r.pdf"])
    assert bad.exit_code == 1 and "unsupported report format" in bad.output


@pytest.mark.parametrize(
    ("sample", "kind"),
    [
        ("campaign-interactive.toml", "interactive"),
        ("campaign-list.toml", "list"),
        ("campaign-group.toml", "media"),
    ],
)
def test_every_sample_creates_with_a_preview(db: Engine, sample: str, kind: str) -> None:
    _customers(db)
    human = runner.invoke(app, ["campaign", "create", str(SAMPLES / sample)])
    assert human.exit_code == 0, human.output
    assert "Preview" in human.output
    result = runner.invoke(app, ["campaign", "create", str(SAMPLES / sample), "--json"])
    preview = json.loads(result.stdout)["preview"]
    assert preview and preview[0]["content"]["type"] == kind


def test_retry_unknown_says_what_it_left_alone(db: Engine) -> None:
    _customers(db)
    assert runner.invoke(app, ["campaign", "create", str(SAMPLES / "campaign.toml")]).exit_code == 0
    with db.begin() as conn:
        lifecycle.transition(conn, 1, lifecycle.RUNNING, now=NOW)
        materialise(conn, 1, now=NOW, instances=["A"])
        conn.execute(  # attempted a moment ago: its status events may still come
            update(deliveries)
            .where(deliveries.c.target == phone(1))
            .values(state="unknown", attempts=1, attempted_at=utcnow())
        )
    human = runner.invoke(app, ["campaign", "retry", "1", "--unknown"])
    assert human.exit_code == 0, human.output
    assert "0 recipient(s) queued again" in human.output
    assert "1 unknown recipient(s) left alone" in human.output
    assert "attempted too recently" in human.output
    answer = json.loads(
        runner.invoke(app, ["campaign", "retry", "1", "--unknown", "--json"]).stdout
    )
    assert (answer["requeued"], answer["left_alone"], answer["waiting"]) == (0, 1, 1)
    assert answer["waiting_until"] is not None
