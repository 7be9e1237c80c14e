"""vCard files read as the importer's table, and imported (cards, opt-out files) on real
SQLite files and a real PostgreSQL database."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy import Engine

from campaigns.importer import ImportFailed, ImportOptions, import_file, preview_file
from campaigns.spreadsheets import SpreadsheetError, TableLimits
from campaigns.vcards import read_vcards
from storage import tables
from storage.queries import contacts as q

SAMPLES = Path(__file__).resolve().parents[2] / "samples"


def _write(tmp_path: Path, text: str, name: str = "c.vcf", encoding: str = "utf-8") -> Path:
    path = tmp_path / name
    path.write_bytes(text.replace("\n", "\r\n").encode(encoding))
    return path


def test_the_sample_reads_every_version_folding_and_quoted_printable() -> None:
    frame = read_vcards(SAMPLES / "contacts.vcf").frame
    rows = {
        int(i): tuple(r) for i, r in zip(frame.index, frame.itertuples(index=False), strict=True)
    }
    assert rows == {
        1: ("Jürgen Müller", "+44 7911 123456", "Acme Ltd"),  # 2.1 QP; CELL;PREF over HOME
        2: ("Ngozi Okafor", "+1 (202) 555-0147", ""),  # 2.1 N only; CELL over WORK
        3: (
            "Björn Åström, Sales Director Northern Europe",
            "+46 70 123 45 67",
            "",
        ),  # QP soft break
        4: ("Ana Silva", "+55 11 91234-5678", "Padaria Silva, Vendas"),  # 3.0 TYPE=CELL
        5: ("Priya Raman", "+91 98765 43210", ""),  # type=cell over type=pref
        6: ("No Number Person", "", ""),
        7: ("Chen Wei", "+86-138-0013-8000", "Wei Trading, Ltd"),  # 4.0 tel: URI
        8: ("Fatima Zahra", "+212-661-234567", ""),  # 4.0 PREF=1 over home
    }


def test_pref_wins_over_home_and_work_and_n_builds_the_name(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "BEGIN:VCARD\nVERSION:3.0\nN:Doe;Jane;Q.;Dr.;\nTEL;TYPE=HOME:111\nTEL;TYPE=WORK:222\n"
        "TEL;TYPE=VOICE,PREF:333\nEND:VCARD\n"
        "BEGIN:VCARD\nVERSION:3.0\nFN:Folded\n  Name\nTEL;TYPE=FAX:444\nTEL;TYPE=HOME:555\n"
        "END:VCARD\n",
    )
    frame = read_vcards(path).frame
    assert frame["name"].tolist() == ["Jane Q. Doe", "Folded Name"]
    assert frame["phone"].tolist() == ["333", "555"]


def test_cp1252_file_and_text_outside_cards(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "exported by a phone\nBEGIN:VCARD\nVERSION:2.1\nFN:Zoë\n"
        "TEL;CELL:+447911123456\nEND:VCARD\n",
        encoding="cp1252",
    )
    assert read_vcards(path).frame["name"].tolist() == ["Zoë"]


def test_limits_refuse_too_many_cards_and_long_lines(tmp_path: Path) -> None:
    card = "BEGIN:VCARD\nVERSION:3.0\nFN:A\nTEL:+447911123456\nEND:VCARD\n"
    path = _write(tmp_path, card * 3)
    with pytest.raises(SpreadsheetError, match="more than 2 cards, over the import limit"):
        read_vcards(path, limits=TableLimits(rows=2))
    long = _write(tmp_path, card + card.replace("FN:A", "FN:" + "x" * 50), "long.vcf")
    with pytest.raises(SpreadsheetError, match="card 2, line 8: a line of 53 characters"):
        read_vcards(long, limits=TableLimits(cell_chars=40))


def test_a_file_without_cards_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path, "name,phone\nA,+447911123456\n")
    with pytest.raises(SpreadsheetError, match="no contact cards"):
        read_vcards(path)


def test_import_and_preview_of_the_sample(engine: Engine) -> None:
    opts = ImportOptions(list_name="phone")
    preview = preview_file(SAMPLES / "contacts.vcf", opts)
    assert (preview.phone_column, preview.name_column) == ("phone", "name")
    report = import_file(engine, SAMPLES / "contacts.vcf", opts)
    assert (report.record, report.rows_read, report.imported, report.invalid) == ("card", 8, 7, 1)
    assert [(r.row_number, r.raw["name"], r.reason) for r in report.rejects] == [
        (6, "No Number Person", "empty")
    ]
    with engine.connect() as conn:
        stored = {r.phone: r for r in conn.execute(sa.select(q.contacts))}
    assert stored["+447911123456"].name == "Jürgen Müller"
    assert stored["+447911123456"].attributes == {"organisation": "Acme Ltd"}
    assert stored["+8613800138000"].name == "Chen Wei"


def test_opt_out_file_creates_and_opts_out_without_a_list(engine: Engine, tmp_path: Path) -> None:
    known = tmp_path / "known.csv"
    known.write_text("phone,name\n+14155550101,Ana\n+14155550102,Ben\n", encoding="utf-8")
    import_file(engine, known, ImportOptions(list_name="customers"))
    optout = tmp_path / "stop.csv"
    optout.write_text("phone\n+14155550101\n+14155550199\nnope\n", encoding="utf-8")
    report = import_file(engine, optout, ImportOptions(list_name="", opt_out=True))
    assert (report.imported, report.updated, report.unchanged, report.invalid) == (1, 1, 0, 1)
    again = import_file(engine, optout, ImportOptions(list_name="", opt_out=True))
    assert (again.imported, again.updated, again.unchanged) == (0, 0, 2)
    with engine.connect() as conn:
        stored = {r.phone: r for r in conn.execute(sa.select(q.contacts))}
        lists = conn.execute(sa.select(sa.func.count()).select_from(q.lists)).scalar_one()
        job = conn.execute(
            sa.select(tables.imports.c.list_id).where(tables.imports.c.id == report.import_id)
        )
        assert job.scalar_one() is None
    assert lists == 1  # no list made for the opt-out file
    assert stored["+14155550101"].opted_out and stored["+14155550199"].opted_out
    assert stored["+14155550101"].name == "Ana"  # nothing else of a known contact changes
    assert stored["+14155550101"].opt_out_reason == "opt-out file"
    assert not stored["+14155550102"].opted_out


def test_a_broken_vcard_fails_the_import_naming_the_file(engine: Engine, tmp_path: Path) -> None:
    path = _write(tmp_path, "hello\n")
    with pytest.raises(ImportFailed, match=r"c\.vcf: no contact cards"):
        import_file(engine, path, ImportOptions(list_name="x"))
