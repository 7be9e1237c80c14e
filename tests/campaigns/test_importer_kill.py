"""A process killed in the middle of an import's transaction leaves nothing written."""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa

from campaigns.import_runs import INTERRUPTED
from campaigns.importer import ImportOptions, import_file
from storage.engine import make_engine, upgrade
from storage.queries import contacts as q
from tests.campaigns.campaign_fixtures import kill_when_ready

CHILD = """
import sys, time
from pathlib import Path
from campaigns.importer import ImportOptions, import_file
from storage.engine import make_engine

url, path, ready = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])

def progress(done: int, total: int) -> None:
    if done > 2500:  # the write phase: several batches already sent to the database
        ready.write_text(str(done))
        time.sleep(60)

import_file(make_engine(url), path, ImportOptions("killed"), progress=progress, batch_size=100)
"""


def test_sigkill_during_import_leaves_nothing(db_url: str, tmp_path: Path) -> None:
    engine = make_engine(db_url)
    upgrade(engine)
    path = tmp_path / "big.csv"
    path.write_text(
        "phone,name\n" + "".join(f"+1 202 555 {i:04d},P{i}\n" for i in range(2000)),
        encoding="utf-8",
    )
    ready = tmp_path / "ready"
    kill_when_ready([CHILD, db_url, str(path), str(ready)], ready, "the import's write phase")
    with engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(q.contacts)).scalar() == 0
        assert conn.execute(sa.select(sa.func.count()).select_from(q.lists)).scalar() == 0
        jobs = conn.execute(sa.text("SELECT status FROM imports")).scalars().all()
    assert jobs == ["running"]  # the job row says it never finished; nothing else was written
    # the next import marks the killed one failed, then runs normally
    small = tmp_path / "small.csv"
    small.write_text("phone\n+1 202 555 0100\n", encoding="utf-8")
    report = import_file(engine, small, ImportOptions("after"))
    with engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT id, status, error FROM imports ORDER BY id")).all()
    assert [(r.status, r.error) for r in rows] == [("failed", INTERRUPTED), ("completed", None)]
    assert rows[1].id == report.import_id
    engine.dispose()
