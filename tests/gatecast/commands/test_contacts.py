"""``gatecast contacts`` end to end on a real SQLite file."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gatecast.cli import app
from gatecast.settings import get_settings

SAMPLES = Path(__file__).resolve().parents[3] / "samples"
runner = CliRunner()


@pytest.fixture(autouse=True)
def _database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GATECAST_DATABASE_URL", f"sqlite:///{tmp_path / 'cli.db'}")
    monkeypatch.setenv("GATECAST_DEFAULT_REGION", "US")
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def _run(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_import_json_and_rejects_file(tmp_path: Path) -> None:
    rejects = tmp_path / "rejects.csv"
    code, out, _ = _run(
        "contacts", "import", str(SAMPLES / "contacts.csv"), "--list", "customers",
        "--rejects", str(rejects), "--json",
    )  # fmt: skip
    assert code == 0
    summary = json.loads(out)
    assert {k: summary[k] for k in ("rows_read", "imported", "duplicates", "invalid")} == {
        "rows_read": 50,
        "imported": 44,
        "duplicates": 2,
        "invalid": 4,
    }
    assert summary["rejects_file"] == str(rejects)
    assert rejects.read_text().splitlines()[0] == "row_number,column,reason,Name,Phone,City,Plan"


def test_import_table_lists_show_optout_optin() -> None:
    code, out, _ = _run(
        "contacts", "import", str(SAMPLES / "messy-contacts.csv"), "--list", "uk", "--region", "gb"
    )
    assert code == 0
    assert "imported (new)" in out and "row 9 Teléfono: digits lost to scientific notation" in out
    code, out, _ = _run("contacts", "lists", "--json")
    assert code == 0
    assert [(s["name"], s["members"]) for s in json.loads(out)] == [("uk", 8)]
    code, out, _ = _run("contacts", "optout", "+44 7911 123457", "--reason", "asked by phone")
    assert (code, out.strip()) == (0, "+447911123457 opted out")
    code, out, _ = _run("contacts", "show", "+447911123457", "--json")
    shown = json.loads(out)
    assert (shown["opted_out"], shown["opt_out_reason"], shown["lists"]) == (
        True,
        "asked by phone",
        ["uk"],
    )
    assert shown["attributes"] == {"ciudad": "Leeds", "plan_type": "premium"}
    code, out, _ = _run("contacts", "lists")
    assert code == 0 and "uk" in out
    code, out, _ = _run("contacts", "optin", "+447911123457")
    assert (code, out.strip()) == (0, "+447911123457 opted back in")


def test_xlsx_sheet_by_number() -> None:
    code, out, _ = _run(
        "contacts", "import", str(SAMPLES / "contacts.xlsx"), "--list", "x", "--sheet", "1",
        "--json",
    )  # fmt: skip
    assert code == 0 and json.loads(out)["imported"] == 44


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["contacts", "import", "missing.csv", "--list", "x"], "missing.csv: no such file"),
        (
            [
                "contacts",
                "import",
                str(SAMPLES / "contacts.csv"),
                "--list",
                "x",
                "--phone-column",
                "Tel",
            ],
            "no column named 'Tel' for the phone number; columns: Name, Phone, City, Plan",
        ),
        (
            [
                "contacts",
                "import",
                str(SAMPLES / "contacts.xlsx"),
                "--list",
                "x",
                "--sheet",
                "Nope",
            ],
            "no sheet named 'Nope'; sheets: Contacts, Notes",
        ),
        (["contacts", "show", "+44 7911 123456"], "no contact with phone +447911123456"),
        (["contacts", "optout", "hello"], "'hello' is not a usable phone number: contains letters"),
        (["contacts", "optin", "+1 202 555 0143"], "no contact with phone +12025550143"),
    ],
)
def test_bad_input_exits_1_with_one_line_error(args: list[str], message: str) -> None:
    assert _run("db", "upgrade")[0] == 0  # a database to look in (a read never makes one)
    code, out, err = _run(*args)
    assert code == 1
    assert message in " ".join(err.split())
    assert "Traceback" not in err + out


def test_erase_says_every_count_it_removed() -> None:
    """The human message names what ``--json`` counts: audit entries, outbound webhook
    messages and test sends too, never the number."""
    code, _, _ = _run(
        "contacts", "import", str(SAMPLES / "messy-contacts.csv"), "--list", "uk", "--region", "gb"
    )
    assert code == 0
    code, out, _ = _run("contacts", "erase", "+447911123457", "--yes")
    assert code == 0, out
    message = " ".join(out.split())
    for said in (
        "1 list/tag/audience rows",
        "0 audit entries scrubbed",
        "0 stored API answers",
        "0 outbound webhook messages",
        "0 test sends removed",
    ):
        assert said in message, message
    assert "7911" not in message, message
