"""The CSV fast path (cells rendered by the database) writes the same bytes as the
per-row Python path, on SQLite and PostgreSQL, for data built to trip it up."""

from __future__ import annotations

import io
import threading
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, insert, select, update

from campaigns import lifecycle, reports, service
from campaigns.delivery_rows import materialise
from campaigns.reports import writers
from storage import reports as report_store
from storage import states, tables
from storage.engine import make_engine
from storage.reports import sql as report_sql
from tests.campaigns.campaign_fixtures import NOW, make_list, people, phone, spec
from tests.campaigns.reports import reference

deliveries = tables.deliveries

#: names, replies, errors... that a spreadsheet or a CSV reader could trip on
TRICKY = [
    '=HYPERLINK("http://evil")',
    "+1 (415) call me",
    "-2+3",
    "@SUM(A1)",
    "\tindented",
    "\rcarriage",
    "\r\nline then break",
    'say "hi", then go',
    "comma, separated",
    "multi\nline\nreply",
    "emoji 🎉 and ünïcödé — ok",
    "C:\\path\\new\\table",  # backslashes (COPY's escape character)
    "\\",
    "tab\tinside",
    "form\ffeed, vertical\vtab, bell\a, back\bspace, esc\x1b, del\x7f",
    "ends with a newline\n",
    "   ",
    "🎉=starts with emoji",
    " =space first",
    "'already quoted",
    '"',
    ",",
    "=",
    "",
]

#: targets around the E.164 exemption (only the target column has it)
TARGETS = [
    "+14155550100",  # E.164: stays
    "+1234567",  # shortest E.164 (7 chars)
    "+123456789012345",  # longest E.164 (16 chars)
    "+123456",  # too short: neutralised
    "+1234567890123456",  # too long: neutralised
    "+0123456789",  # leading 0: neutralised
    "+1415555\n",  # Python's $ matches before a final newline: stays
    "+1415555\n\n",  # two newlines: neutralised
    "+1415 5550",  # space: neutralised
    "+１２３４５６７８",  # full-width digits are not [0-9]: neutralised
    "=1+1",
    "-12345678",
    "@x",
    "\t+14155550100",
    "120363000000000001@g.us",  # group targets
    "=evil@g.us",
    "+14155550101@g.us",
    "emoji🎉@g.us",
    "+1415\\5550",  # a backslash: neutralised
    "+14155550102\r",  # CR is not what $ allows: neutralised
]


def _campaign(engine: Engine) -> int:
    crowd = people(len(TRICKY))
    for i, person in enumerate(crowd):
        person["name"] = TRICKY[i]
        person["opted_out"] = i % 3 == 0
    make_list(engine, "customers", crowd)
    cid = service.create_campaign(engine, spec(name="=tricky"), now=NOW).id
    with engine.begin() as conn:
        lifecycle.transition(conn, cid, lifecycle.RUNNING, now=NOW)
        materialise(conn, cid, now=NOW, instances=["A", "@B"])
        extra: list[dict[str, Any]] = [
            {
                "campaign_id": cid,
                "target": target,
                "target_kind": "group" if target.endswith("@g.us") else "phone",
                "contact_id": None,
                "sender": None,
                "state": states.QUEUED,
                "attempts": 0,
                "content": {"type": "text", "text": "x"},
                "queued_at": NOW,
                "due_at": NOW,
            }
            for target in TARGETS
        ]
        conn.execute(insert(deliveries), extra)
        ids = list(
            conn.execute(
                select(deliveries.c.id)
                .where(deliveries.c.campaign_id == cid)
                .order_by(deliveries.c.id)
            ).scalars()
        )
        assert len(ids) == len(TRICKY) + len(TARGETS)
        micro = (0, 1, 123456, 500000, 999999)
        for n, row_id in enumerate(ids):
            state = states.ALL[n % len(states.ALL)]
            text = TRICKY[(n * 7) % len(TRICKY)]
            t = NOW + timedelta(seconds=n, microseconds=micro[n % len(micro)])
            values: dict[str, Any] = {
                "state": state,
                "attempts": n % 5,
                "sender": None if n % 4 == 0 else TRICKY[n % len(TRICKY)] or "A",
                "message_id": None if n % 3 == 0 else f"={n}" if n % 2 else f"m{n}",
                "error": None if n % 2 else text,
                "queued_at": t - timedelta(days=400, microseconds=micro[(n + 1) % len(micro)]),
                "sent_at": None if n % 6 == 0 else t,
                "delivered_at": None if n % 3 == 1 else t + timedelta(seconds=3),
                "read_at": None if n % 2 else t + timedelta(hours=25, microseconds=7),
                "failed_at": t if state == states.FAILED else None,
                "replied_at": None if n % 5 == 0 else t + timedelta(minutes=1),
                "reply_text": None if n % 5 == 0 else TRICKY[(n * 3) % len(TRICKY)],
            }
            conn.execute(update(deliveries).where(deliveries.c.id == row_id).values(**values))
        # the smallest and largest years of four digits, on a contact-less row
        conn.execute(
            update(deliveries)
            .where(deliveries.c.id == ids[-1])
            .values(sent_at=NOW.replace(year=1000, microsecond=10), read_at=NOW.replace(year=9999))
        )
    return cid


def _per_row(engine: Engine, cid: int) -> bytes:
    buf = io.BytesIO()
    with engine.connect() as conn:
        fh = io.TextIOWrapper(buf, encoding="utf-8-sig", newline="", write_through=True)
        reference.write_csv_per_row(conn, cid, fh)
        fh.flush()
        data = buf.getvalue()
        fh.detach()
    return data


def test_fast_csv_is_byte_identical(engine: Engine, tmp_path: Path) -> None:
    cid = _campaign(engine)
    expected = _per_row(engine, cid)
    out = reports.write_report(engine, cid, tmp_path / "r.csv")
    got = out.read_bytes()
    assert got.startswith(b"\xef\xbb\xbftarget,name,")
    assert got.count(b"'=") > 5 and b"\r\n" in got and "🎉".encode() in got
    if got != expected:  # show the first differing line, not two blobs
        for a, b in zip(got.split(b"\r\n"), expected.split(b"\r\n"), strict=False):
            assert a == b
    assert got == expected


def test_fast_csv_empty_campaign(engine: Engine, tmp_path: Path) -> None:
    make_list(engine, "customers", [])
    cid = service.create_campaign(engine, spec(), now=NOW).id
    out = reports.write_report(engine, cid, tmp_path / "empty.csv")
    assert out.read_bytes() == _per_row(engine, cid)
    assert (
        out.read_bytes()
        == "\ufefftarget,name,sender,state,attempts,message_id,error,".encode("utf-8")
        + b"queued_at,sent_at,delivered_at,read_at,failed_at,replied_at,reply,opted_out,variant,"
        + b"tapped_button_id,tapped_row_id,tapped_title\r\n"
    )


def test_phone_fixture_is_e164() -> None:
    assert reports.neutralise(phone(3), phone_column=True) == phone(3)


def _assert_same(got: bytes, expected: bytes) -> None:
    if got != expected:  # show the first differing line, not two blobs
        for a, b in zip(got.split(b"\r\n"), expected.split(b"\r\n"), strict=False):
            assert a == b
    assert got == expected


def test_fast_csv_in_small_chunks(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Many chunks through the fetching thread and its bounded queue: same bytes."""
    cid = _campaign(engine)
    monkeypatch.setattr(report_store, "CSV_CHUNK", 3)
    out = reports.write_report(engine, cid, tmp_path / "r.csv")
    _assert_same(out.read_bytes(), _per_row(engine, cid))


def _other_rows(conn: Any, cid: int, n: int, prefix: str) -> None:
    conn.execute(
        insert(deliveries),
        [
            {
                "campaign_id": cid,
                "target": f"{prefix}{i}",
                "target_kind": "phone",
                "contact_id": None,
                "sender": "A",
                "state": states.QUEUED,
                "attempts": 0,
                "content": {"type": "text", "text": "x"},
                "queued_at": NOW,
                "due_at": NOW,
            }
            for i in range(n)
        ],
    )


@pytest.mark.parametrize("gap", [1, 200])
def test_fast_csv_with_other_campaigns_rows_between(
    engine: Engine, tmp_path: Path, gap: int
) -> None:
    """A campaign whose ids are interleaved with another's (``gap`` foreign rows after
    each of its rows): SQLite walks the rowid range past them (gap 1) or, when the range
    is mostly foreign, reads the campaign's index and sorts (gap 200); same bytes."""
    make_list(engine, "customers", people(4))
    cid = service.create_campaign(engine, spec(), now=NOW).id
    other = service.create_campaign(engine, spec(name="other"), now=NOW).id
    with engine.begin() as conn:
        for i, name in enumerate(TRICKY[:6]):
            _other_rows(conn, cid, 1, f"+1415000{i:04d}")
            conn.execute(
                update(deliveries)
                .where(deliveries.c.campaign_id == cid, deliveries.c.target.like(f"%{i:04d}"))
                .values(reply_text=name, error=name, sent_at=NOW + timedelta(microseconds=i))
            )
            _other_rows(conn, other, gap, f"x{i}-")
        span = conn.execute(
            select(deliveries.c.id).where(deliveries.c.campaign_id == cid)
        ).scalars()
        ids = sorted(span)
    assert report_sql.use_rowid_range(ids[0], ids[-1], len(ids)) is (gap == 1)
    out = reports.write_report(engine, cid, tmp_path / "r.csv")
    got = out.read_bytes()
    assert got.count(b"\r\n") >= 7 and b"x0-" not in got
    _assert_same(got, _per_row(engine, cid))


def test_use_rowid_range() -> None:
    assert report_sql.use_rowid_range(None, None, 0) is False
    assert report_sql.use_rowid_range(10, 10, 1) is True
    assert report_sql.use_rowid_range(1, 400, 100) is True
    assert report_sql.use_rowid_range(1, 401, 100) is False


def test_fast_csv_sqlite_nul_bytes(sqlite_engine: Engine, tmp_path: Path) -> None:
    """SQLite text may hold NUL (PostgreSQL refuses it): GLOB and length() stop there, so
    quoting uses instr and the E.164 exemption refuses NUL; same bytes."""
    cid = _campaign(sqlite_engine)
    with sqlite_engine.begin() as conn:
        _other_rows(conn, cid, 1, "+14155550199\x00=cmd")
        _other_rows(conn, cid, 1, "\x00")
        conn.execute(
            update(deliveries)
            .where(deliveries.c.campaign_id == cid, deliveries.c.target.like("%cmd"))
            .values(reply_text="a\x00,b", error='\x00"', sender="\x00\n")
        )
    out = reports.write_report(sqlite_engine, cid, tmp_path / "r.csv")
    got = out.read_bytes()
    assert b"\x00" in got
    _assert_same(got, _per_row(sqlite_engine, cid))


@pytest.mark.postgres
def test_fast_csv_postgres_session_settings(pg_url: str, tmp_path: Path) -> None:
    """A session time zone and date order change nothing (times are converted to UTC;
    the export sets DateStyle for its own transaction only). psycopg itself cannot read
    times in a DateStyle other than ISO, so only the order part can vary."""
    engine = make_engine(
        pg_url, connect_args={"options": "-c DateStyle=ISO,DMY -c TimeZone=Asia/Kolkata"}
    )
    from storage.engine import upgrade

    upgrade(engine)
    try:
        cid = _campaign(engine)
        out = reports.write_report(engine, cid, tmp_path / "r.csv")
        _assert_same(out.read_bytes(), _per_row(engine, cid))
        with engine.connect() as conn:  # the SET LOCAL ended with the export's transaction
            assert conn.exec_driver_sql("SHOW DateStyle").scalar_one() == "ISO, DMY"
    finally:
        engine.dispose()


class _FailingFile(io.BytesIO):
    """A file whose second write fails (a full disk)."""

    def write(self, data: Any) -> int:
        if self.tell():
            raise OSError("no space left on device")
        return super().write(data)


def test_fast_csv_write_error_stops_the_fetcher(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failed write raises at once, the fetching thread ends, the connection is reusable."""
    cid = _campaign(engine)
    monkeypatch.setattr(report_store, "CSV_CHUNK", 2)
    before = set(threading.enumerate())
    with engine.connect() as conn:
        with pytest.raises(OSError, match="no space"):
            writers.write_csv(conn, cid, _FailingFile())
        # the threads the write started (another test's thread may end meanwhile)
        assert [t.name for t in threading.enumerate() if t not in before] == []
        conn.rollback()
        assert conn.exec_driver_sql("SELECT 1").scalar_one() == 1
    assert _per_row(engine, cid).count(b"\r\n") > 30
