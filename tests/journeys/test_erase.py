"""A person asks to be forgotten (issue 19): their contact was imported (and a rejected row
of the same file held their number in another format), a campaign reached them through a
``gatecast sandbox`` process, they replied; ``gatecast contacts erase`` removes them.

Then EVERY table of the database (the SQLite file, and its bytes; a PostgreSQL database
in the second variant), every report export (CSV, XLSX, JSON) and the logs of ``gatecast
serve`` are read, and the number (in any usual format) and the name appear nowhere; the
campaign's counts are what they were. The SQLite variant erases through the CLI, the
PostgreSQL one through the API.
"""

from __future__ import annotations

import csv
import io
import json

import httpx
import openpyxl
import pytest
import sqlalchemy as sa

from tests.journeys.harness import Workspace, link_sender_over_api, wait_for
from tests.journeys.harness import ok as _ok

E164 = "+447911123456"
NAME = ("Zebulon", "Quarrington")
#: the ways the number can be written (each also inside the longer ones)
FORMS = ("7911123456", "7911 123456", "7911-123456", "7911 123 456")
PEOPLE = f"""name,phone,timezone
{NAME[0]} {NAME[1]},{E164},Europe/London
Ada Lovelace,+447911123457,Europe/London
{NAME[0]} {NAME[1]} (work),07911 123456,Mars/Base
"""
REPLY = f"Yes please! {NAME[0]} here, call me on 07911 123456"


def _leaks(text: str) -> list[str]:
    """Which of the number's forms and the name's parts ``text`` holds."""
    return [s for s in (*FORMS, *NAME) if s.lower() in text.lower()]


def _dump_database(url: str) -> str:
    """Every row of every table, as text."""
    engine = sa.create_engine(url)
    try:
        meta = sa.MetaData()
        meta.reflect(engine)
        assert "contacts" in meta.tables and "deliveries" in meta.tables, list(meta.tables)
        parts: list[str] = []
        with engine.connect() as conn:
            for name, table in meta.tables.items():
                for row in conn.execute(sa.select(table)):
                    parts.append(f"{name}: {tuple(row)!r}")
    finally:
        engine.dispose()
    return "\n".join(parts)


def _file_bytes(ws: Workspace) -> bytes:
    """The SQLite file and its write-ahead log, as bytes."""
    return b"".join(p.read_bytes() for p in sorted(ws.path.glob("gatecast.db*")))


def _xlsx_text(content: bytes) -> str:
    book = openpyxl.load_workbook(io.BytesIO(content), read_only=True)
    cells = [
        str(v)
        for sheet in book.worksheets
        for row in sheet.iter_rows(values_only=True)
        for v in row
    ]
    return "\n".join(cells)


def _reports(ws: Workspace, api: httpx.Client, cid: int) -> dict[str, str]:
    """Every export of the campaign: through the API and through ``gatecast report``."""
    out = {
        "api csv": api.get(f"/api/v1/campaigns/{cid}/report.csv").text,
        "api json": api.get(f"/api/v1/campaigns/{cid}/report.json").text,
        "api xlsx": _xlsx_text(api.get(f"/api/v1/campaigns/{cid}/report.xlsx").content),
        "api summary": api.get(f"/api/v1/campaigns/{cid}/summary").text,
    }
    for suffix in ("csv", "json", "xlsx"):
        path = ws.path / f"report.{suffix}"
        out[f"cli {suffix}"] = ws.run("report", str(cid), "--output", str(path)).output
        content = path.read_bytes()
        out[f"cli {suffix} file"] = (
            _xlsx_text(content) if suffix == "xlsx" else content.decode("utf-8-sig")
        )
    return out


@pytest.mark.slow
@pytest.mark.parametrize(
    "dialect", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
)
def test_an_erased_contact_is_gone_from_every_table_report_and_log(
    ws: Workspace, dialect: str, request: pytest.FixtureRequest
) -> None:
    if dialect == "postgresql":
        ws.settings["GATECAST_DATABASE_URL"] = str(request.getfixturevalue("pg_url"))
        ws.run("db", "upgrade")
    people = ws.path / "people.csv"
    people.write_text(PEOPLE, encoding="utf-8")
    imported = ws.run(
        "contacts", "import", str(people), "--list", "customers", "--region", "GB", "--json"
    ).json()
    assert (imported["imported"], imported["invalid"]) == (2, 1), imported

    server = ws.serve()
    api = server.api()
    iid = link_sender_over_api(api)
    # the same file through the API with an Idempotency-Key: its stored answer holds
    # the rejected row's cells
    again = _ok(
        api.post(
            "/api/v1/imports",
            files={"file": ("people.csv", PEOPLE.encode())},
            data={"list_name": "customers", "region": "GB"},
            headers={"Idempotency-Key": "import-people-1"},
        ),
        202,
    )
    wait_for(
        lambda: _ok(api.get(f"/api/v1/imports/{again['id']}"))["status"] == "completed",
        what="the API import",
    )
    campaign = _ok(
        api.post(
            "/api/v1/campaigns",
            json={
                "name": "Spring",
                "list": "customers",
                "message": {"type": "text", "text": "Hello {{ name }}, your code is {{ phone }}"},
                "pace": {"per_minute": 600, "delay_seconds": [0, 0]},
            },
        ),
        201,
    )
    cid = campaign["id"]
    wait_for(
        lambda: _ok(api.get(f"/api/v1/campaigns/{cid}/progress"))["counts"].get("read") == 2,
        what="both messages to be read",
    )
    httpx.post(
        f"{ws.gateway_url}/sandbox/instances/{iid}/incoming",
        json={"from": E164.lstrip("+"), "text": REPLY},
        timeout=10,
    ).raise_for_status()

    def replied() -> bool:
        rows = csv.DictReader(io.StringIO(api.get(f"/api/v1/campaigns/{cid}/report.csv").text))
        return any(r["reply"] == REPLY for r in rows)

    wait_for(replied, what="the reply to reach the report")
    before = _ok(api.get(f"/api/v1/campaigns/{cid}/progress"))["counts"]
    assert _leaks(_dump_database(ws.database_url)), "the journey stored nothing to erase"
    if dialect == "sqlite":
        assert FORMS[0].encode() in _file_bytes(ws), "the file held no number to erase"

    # without --yes (and no one to answer the question) nothing is erased
    refused = ws.run("contacts", "erase", E164, ok=False)
    assert refused.code != 0
    assert ws.run("contacts", "show", E164, "--json").json()["name"] == " ".join(NAME)
    if dialect == "sqlite":  # the CLI
        erased = ws.run("contacts", "erase", E164, "--yes").output
    else:  # the API, by the contact's id (the number never in a request line)
        found = _ok(api.get("/api/v1/contacts", params={"q": E164}))["items"]
        assert [c["name"] for c in found] == [" ".join(NAME)], found
        erased = api.post(f"/api/v1/contacts/{found[0]['id']}/erase").text
        assert json.loads(erased)["deliveries_anonymised"] == 1, erased
        assert json.loads(erased)["import_rejects_removed"] == 2, erased  # CLI's and API's
    assert "anonymised" in erased and not _leaks(erased), erased
    gone = ws.run("contacts", "show", E164, ok=False)
    assert gone.code != 0
    assert ws.run("contacts", "erase", E164, "--yes", ok=False).code != 0  # nothing left

    assert _ok(api.get(f"/api/v1/campaigns/{cid}/progress"))["counts"] == before
    reports = _reports(ws, api, cid)
    for what, text in reports.items():
        assert not _leaks(text), (what, _leaks(text), text)
    rows = list(csv.DictReader(io.StringIO(reports["api csv"].lstrip("\ufeff"))))
    assert len(rows) == 2 and {r["state"] for r in rows} == {"read"}, rows
    assert sorted(r["target"].split(":")[0] for r in rows) == ["+447911123457", "erased"], rows
    assert json.loads(reports["api json"])
    # Ada is untouched
    assert ws.run("contacts", "show", "+447911123457", "--json").json()["name"] == "Ada Lovelace"

    server.stop()
    dump = _dump_database(ws.database_url)
    assert not _leaks(dump), _leaks(dump)
    assert "Ada Lovelace" in dump
    if dialect == "sqlite":  # not even in the file's free space
        assert b"Ada Lovelace" in _file_bytes(ws)
    logs = {
        log.name: log.read_text(encoding="utf-8", errors="replace") for log in ws.path.glob("*.log")
    }
    assert "serve-0.log" in logs and "gatecast serving on" in logs["serve-0.log"], list(logs)
    # every file gatecast left in the folder (database, logs, the receiver's journal,
    # reports): only the user's own input file still holds the person
    for path in ws.path.rglob("*"):
        if path.is_file() and path != people:
            data = path.read_bytes()
            for form in (*FORMS, *NAME):
                assert form.encode() not in data, (path.name, form)
