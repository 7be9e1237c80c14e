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
    assert _after_command(argv, WEB_AND_SHEETS, user_env) == []


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
