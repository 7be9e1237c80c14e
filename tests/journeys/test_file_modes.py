"""Journey: what gatecast writes on a fresh folder is its owner's only (issue 27).

On the first start of ``gatecast serve`` (which creates and upgrades its SQLite database
through the same engine as ``gatecast db upgrade``) the database and its ``-wal`` and
``-shm`` files, the generated API key and webhook secret, and the webhook journal are
created 0600, even under a permissive umask.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from gatecast.runtime.webhooks import SECRET_FILE_NAME
from gatecast.web.auth import KEY_FILE_NAME
from storage.journal import Journal
from tests.journeys.harness import Workspace


@pytest.fixture
def open_umask() -> Iterator[None]:
    """Processes started here create files 0644 unless gatecast says otherwise."""
    before = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(before)


def _mode(path: Path) -> str:
    return oct(stat.S_IMODE(path.stat().st_mode))


def test_a_fresh_folder_gets_private_files(ws: Workspace, open_umask: None) -> None:
    database = ws.path / "gatecast.db"
    assert not database.exists()
    server = ws.serve(GATECAST_API_KEY="")  # no key set: one is generated into a file
    with server.api(key=None) as anonymous:
        assert anonymous.get("/healthz").status_code == 200
    written = {
        p.name: _mode(p)
        for p in (
            database,
            Path(f"{database}-wal"),
            Path(f"{database}-shm"),
            ws.path / KEY_FILE_NAME,
            ws.path / SECRET_FILE_NAME,
        )
    }
    assert written == dict.fromkeys(written, "0o600"), written
    server.stop()
    journal = Journal(ws.path / "journal" / "gatecast-webhook-journal.jsonl")
    journal.append(['{"event": 1}'])
    assert _mode(journal.path) == "0o600"
