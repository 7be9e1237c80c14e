"""The import pipeline on real SQLite files and a real PostgreSQL database."""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import openpyxl
import pytest
import sqlalchemy as sa
from sqlalchemy import Engine

from campaigns import contacts
from campaigns.importer import (
    ImportFailed,
    ImportOptions,
    attribute_key,
    import_file,
    preview_file,
)
from campaigns.spreadsheets import read_table
from storage.engine import make_engine, upgrade
from storage.queries import contacts as q

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def _contacts(engine: Engine) -> dict[str, Any]:
    with engine.connect() as conn:
        rows = conn.execute(sa.select(q.contacts)).all()
    return {r.phone: r for r in rows}


def _members(engine: Engine, list_name: str) -> set[str]:
    with engine.connect() as conn:
        list_id = q.get_list_id(conn, list_name)
        if list_id is None:
            return set()
        return set(q.list_member_phones(conn, list_id, include_opted_out=True))


def _jobs(engine: Engine) -> list[Any]:
    from campaigns.importer import imports

    with engine.connect() as conn:
        return list(conn.execute(sa.select(imports).order_by(imports.c.id)))


@pytest.mark.parametrize(
    ("sample", "region", "counts"),
    [
        ("contacts.csv", "US", (50, 44, 0, 2, 4, 0)),
        ("contacts.xlsx", "US", (50, 44, 0, 2, 4, 0)),
        ("messy-contacts.csv", "GB", (14, 8, 0, 1, 5, 0)),
    ],
)
def test_samples_import_with_the_documented_counts(
    engine: Engine, sample: str, region: str, counts: tuple[int, ...]
) -> None:
    report = import_file(
        engine, SAMPLES / sample, ImportOptions(list_name="customers", region=region), now=NOW
    )
    got = (
        report.rows_read,
        report.imported,
        report.updated,
        report.duplicates,
        report.invalid,
        report.skipped_opted_out,
    )
    assert got == counts
    assert len(_members(engine, "customers")) == report.imported
    job = _jobs(engine)[-1]
    assert (job.status, job.rows_read, job.imported, job.invalid) == (
        "completed",
        counts[0],
        counts[1],
        counts[4],
    )
    with engine.connect() as conn:
        stored = conn.execute(
            sa.select(q.import_rejects.c.row_number, q.import_rejects.c.reason).order_by(
                q.import_rejects.c.row_number
            )
        ).all()
    assert [(r.row_number, r.reason) for r in report.rejects] == [tuple(r) for r in stored]


def test_csv_sample_rejects_every_kind_and_merges_duplicates(sqlite_engine: Engine) -> None:
    report = import_file(sqlite_engine, SAMPLES / "contacts.csv", ImportOptions("customers"))
    assert [(r.row_number, r.column, r.reason) for r in report.rejects] == [
        (12, "Phone", "empty"),
        (24, "Phone", "contains letters"),
        (37, "Phone", "too short"),
        (47, "Phone", "invalid for its region"),
    ]
    assert report.rejects[1].raw == {
        "Name": "Daniel Young",
        "Phone": "call me",
        "City": "Chicago",
        "Plan": "trial",
    }
    people = _contacts(sqlite_engine)
    olivia = people["+12025550143"]
    # the duplicate row's city wins; its empty plan does not blank the earlier one
    assert olivia.attributes == {"city": "Washington DC", "plan": "pro"}
    assert olivia.raw_phone == "+1 202-555-0143"
    amelia = people["+447911123456"]
    assert (amelia.name, amelia.attributes) == (
        "Amelia Thomas",
        {"city": "London", "plan": "premium"},
    )


def test_messy_sample(sqlite_engine: Engine) -> None:
    report = import_file(
        sqlite_engine, SAMPLES / "messy-contacts.csv", ImportOptions("m", region="GB")
    )
    assert report.phone_column == "Teléfono"
    assert report.attribute_keys == {"Ciudad": "ciudad", "Plan Type": "plan_type"}
    reasons = {r.row_number: r.reason for r in report.rejects}
    assert reasons == {
        8: "invalid for its region",
        9: "digits lost to scientific notation",
        11: "contains letters",
        12: "empty",
        13: "invalid for its region",
    }
    people = _contacts(sqlite_engine)
    assert people["+447400123457"].name == ""  # "NA" says there is no name
    assert people["+447911123457"].name == "None"  # last non-empty name of the duplicate
    assert people["+442079460959"].attributes == {"ciudad": "London"}  # "NA": no plan


def test_rejects_file_round_trips(tmp_path: Path, sqlite_engine: Engine) -> None:
    report = import_file(
        sqlite_engine, SAMPLES / "messy-contacts.csv", ImportOptions("m", region="GB")
    )
    out = tmp_path / "rejects.csv"
    assert report.write_rejects(out) == 5
    table = read_table(out)
    assert table.columns[:3] == ["row_number", "column", "reason"]
    assert table.columns[3:] == report.columns
    for (_, row), reject in zip(table.frame.iterrows(), report.rejects, strict=True):
        assert int(row["row_number"]) == reject.row_number
        assert row["reason"] == reject.reason
        assert {c: row[c] for c in report.columns} == reject.raw  # spaces, "NA" and all


def test_nul_bytes_import_the_same_on_both_databases(engine: Engine, tmp_path: Path) -> None:
    path = tmp_path / "nul.csv"
    path.write_bytes(
        b"phone,name,city\n+44 7911 123456,A\x00my,Le\x00eds\n+1 202 555 0143,Bob,DC\n"
    )
    report = import_file(engine, path, ImportOptions("nul"), now=NOW)
    assert (report.imported, report.invalid) == (2, 0)
    amy = _contacts(engine)["+447911123456"]
    assert amy.name == "Amy" and "\x00" not in str(amy.attributes), amy


def test_a_row_in_another_encoding_is_rejected_not_garbled(
    sqlite_engine: Engine, tmp_path: Path
) -> None:
    path = tmp_path / "mixed.csv"
    path.write_bytes(
        b"name,phone,city\nJos\xc3\xa9,+4915112345678,K\xc3\xb6ln\n"
        b"Zo\xeb,+4915112345679,Berlin\nAnn,+4915112345670,M\xc3\xbcnchen\n"
    )
    report = import_file(sqlite_engine, path, ImportOptions("mixed"), now=NOW)
    assert (report.imported, report.invalid) == (2, 1)
    [reject] = report.rejects
    assert reject.row_number == 3 and "another text encoding" in reject.reason
    assert "(utf-8)" in reject.reason and "save the file as UTF-8" in reject.reason
    stored = _contacts(sqlite_engine)
    assert stored["+4915112345678"].name == "José"
    assert stored["+4915112345670"].attributes == {"city": "München"}
    assert "+4915112345679" not in stored


def test_reimport_updates_and_keeps_opt_outs(engine: Engine, tmp_path: Path) -> None:
    first = tmp_path / "a.csv"
    first.write_text("phone,name,city\n+44 7911 123456,Amy,Leeds\n+1 202 555 0143,Bob,DC\n")
    import_file(engine, first, ImportOptions("one"), now=NOW)
    with engine.begin() as conn:
        assert q.set_opt_out(conn, "+12025550143", True, "STOP", NOW)
    second = tmp_path / "b.csv"
    second.write_text(
        "mobile,name,plan\n07911123456,,gold\n(202) 555-0143,Robert,silver\n0161 496 0123,Cy,\n"
    )
    report = import_file(engine, second, ImportOptions("two", region="GB"), now=NOW)
    # (202) 555-0143 read as a British number is invalid; Amy is updated, Cy is new
    assert (report.imported, report.updated, report.skipped_opted_out, report.invalid) == (
        1,
        1,
        0,
        1,
    )
    people = _contacts(engine)
    assert people["+12025550143"].opted_out is True
    third = tmp_path / "c.csv"
    third.write_text("phone,name,plan\n+447911123456,,gold\n+12025550143,Robert,silver\n")
    report = import_file(engine, third, ImportOptions("three"), now=NOW)
    # Amy's number only written another way: unchanged (issue 29)
    assert (report.imported, report.updated, report.unchanged) == (0, 0, 1)
    assert report.skipped_opted_out == 1
    people = _contacts(engine)
    amy = people["+447911123456"]
    assert amy.name == "Amy"  # an empty name never replaces a stored one
    assert amy.attributes == {"city": "Leeds", "plan": "gold"}  # merged
    bob = people["+12025550143"]
    assert (bob.opted_out, bob.opt_out_reason, bob.name) == (True, "STOP", "Robert")
    assert _members(engine, "three") == {"+447911123456", "+12025550143"}
    assert _members(engine, "one") == {"+447911123456", "+12025550143"}


def _install_failing_trigger(engine: Engine, phone: str) -> None:
    with engine.begin() as conn:
        if engine.dialect.name == "sqlite":
            conn.exec_driver_sql(
                "CREATE TRIGGER boom BEFORE INSERT ON contacts "
                f"WHEN NEW.phone = '{phone}' BEGIN SELECT RAISE(ABORT, 'boom'); END"
            )
        else:
            conn.exec_driver_sql(
                "CREATE FUNCTION boom() RETURNS trigger AS $$ BEGIN "
                f"IF NEW.phone = '{phone}' THEN RAISE EXCEPTION 'boom'; END IF; "
                "RETURN NEW; END $$ LANGUAGE plpgsql"
            )
            conn.exec_driver_sql(
                "CREATE TRIGGER boom BEFORE INSERT ON contacts FOR EACH ROW EXECUTE FUNCTION boom()"
            )


def _snapshot(engine: Engine) -> tuple[Any, ...]:
    with engine.connect() as conn:
        return (
            sorted(
                tuple(r)
                for r in conn.execute(
                    sa.select(q.contacts.c.phone, q.contacts.c.name, q.contacts.c.attributes)
                )
            ),
            sorted(tuple(r) for r in conn.execute(sa.select(q.lists.c.name))),
            sorted(
                tuple(r)
                for r in conn.execute(
                    sa.select(q.list_members.c.list_id, q.list_members.c.contact_id)
                )
            ),
        )


def _big_file(path: Path, n: int) -> list[str]:
    phones = [f"+1 202 555 {i:04d}" for i in range(n)]
    path.write_text(
        "phone,name,city\n" + "".join(f"{p},P{i},Town{i}\n" for i, p in enumerate(phones))
    )
    return phones


def test_database_error_midway_leaves_nothing_half_written(engine: Engine, tmp_path: Path) -> None:
    path = tmp_path / "big.csv"
    _big_file(path, 300)
    import_file(engine, path, ImportOptions("before"), now=NOW)  # existing state
    again = tmp_path / "again.csv"
    again.write_text(
        "phone,name,city\n"
        + "".join(f"+1 202 555 {i:04d},New{i},Elsewhere\n" for i in range(250))
        + "".join(f"+1 212 555 {i:04d},Fresh{i},NYC\n" for i in range(250))
    )
    _install_failing_trigger(engine, "+12125550200")  # in the fifth batch of 50
    before = _snapshot(engine)
    with pytest.raises(
        ImportFailed, match=r"again.csv: import failed, nothing was written.*boom"
    ) as failed:
        import_file(engine, again, ImportOptions("after"), now=NOW, batch_size=50)
    assert "\n" not in str(failed.value)  # one line: no SQL text, no parameters
    assert _snapshot(engine) == before
    job = _jobs(engine)[-1]
    assert job.status == "failed"
    assert "boom" in job.error
    assert job.list_id is None


def test_interrupted_import_leaves_nothing_half_written(engine: Engine, tmp_path: Path) -> None:
    path = tmp_path / "big.csv"
    _big_file(path, 400)
    calls = []

    def interrupt(done: int, total: int) -> None:
        calls.append(done)
        if done > 500:  # inside the write phase, after some batches went to the database
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        import_file(engine, path, ImportOptions("x"), progress=interrupt, batch_size=50)
    assert max(calls) > 500
    assert _snapshot(engine) == ([], [], [])
    assert _jobs(engine)[-1].status == "failed"


def test_no_phone_column_lists_the_headers(sqlite_engine: Engine, tmp_path: Path) -> None:
    path = tmp_path / "people.csv"
    path.write_text("Name,Email\nAnn,a@example.com\n")
    with pytest.raises(
        ImportFailed, match=r"people.csv: no phone column found among the headers: Name, Email"
    ):
        import_file(sqlite_engine, path, ImportOptions("x"))
    assert _jobs(sqlite_engine)[-1].status == "failed"
    with pytest.raises(
        ImportFailed, match=r"no column named 'Tel' for the phone number; columns: Name, Email"
    ):
        import_file(sqlite_engine, path, ImportOptions("x", phone_column="Tel"))


@pytest.mark.parametrize(
    ("header", "found"),
    [
        ("Teléfono", True),
        ("TELEFONE", True),
        ("Téléphone", True),
        ("WhatsApp Number", True),
        ("Handy", True),
        ("Número", True),
        ("Mobile Phone", True),
        ("Contact Number", True),
        ("MSISDN", True),
        ("e-mail", False),
    ],
)
def test_phone_header_found_in_common_languages(tmp_path: Path, header: str, found: bool) -> None:
    path = tmp_path / "h.csv"
    path.write_text(f"Nombre,{header}\nAna,+44 7911 123456\n", encoding="utf-8")
    preview = preview_file(path, ImportOptions("x"))
    assert (preview.phone_column == header) is found
    if found:
        assert preview.name_column == "Nombre"
        assert preview.phones[0].e164 == "+447911123456"
    else:
        assert preview.problem is not None and "no phone column found" in preview.problem


def test_first_and_last_name_columns_are_joined(sqlite_engine: Engine, tmp_path: Path) -> None:
    path = tmp_path / "n.csv"
    path.write_text(
        "First Name,Last Name,Cell,Plan Type,2fa\nAna, Lima ,+55 11 91234-5678,gold,yes\n"
    )
    report = import_file(sqlite_engine, path, ImportOptions("x"))
    assert report.name_column == "First Name + Last Name"
    contact = _contacts(sqlite_engine)["+5511912345678"]
    assert contact.name == "Ana Lima"
    assert contact.attributes == {
        "first_name": "Ana",
        "last_name": "Lima",
        "plan_type": "gold",
        "col_2fa": "yes",
    }


def test_too_long_name_is_rejected_with_its_column(sqlite_engine: Engine, tmp_path: Path) -> None:
    path = tmp_path / "n.csv"
    path.write_text(f"name,phone\n{'x' * 301},+44 7911 123456\nok,+44 7911 123457\n")
    report = import_file(sqlite_engine, path, ImportOptions("x"))
    assert [(r.row_number, r.column, r.reason) for r in report.rejects] == [
        (2, "name", "name longer than 300 characters")
    ]
    assert report.imported == 1


def test_attribute_key() -> None:
    assert attribute_key(" Plan Type ") == "plan_type"
    assert attribute_key("Ciudad/Región") == "ciudad_región"
    assert attribute_key("1st") == "col_1st"
    assert attribute_key("!!") == "column"


def test_empty_list_name_refused(sqlite_engine: Engine) -> None:
    with pytest.raises(ImportFailed, match=r"list name cannot be empty"):
        import_file(sqlite_engine, SAMPLES / "contacts.csv", ImportOptions("  "))


def test_progress_reaches_its_total(sqlite_engine: Engine) -> None:
    seen: list[tuple[int, int]] = []
    import_file(
        sqlite_engine,
        SAMPLES / "contacts.csv",
        ImportOptions("x"),
        progress=lambda d, t: seen.append((d, t)),
        batch_size=10,
    )
    assert seen[-1][0] == seen[-1][1]
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)


def test_header_only_file_is_refused_creating_no_list(
    sqlite_engine: Engine, tmp_path: Path
) -> None:
    path = tmp_path / "empty.csv"
    path.write_bytes(b"\xef\xbb\xbfphone,name\n")
    with pytest.raises(ImportFailed, match=r"empty.csv: no contacts to import.*phone, name"):
        import_file(sqlite_engine, path, ImportOptions("nobody"))
    with sqlite_engine.connect() as conn:
        assert q.get_list_id(conn, "nobody") is None
    assert _jobs(sqlite_engine)[-1].status == "failed"


def test_phone_column_named_case_insensitively(sqlite_engine: Engine, tmp_path: Path) -> None:
    path = tmp_path / "c.csv"
    path.write_text("Name,Work Line,Home\nAnn,+44 7911 123456,+1 202 555 0143\n")
    report = import_file(
        sqlite_engine, path, ImportOptions("x", phone_column="work line", name_column="NAME")
    )
    assert (report.phone_column, report.name_column) == ("Work Line", "Name")
    assert _contacts(sqlite_engine)["+447911123456"].attributes == {"home": "+1 202 555 0143"}


def test_region_is_checked_and_case_insensitive(sqlite_engine: Engine) -> None:
    with pytest.raises(ImportFailed, match=r"unknown region 'XX': use a two-letter ISO 3166 code"):
        import_file(sqlite_engine, SAMPLES / "contacts.csv", ImportOptions("x", region="XX"))
    with pytest.raises(ImportFailed, match=r"unknown region 'XX'"):
        preview_file(SAMPLES / "contacts.csv", ImportOptions("x", region="XX"))
    report = import_file(
        sqlite_engine, SAMPLES / "messy-contacts.csv", ImportOptions("x", region=" gb ")
    )
    assert (report.region, report.imported) == ("GB", 8)


def test_legacy_xls_imports(sqlite_engine: Engine) -> None:
    """The .xls sample: the two spellings of one US number merge (the later row wins)."""
    path = Path(__file__).parent / "data" / "legacy.xls"
    report = import_file(sqlite_engine, path, ImportOptions("legacy", region="US"), now=NOW)
    assert (report.rows_read, report.imported, report.duplicates, report.invalid) == (3, 2, 1, 0)
    assert report.phone_column == "Mobile"
    with sqlite_engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT phone, name FROM contacts ORDER BY phone")).all()
    assert [tuple(r) for r in rows] == [("+12025550143", "Cy"), ("+447911123456", "Zoë")]


def test_unchanged_reimport_updates_nothing(engine: Engine, tmp_path: Path) -> None:
    report = import_file(engine, SAMPLES / "contacts.csv", ImportOptions("customers"), now=NOW)
    assert (report.imported, report.updated, report.unchanged) == (44, 0, 0)
    stamp = _contacts(engine)["+12025550143"].updated_at
    later = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
    again = import_file(engine, SAMPLES / "contacts.csv", ImportOptions("customers"), now=later)
    assert (again.imported, again.updated, again.unchanged) == (0, 0, 44)
    assert _contacts(engine)["+12025550143"].updated_at == stamp  # not rewritten
    # one new attribute value, one new name: two updated; one number only written another
    # way (the same number: its formatting) is unchanged
    text = (SAMPLES / "contacts.csv").read_text(encoding="utf-8")
    text = text.replace("Noah Brown,212.555.0115,", "Noah B,212.555.0115,")
    text = text.replace(
        "Liam Smith,415-555-0178,San Francisco,basic", "Liam Smith,415-555-0178,San Francisco,gold"
    )
    text = text.replace("Emma Williams,+1 312 555 0190,", "Emma Williams,+13125550190,")
    changed = tmp_path / "changed.csv"
    changed.write_text(text, encoding="utf-8")
    third = import_file(engine, changed, ImportOptions("customers"), now=later)
    assert (third.imported, third.updated, third.unchanged) == (0, 2, 42)
    people = _contacts(engine)
    assert people["+12125550115"].name == "Noah B"
    assert people["+12125550115"].updated_at == later
    assert people["+12025550143"].updated_at == stamp
    assert people["+14155550178"].attributes["plan"] == "gold"
    # an empty cell or an empty name changes nothing
    blank = tmp_path / "blank.csv"
    blank.write_text("Name,Phone,City,Plan\n,415-555-0178,,\n", encoding="utf-8")
    fourth = import_file(engine, blank, ImportOptions("customers"), now=later)
    assert (fourth.updated, fourth.unchanged) == (0, 1)
    job = _jobs(engine)[-1]
    assert (job.updated, job.imported) == (0, 0)


def test_google_contacts_export_imports_the_mobile_numbers(engine: Engine) -> None:
    report = import_file(
        engine, SAMPLES / "google-contacts.csv", ImportOptions("google", region="GB"), now=NOW
    )
    assert (report.rows_read, report.imported, report.invalid) == (9, 8, 1)
    assert [(r.row_number, r.reason) for r in report.rejects] == [(10, "empty")]
    assert report.phone_column == "Phone 1 - Value, Phone 2 - Value, Phone 3 - Value"
    assert report.name_column == "Name (else Given Name + Family Name)"
    assert "phone_1_type" not in report.attribute_keys.values()
    people = {c.name: c for c in _contacts(engine).values()}
    assert {name: c.phone for name, c in people.items()} == {
        "Maria Fischer": "+4915123456789",
        "James Carter": "+12025550178",
        "Sophie Martin": "+33612345678",
        "Oliver Bennett": "+447911123460",
        "Priya Sharma": "+919876543210",
        "Tom Hughes": "+442079460999",
        "Lucas Silva": "+5511987654321",
        "Grace Lee": "+61491570156",
    }
    assert people["Sophie Martin"].raw_phone == "+33 6 12 34 56 78"
    assert people["Maria Fischer"].attributes["organization_1_name"] == "Fischer Bau"


def test_outlook_export_imports_the_mobile_numbers(engine: Engine) -> None:
    report = import_file(engine, SAMPLES / "outlook-contacts.csv", ImportOptions("o"), now=NOW)
    assert (report.rows_read, report.imported, report.invalid) == (6, 5, 1)
    assert report.phone_column.startswith("Mobile Phone, Primary Phone, Home Phone,")
    assert "Business Fax" in report.attribute_columns
    people = {c.name: c.phone for c in _contacts(engine).values()}
    assert people == {
        "Emily Johnson": "+12025550147",
        "Michael Brown": "+14155550132",
        "Hannah Müller": "+491701234567",
        "Daniel Smith": "+13125550190",
        "Chloe Davis": "+447911123461",
    }


def test_crm_phone_and_mobile_columns(sqlite_engine: Engine, tmp_path: Path) -> None:
    path = tmp_path / "crm.csv"
    path.write_text(
        "Name,Phone Number,Mobile Phone Number,Account Number\n"
        "Ann,(202) 555-0101,(202) 555-0147,A-1\n"
        "Ben,(202) 555-0102,,A-2\n"
        "Cy,,,A-3\n",
        encoding="utf-8",
    )
    report = import_file(sqlite_engine, path, ImportOptions("crm"), now=NOW)
    assert report.phone_column == "Mobile Phone Number, Phone Number"
    assert report.attribute_keys == {"Account Number": "account_number"}
    assert [(r.row_number, r.reason) for r in report.rejects] == [(4, "empty")]
    assert {c.name: c.phone for c in _contacts(sqlite_engine).values()} == {
        "Ann": "+12025550147",
        "Ben": "+12025550102",
    }


@pytest.mark.parametrize("suffix", [".csv", ".xlsx"])
def test_title_rows_above_the_header(sqlite_engine: Engine, tmp_path: Path, suffix: str) -> None:
    rows = [
        ["Customer export 2026-11"],
        [],
        ["Name", "Phone", "Type"],
        ["Ann", "+44 7911 123456", "mobile"],
        ["Ben", "call me", "home"],
    ]
    path = tmp_path / f"export{suffix}"
    if suffix == ".csv":
        path.write_text("\n".join(",".join(r) for r in rows) + "\n", encoding="utf-8")
    else:
        book = openpyxl.Workbook()
        sheet = book.active
        assert sheet is not None
        for r in rows:
            sheet.append(r)
        book.save(path)
    preview = preview_file(path, ImportOptions("t"))
    assert (preview.phone_column, preview.phones[0].e164) == ("Phone", "+447911123456")
    report = import_file(sqlite_engine, path, ImportOptions("t"), now=NOW)
    assert (report.imported, report.phone_column, report.columns) == (
        1,
        "Phone",
        ["Name", "Phone", "Type"],
    )
    assert [(r.row_number, r.reason) for r in report.rejects] == [(5, "contains letters")]


def test_a_data_row_mentioning_mobile_is_not_taken_for_the_header(tmp_path: Path) -> None:
    path = tmp_path / "odd.csv"
    path.write_text("Who,Kind,Contact\nAnn,mobile,+447911123456\n", encoding="utf-8")
    preview = preview_file(path, ImportOptions("t"))
    assert preview.columns == ["Who", "Kind", "Contact"]
    assert preview.problem is not None and "no phone column" in preview.problem


def _import_twice(engine: Engine, tmp_path: Path) -> None:
    """Import the sample into one list, then it and ten new numbers into another."""
    import_file(engine, SAMPLES / "contacts.csv", ImportOptions("first"), now=NOW)
    more = tmp_path / "more.csv"
    text = (SAMPLES / "contacts.csv").read_text(encoding="utf-8")
    more.write_text(text + "".join(f"New {i},+1 646 555 01{i:02d},,\n" for i in range(10)))
    report = import_file(engine, more, ImportOptions("second"), now=NOW)
    assert (report.imported, report.unchanged) == (10, 44)


def _orphans(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(
            conn.exec_driver_sql(
                "SELECT count(*) FROM list_members m"
                " LEFT JOIN contacts c ON c.id = m.contact_id"
                " LEFT JOIN lists l ON l.id = m.list_id WHERE c.id IS NULL OR l.id IS NULL"
            ).scalar_one()
        )


@pytest.mark.postgres
def test_a_trigger_of_its_own_on_list_members_still_fires(
    pg_engine: Engine, tmp_path: Path
) -> None:
    """The bulk path turns per-row triggers off only where the foreign keys' are the only
    ones: a deployment's own trigger (an audit log) sees every membership row."""
    with pg_engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE member_audit (contact_id bigint)")
        conn.exec_driver_sql(
            "CREATE FUNCTION audit() RETURNS trigger AS $$ BEGIN "
            "INSERT INTO member_audit VALUES (NEW.contact_id); RETURN NEW; END $$ "
            "LANGUAGE plpgsql"
        )
        conn.exec_driver_sql(
            "CREATE TRIGGER audit AFTER INSERT ON list_members "
            "FOR EACH ROW EXECUTE FUNCTION audit()"
        )
    _import_twice(pg_engine, tmp_path)
    with pg_engine.connect() as conn:
        audited = conn.exec_driver_sql("SELECT count(*) FROM member_audit").scalar_one()
    assert audited == len(_members(pg_engine, "first")) + len(_members(pg_engine, "second"))
    assert audited == 44 + 54
    assert _orphans(pg_engine) == 0


@pytest.mark.postgres
def test_a_role_that_may_not_skip_triggers_imports_the_same(
    pg_engine: Engine, tmp_path: Path
) -> None:
    """Without the right to set ``session_replication_role`` the import keeps PostgreSQL's
    foreign-key triggers on and stores the same."""
    role = f"gatecast_plain_{uuid.uuid4().hex[:8]}"
    with pg_engine.begin() as conn:
        conn.exec_driver_sql(f'CREATE ROLE "{role}" LOGIN')
        conn.exec_driver_sql(f'GRANT ALL ON ALL TABLES IN SCHEMA public TO "{role}"')
        conn.exec_driver_sql(f'GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO "{role}"')
        database = pg_engine.url.database
        conn.exec_driver_sql(f'GRANT CREATE, TEMPORARY ON DATABASE "{database}" TO "{role}"')
    plain = make_engine(pg_engine.url.set(username=role).render_as_string(False))
    try:
        with plain.connect() as conn:
            assert conn.exec_driver_sql("SHOW is_superuser").scalar_one() == "off"
        _import_twice(plain, tmp_path)
        assert len(_members(plain, "second")) == 54
        assert _orphans(plain) == 0
    finally:
        plain.dispose()
        with pg_engine.begin() as conn:
            conn.exec_driver_sql(f'DROP OWNED BY "{role}"')
            conn.exec_driver_sql(f'DROP ROLE "{role}"')


@pytest.mark.postgres
def test_imports_take_turns_so_a_contact_stored_meanwhile_counts_as_existing(
    pg_engine: Engine,
) -> None:
    """An import waits for the import lock before it counts new contacts: a contact
    another import stores meanwhile is updated, not inserted a second time."""
    outcome: dict[str, Any] = {}
    with pg_engine.connect() as other:
        with other.begin():
            other.execute(sa.select(sa.func.pg_advisory_xact_lock(q.IMPORT_LOCK)))
            q.upsert_contacts(
                other,
                [{"phone": "+12025550143", "raw_phone": "x", "name": "Early", "attributes": {}}],
                NOW,
            )

            def run() -> None:
                try:
                    outcome["report"] = import_file(
                        pg_engine, SAMPLES / "contacts.csv", ImportOptions("customers"), now=NOW
                    )
                except BaseException as exc:
                    outcome["error"] = exc

            thread = threading.Thread(target=run)
            thread.start()
            deadline = time.monotonic() + 60
            with pg_engine.connect() as watch:
                while time.monotonic() < deadline and "error" not in outcome:
                    waiting = watch.exec_driver_sql(
                        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"
                        " AND NOT granted AND database ="
                        " (SELECT oid FROM pg_database WHERE datname = current_database())"
                    ).scalar_one()
                    if waiting:
                        break
                    time.sleep(0.05)
                else:
                    pytest.fail(f"the import never waited for the lock: {outcome}")
        thread.join(60)
    assert "error" not in outcome, outcome
    report = outcome["report"]
    assert (report.imported, report.updated) == (43, 1)
    assert _contacts(pg_engine)["+12025550143"].name != "Early"


def _contact_scans(engine: Engine, inserted: int) -> int:
    """How many scans of ``contacts`` its statistics counted, once they show ``inserted``
    rows (each backend reports its counts when its connection closes)."""
    deadline = time.monotonic() + 30
    while True:
        with engine.connect() as conn:
            scans, rows = conn.exec_driver_sql(
                "SELECT seq_scan, n_tup_ins FROM pg_stat_user_tables WHERE relname = 'contacts'"
            ).one()
        if rows >= inserted or time.monotonic() > deadline:
            return int(scans)
        time.sleep(0.1)


@pytest.mark.postgres
def test_an_import_into_an_emptied_and_vacuumed_contacts_table_reads_it_once(
    pg_url: str, tmp_path: Path
) -> None:
    """Statistics that say ``contacts`` is empty made PostgreSQL plan the new contacts'
    anti-join as a nested loop that rescans ``contacts``, pages the insert itself adds
    included, once a staged row: a cost that grows with the square of the rows. An
    import of only new contacts needs no anti-join."""
    file = tmp_path / "people.csv"
    file.write_text("phone,name\n" + "".join(f"+1415555{i:04d},N{i}\n" for i in range(2000)))
    setup = make_engine(pg_url)
    upgrade(setup)
    with setup.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql("VACUUM ANALYZE contacts")
    before = _contact_scans(setup, 0)
    setup.dispose()
    importing = make_engine(pg_url)
    report = import_file(importing, file, ImportOptions("all"), now=NOW, catch_up=False)
    importing.dispose()  # its backend reports its statistics
    assert report.imported == 2000
    watch = make_engine(pg_url)
    try:
        assert _contact_scans(watch, 2000) - before < 20
    finally:
        watch.dispose()


@pytest.mark.postgres
def test_a_contact_added_during_an_import_waits_for_it(pg_engine: Engine, tmp_path: Path) -> None:
    """An import counts a phone new from its snapshot; a contact added meanwhile with one
    of its phones made its insert fail on the unique phone and the whole import roll back.
    An add now waits for the running import (the import lock, shared), then finds the
    phone stored."""
    outcome: dict[str, Any] = {}
    with pg_engine.connect() as holder, holder.begin():  # an import in progress
        holder.execute(sa.select(sa.func.pg_advisory_xact_lock(q.IMPORT_LOCK)))

        def add() -> None:
            try:
                contacts.add_contact(pg_engine, "+12025550143", region="US", now=NOW)
            except BaseException as exc:
                outcome["error"] = exc
            outcome["done"] = True

        thread = threading.Thread(target=add)
        thread.start()
        deadline = time.monotonic() + 30
        with pg_engine.connect() as watch:
            while time.monotonic() < deadline:
                waiting = watch.exec_driver_sql(
                    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
                    " AND database = (SELECT oid FROM pg_database"
                    " WHERE datname = current_database())"
                ).scalar_one()
                if waiting or "done" in outcome:
                    break
                time.sleep(0.05)
        assert "done" not in outcome, "the add did not wait for the import"
        q.upsert_contacts(  # what the import stores before it commits
            holder,
            [{"phone": "+12025550143", "raw_phone": "x", "name": "Imported", "attributes": {}}],
            NOW,
        )
    thread.join(30)
    assert isinstance(outcome.get("error"), contacts.ContactError), outcome
    assert "already a contact" in str(outcome["error"])


def test_columns_mapped_renamed_or_left_out_and_placeholders_empty(
    tmp_path: Path, sqlite_engine: Engine
) -> None:
    path = tmp_path / "people.csv"
    path.write_text(
        "Name,Phone,City,Notes,Plan\n"
        "null,+447911123456,Leeds,x,N/A\n"
        "Ana,+447911123457,#N/A,y,gold\n",
        encoding="utf-8",
    )
    opts = ImportOptions("m", attributes=(("city", "Home Town"), ("Notes", "")))
    report = import_file(sqlite_engine, path, opts)
    assert report.attribute_keys == {"City": "home_town", "Plan": "plan"}
    people = _contacts(sqlite_engine)
    assert (people["+447911123456"].name, people["+447911123456"].attributes) == (
        "",
        {"home_town": "Leeds"},
    )
    assert people["+447911123457"].attributes == {"plan": "gold"}
    with pytest.raises(ImportFailed, match="both mapped"):
        import_file(sqlite_engine, path, replace(opts, attributes=(("City", "a"), ("Plan", "A"))))
