"""The CLI starts without the heavy libraries: each command imports what it uses when it runs.

Every check runs in a fresh interpreter (this test process has long imported everything).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GATECAST = Path(sys.executable).with_name("gatecast")

#: what no command needs just to start (``--help``, argument parsing)
HEAVY = ("fastapi", "pandas", "uvicorn", "openpyxl", "sqlmodel", "sqlalchemy", "httpx")
#: what a command that only reads the database must not import
WEB_AND_SHEETS = ("fastapi", "starlette", "pandas", "numpy", "uvicorn", "openpyxl")
#: what ``campaign show`` must not import either: the gateway's HTTP client, the schema
#: migrations (the check reads one row), PostgreSQL's driver on SQLite, the scheduler
#: process, phone number metadata, the report writers (docs/architecture.md, decision 38),
#: SQLModel and the ORM (queries use the Core tables of ``storage.tables``: decision 44),
#: the campaign write path and the spec's validation (read as stored: decision 54) and a
#: running campaign's hold rules (a scheduled campaign's hold is its state)
NOT_FOR_SHOW = (
    *WEB_AND_SHEETS,
    "sqlmodel",
    "sqlalchemy.orm",
    "storage.models",
    "httpx",
    "httpcore",
    "tenacity",
    "alembic",
    "psycopg",
    "apscheduler",
    "phonenumbers",
    "gateway.client",
    "campaigns.reports",
    "campaigns.service",
    "campaigns.campaign_file",
    "campaigns.delivery_lifecycle",
    "jinja2",
    "scheduler.warmup",
    "scheduler.health",
)
#: the ORM layer: no command that only reads imports it (decision 44)
ORM = ("sqlmodel", "sqlalchemy.orm", "storage.models")
#: everything heavy: what ``gatecast --version`` (answered before the CLI is built) must
#: not import
ALL_HEAVY = (*NOT_FOR_SHOW, "typer", "click", "rich", "pydantic", "sqlalchemy")

_RUN = """
import json, sys
from gatecast.cli import app
try:
    app(json.loads(sys.argv[1]), standalone_mode=False)
except SystemExit:
    pass
print(json.dumps(sorted(m for m in json.loads(sys.argv[2]) if m in sys.modules)))
"""


def _imported(code: str, *args: str, env: dict[str, str] | None = None) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    imported: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return imported


#: as the console script runs: ``gatecast.entry.main`` with ``sys.argv``, the audit
#: log's look at the command included
_RUN_SCRIPT = """
import json, sys
argv, modules = json.loads(sys.argv[1]), json.loads(sys.argv[2])
sys.argv = ["gatecast", *argv]
from gatecast.entry import main
try:
    main()
except SystemExit:
    pass
print(json.dumps(sorted(m for m in modules if m in sys.modules)))
"""


def _after_script(argv: list[str], modules: tuple[str, ...], env: dict[str, str]) -> list[str]:
    return _imported(_RUN_SCRIPT, json.dumps(argv), json.dumps(modules), env=env)


def _after_command(argv: list[str], modules: tuple[str, ...], env: dict[str, str]) -> list[str]:
    return _imported(_RUN, json.dumps(argv), json.dumps(modules), env=env)


@pytest.fixture
def user_env(tmp_path: Path) -> dict[str, str]:
    """A user's environment with an empty database of their own (made by ``db upgrade``:
    a command that only reads ends at once where there is none)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GATECAST_")}
    env["GATECAST_DATABASE_URL"] = f"sqlite:///{tmp_path / 'gatecast.db'}"
    made = subprocess.run(
        [str(GATECAST), "db", "upgrade"], env=env, capture_output=True, text=True, timeout=120
    )
    assert made.returncode == 0, made.stderr
    return env


@pytest.fixture(scope="module")
def campaign_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A user's database with a list and a scheduled campaign (id 1) in it, made with
    the CLI: ``campaign show 1`` then reads a real campaign, holds and counts."""
    folder = tmp_path_factory.mktemp("campaign")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GATECAST_")}
    env["GATECAST_DATABASE_URL"] = f"sqlite:///{folder / 'gatecast.db'}"
    spec = folder / "campaign.toml"
    spec.write_text(
        'name = "Start-up"\nlist = "customers"\n[message]\ntype = "text"\ntext = "Hi"\n'
        '[schedule]\nstart = "tomorrow 10:00"\n',
        encoding="utf-8",
    )
    for argv in (
        ["contacts", "import", str(ROOT / "samples" / "contacts.csv"), "--list", "customers"],
        ["campaign", "create", str(spec)],
    ):
        done = subprocess.run(
            [str(GATECAST), *argv], env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
    return env


def test_version_is_answered_before_any_heavy_library(user_env: dict[str, str]) -> None:
    """``gatecast --version`` imports neither Typer nor Rich nor the database libraries."""
    assert _after_script(["--version"], ALL_HEAVY, user_env) == []


def test_the_quick_version_is_the_version_option_s(user_env: dict[str, str]) -> None:
    """The console script's quick answer and the CLI's ``--version`` option print one line."""
    quick = subprocess.run(
        [str(GATECAST), "--version"], env=user_env, capture_output=True, text=True, timeout=120
    )
    built = subprocess.run(
        [sys.executable, "-c", "from gatecast.cli import app; app(['--version'])"],
        env=user_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert quick.returncode == built.returncode == 0, (quick.stderr, built.stderr)
    assert quick.stdout == built.stdout
    assert quick.stdout.startswith("gatecast "), quick.stdout


@pytest.mark.parametrize("argv", [["--help"], ["campaign", "--help"]], ids=" ".join)
def test_help_through_the_script_imports_nothing_a_show_does_not(
    argv: list[str], user_env: dict[str, str]
) -> None:
    assert _after_script(argv, (*HEAVY, *NOT_FOR_SHOW), user_env) == []


def test_campaign_show_of_a_real_campaign_imports_only_what_it_reads(
    campaign_env: dict[str, str],
) -> None:
    """``campaign show`` of a scheduled campaign (its holds, counts and spec read) as the
    console script runs it, the audit log's look at the command included."""
    assert _after_script(["campaign", "show", "1"], NOT_FOR_SHOW, campaign_env) == []
    shown = subprocess.run(
        [str(GATECAST), "campaign", "show", "1"],
        env=campaign_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shown.returncode == 0, shown.stderr
    assert "Campaign 1: Start-up" in shown.stdout, shown.stdout


def test_importing_the_cli_imports_no_heavy_library() -> None:
    code = (
        "import gatecast.cli, json, sys; "
        f"print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))"
    )
    assert _imported(code) == []


@pytest.mark.parametrize(
    "argv",
    [["--help"], ["campaign", "--help"], ["contacts", "--help"], ["instance", "--help"]],
    ids=" ".join,
)
def test_help_imports_no_heavy_library(argv: list[str], user_env: dict[str, str]) -> None:
    assert _after_command(argv, HEAVY, user_env) == []


@pytest.mark.parametrize(
    "argv",
    [
        ["campaign", "list"],
        ["campaign", "show", "1"],
        ["instance", "status"],
        ["contacts", "lists"],
    ],
    ids=" ".join,
)
def test_database_commands_import_no_web_or_spreadsheet_library(
    argv: list[str], user_env: dict[str, str]
) -> None:
    assert _after_command(argv, (*WEB_AND_SHEETS, *ORM), user_env) == []


#: what a listing does not import either: the campaign write path, the spec's models
NOT_FOR_LISTINGS = (*WEB_AND_SHEETS, *ORM, "campaigns.service", "campaigns.campaign_file", "jinja2")


@pytest.mark.parametrize("argv", [["campaign", "list"], ["contacts", "lists"]], ids=" ".join)
def test_listings_of_real_rows_import_no_orm(argv: list[str], campaign_env: dict[str, str]) -> None:
    """``campaign list`` and ``contacts lists`` read real rows through the Core tables."""
    assert _after_script(argv, NOT_FOR_LISTINGS, campaign_env) == []
    shown = subprocess.run(
        [str(GATECAST), *argv], env=campaign_env, capture_output=True, text=True, timeout=120
    )
    assert shown.returncode == 0, shown.stderr
    assert ("Start-up" if argv[0] == "campaign" else "customers") in shown.stdout


def test_campaign_list_really_ran(user_env: dict[str, str]) -> None:
    """The import check above is only worth something if the command does its work."""
    done = subprocess.run(
        [str(GATECAST), "campaign", "list", "--json"],
        cwd=ROOT,
        env=user_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []


def test_a_command_builds_only_its_own_branch_of_the_tree() -> None:
    """Typer builds every command an app holds before it parses: the console script
    hands it the app narrowed to the words of the command line (decision 54)."""
    from typer.main import get_command

    from gatecast.cli import app, for_command

    def names(argv: list[str]) -> dict[str, list[str]]:
        root = get_command(for_command(app, argv))
        groups = root.commands  # type: ignore[attr-defined]
        return {n: sorted(getattr(c, "commands", {})) for n, c in groups.items()}

    everything = names([])
    assert len(everything) > 10 and len(everything["campaign"]) > 10
    assert names(["campaign", "show", "1"]) == {"campaign": ["show"]}
    assert names(["users", "key", "list"]) == {"users": ["key"]}
    assert names(["serve", "--sandbox"]) == {"serve": []}
    # the group's own help, an option or a word that names nothing: the whole level
    assert names(["campaign", "--help"]) == {"campaign": everything["campaign"]}
    assert names(["campaign", "shwo", "1"]) == {"campaign": everything["campaign"]}
    assert names(["--help"]) == everything
    assert names([]) == everything  # the app itself is left whole


def test_a_mistyped_command_is_answered_from_the_whole_group(user_env: dict[str, str]) -> None:
    done = subprocess.run(
        [str(GATECAST), "campaign", "shwo", "1"],
        env=user_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert "No such command 'shwo'" in done.stderr, done.stderr
