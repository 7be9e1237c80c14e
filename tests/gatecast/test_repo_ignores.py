"""The files gatecast writes into the folder it runs in (secrets, the SQLite database, the
receiver's journal and sockets) are ignored by git, and none is tracked: a `git add .` in
a checkout where gatecast ran never commits a secret or a runtime file."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from campaigns.inbox.journal import JOURNAL_FILE
from gatecast.intake.supervisor import CONTROL_FILE as INTAKE_SOCKET
from gatecast.intake.supervisor import WEB_FILE
from gatecast.runtime.receiver_control import CONTROL_FILE as RECEIVER_SOCKET
from gatecast.runtime.webhooks import SECRET_FILE_NAME
from gatecast.web.auth import KEY_FILE_NAME

ROOT = Path(__file__).resolve().parents[2]
#: what a gatecast run in the project's folder leaves there
RUNTIME_FILES = (
    SECRET_FILE_NAME,
    KEY_FILE_NAME,
    "gatecast.db",
    "gatecast.db-wal",
    JOURNAL_FILE,
    RECEIVER_SOCKET,
    INTAKE_SOCKET,
    WEB_FILE,
)

pytestmark = pytest.mark.skipif(
    shutil.which("git") is None or not (ROOT / ".git").exists(), reason="not a git checkout"
)


def _git(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=False
    )


@pytest.mark.parametrize("name", RUNTIME_FILES)
def test_a_runtime_file_is_ignored_and_not_tracked(name: str) -> None:
    ignored = _git("check-ignore", "--no-index", "-q", name)
    assert ignored.returncode == 0, f"{name} is not ignored by .gitignore"
    assert _git("ls-files", "--", name).stdout == "", f"{name} is tracked"
