"""A new user's first steps, each a defect found following the README (issue 29): samples
whose start never goes stale, the whole-day window, a command run in the wrong folder,
files that are not what their name says, re-imports, header-only files, the failure words
and the Google Contacts step. CLI subprocesses against one sandbox per module."""

from __future__ import annotations

import csv
import json
import re
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

from tests.journeys.harness import (
    QUICK_STATUSES,
    ROOT,
    SAMPLES,
    Workspace,
    campaign_over_api,
    ok,
    table_value,
    workspace,
)

NEW_YORK = ZoneInfo("America/New_York")
#: Olivia Johnson of samples/contacts.csv is not on the app here (a failed status, 404)
NOT_ON_APP = "+12025550143"
SANDBOX_ARGS = (*QUICK_STATUSES, "--not-on-app", NOT_ON_APP)


def _customers(ws: Workspace) -> None:
    out = ws.run("contacts", "import", str(SAMPLES / "contacts.csv"), "--list", "customers")
    assert table_value(out.output, "imported (new)") == "44", out.output


def test_the_dated_sample_starts_on_its_next_friday_whatever_today_is(ws: Workspace) -> None:
    """`start = "friday 09:00"`: today (no clock set) and on a Friday after 09:00 (the
    next week's), never refused as past."""
    _customers(ws)
    sample = str(SAMPLES / "campaign-interactive.toml")
    today = ws.run("campaign", "create", sample, "--json").json()
    start = datetime.fromisoformat(today["start_at"]).astimezone(NEW_YORK)
    assert (start.weekday(), start.hour, start.minute) == (4, 9, 0), start
    now = datetime.now(NEW_YORK)
    assert now < start <= now + timedelta(days=7), (now, start)
    ws.clock_start = datetime(2026, 12, 11, 10, 0, tzinfo=NEW_YORK)  # a Friday, 10:00
    later = ws.run("campaign", "create", sample).output
    assert "starting 2026-12-18 09:00 America/New_York" in later, later


def test_a_whole_day_window_is_accepted_and_shown_as_written(ws: Workspace) -> None:
    _customers(ws)
    path = ws.path / "all-day.toml"
    path.write_text(
        'name = "All day"\nlist = "customers"\n[message]\ntype = "text"\ntext = "Hi"\n'
        '[schedule]\nstart = "tomorrow 10:00"\nwindow = ["00:00", "24:00"]\n',
        encoding="utf-8",
    )
    campaign_id = ws.run("campaign", "create", str(path), "--json").json()["id"]
    shown = ws.run("campaign", "show", str(campaign_id)).output
    assert "00:00-24:00" in shown, shown
    exported = ws.run("campaign", "export", str(campaign_id)).output
    assert 'window = ["00:00", "24:00"]' in exported, exported


def test_a_read_in_another_folder_says_there_is_no_database_and_creates_none(
    ws: Workspace, tmp_path: Path
) -> None:
    """The default database is ``gatecast.db`` in the folder a command runs in: a read
    elsewhere names the file it looked for and how to point at one; an import creates it."""
    _customers(ws)
    with workspace(tmp_path / "elsewhere", GATECAST_DATABASE_URL="sqlite:///gatecast.db") as away:
        here = away.path / "gatecast.db"
        for command in (
            ("campaign", "show", "1"),
            ("instance", "status"),
            ("campaign", "run", "1"),
        ):
            done = away.run(*command, ok=False)
            assert done.code == 1, done.output
            text = " ".join(done.output.split())
            assert "there is no gatecast database here" in text, text
            assert str(here) in text and "GATECAST_DATABASE_URL" in text, text
            assert "does not exist" in text and "campaign 1" not in text, text
            assert not here.exists(), command
        away.run("contacts", "import", str(SAMPLES / "contacts.csv"), "--list", "customers")
        assert here.exists()
        assert "customers" in away.run("contacts", "lists").output


def test_files_that_are_not_contacts_are_refused_in_the_users_terms(ws: Workspace) -> None:
    """A PDF renamed .csv, an unsupported type (the list names every type, .vcf too) and a
    header-only file: one clear line naming the file, exit 1, no list made."""
    (ws.path / "prices.csv").write_bytes(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<<>>,;\x00\x01\n")
    (ws.path / "people.pages").write_bytes(b"PK\x03\x04 not read")
    (ws.path / "header-only.csv").write_text("Name,Phone\n", encoding="utf-8")
    expected = {
        "prices.csv": "prices.csv: not a CSV file: it is a PDF document",
        "people.pages": "unsupported file type '.pages' (use one of .csv, .tsv, .txt, .xlsx",
        "header-only.csv": "header-only.csv: no contacts to import: the file has a header row",
    }
    for name, words in expected.items():
        done = ws.run("contacts", "import", name, "--list", "nobody", ok=False)
        text = " ".join(done.output.split())
        assert done.code == 1 and words in text, text
        assert "tokeniz" not in text.lower() and "C error" not in text, text
        assert name != "people.pages" or ".vcf" in text, text
    assert "nobody" not in ws.run("contacts", "lists").output


def test_the_same_people_from_csv_and_xlsx_are_unchanged(ws: Workspace) -> None:
    """samples/contacts.xlsx holds contacts.csv's people, 14 phones written another way
    (number cells, other formats): the same numbers, so nothing is updated, either way."""
    _customers(ws)
    for sample in ("contacts.xlsx", "contacts.csv", "contacts.xlsx"):
        out = ws.run("contacts", "import", str(SAMPLES / sample), "--list", "customers")
        counts = {k: table_value(out.output, k) for k in ("imported (new)", "updated", "unchanged")}
        assert counts == {"imported (new)": "0", "updated": "0", "unchanged": "44"}, (sample, out)


def test_the_readmes_google_contacts_step_works_as_written(ws: Workspace) -> None:
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    found = re.search(r"`gatecast (contacts import samples/google-contacts\.csv[^`]*)`", readme)
    assert found, "the README gives no command for samples/google-contacts.csv"
    args = [str(ROOT / a) if a.startswith("samples/") else a for a in found.group(1).split()]
    out = ws.run(*args).output
    assert table_value(out, "imported (new)") == "8", out
    assert table_value(out, "invalid (rejected)") == "1", out  # the card without a number


def test_a_failure_has_the_same_words_in_the_report_and_on_the_dashboard(ws: Workspace) -> None:
    """A number not on the app: the report (CSV, JSON) says "not on WhatsApp" as the
    API's (and the dashboard's) reason does, not "failed by the gateway (code 404)"."""
    ws.link_sender()
    _customers(ws)
    fast = (SAMPLES / "campaign.toml").read_text(encoding="utf-8")
    fast = fast.replace("per_minute = 20", "per_minute = 0").replace("[5, 15]", "[0, 0]")
    (ws.path / "fast.toml").write_text(fast, encoding="utf-8")
    campaign_id = str(ws.run("campaign", "create", "fast.toml", "--json").json()["id"])
    ws.run("campaign", "run", campaign_id, "--webhook", "--settle", "3", timeout=300)
    ws.run("report", campaign_id, "--output", "r.csv")
    ws.run("report", campaign_id, "--output", "r.json")
    with (ws.path / "r.csv").open(encoding="utf-8-sig") as fh:
        failed = [r for r in csv.DictReader(fh) if r["target"] == NOT_ON_APP]
    assert [(r["state"], r["error"]) for r in failed] == [("failed", "not on WhatsApp (code 404)")]
    rows = json.loads((ws.path / "r.json").read_text(encoding="utf-8"))["deliveries"]
    assert [r["error"] for r in rows if r["target"] == NOT_ON_APP] == ["not on WhatsApp (code 404)"]
    server = ws.serve()
    assert campaign_over_api(server, int(campaign_id))["state"] == "completed"
    with server.api() as api:
        page = ok(
            api.get(f"/api/v1/campaigns/{campaign_id}/deliveries", params={"q": NOT_ON_APP}), 200
        )
    assert [d["reason"] for d in page["items"]] == ["not on WhatsApp"], page
    server.stop()
