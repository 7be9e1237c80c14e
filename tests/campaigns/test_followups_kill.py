"""A process SIGKILLed while it evaluates follow-up steps (decision 70) sends no step
twice and skips none: killed in the middle of a step's transaction (its rows written, not
committed), the evaluation run again makes exactly one row for each contact due."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from sqlalchemy import Engine, func, select, update

from campaigns import followups
from campaigns.campaign_file import parse_campaign
from campaigns.service import create_campaign
from scheduler.starts import start_campaign
from storage import tables
from tests.campaigns.campaign_fixtures import NOW, kill_when_ready, make_list, people

PEOPLE = 130
SENT = NOW + timedelta(minutes=1)
LATER = SENT + timedelta(days=3)

CHILD = """
import sys, time
from datetime import datetime
from pathlib import Path
from campaigns import followups
from storage.engine import make_engine
from storage.queries import deliveries as dq

url, now, ready = sys.argv[1], datetime.fromisoformat(sys.argv[2]), Path(sys.argv[3])
followups.BATCH = 50
insert = dq.insert_new_deliveries
batches = []

def insert_then_wait(conn, rows, *args, **kwargs):
    insert(conn, rows, *args, **kwargs)
    batches.append(len(rows))
    if len(batches) == 2:  # the second batch written, its transaction still open
        ready.write_text(str(len(rows)))
        time.sleep(60)

dq.insert_new_deliveries = insert_then_wait
engine = make_engine(url)
while followups.evaluate(engine, now):
    pass
"""

_d = tables.deliveries
_c = tables.campaigns


def _campaign(engine: Engine) -> int:
    make_list(engine, "customers", people(PEOPLE))
    spec = parse_campaign(
        {
            "name": "invite",
            "list": "customers",
            "message": {"type": "text", "text": "Hello {{ name }}"},
            "steps": [
                {"when": "no_reply", "after": "2d", "message": {"type": "text", "text": "Again"}}
            ],
        }
    )
    with engine.begin() as conn:
        conn.execute(
            tables.instances.insert().values(
                instance_id="AAA", state="connected", created_at=NOW, updated_at=NOW
            )
        )
    cid = create_campaign(engine, spec, now=NOW).id
    start_campaign(engine, cid, now=NOW)
    with engine.begin() as conn:
        conn.execute(
            update(_d)
            .where(_d.c.campaign_id == cid)
            .values(state="sent", sent_at=SENT, attempted_at=SENT, sender="AAA")
        )
    return cid


def _step_rows(engine: Engine, cid: int) -> list[tuple[str, int]]:
    with engine.connect() as conn:
        found = conn.execute(
            select(_d.c.target, func.count())
            .select_from(_d.join(_c, _c.c.id == _d.c.campaign_id))
            .where(_c.c.step_of == cid)
            .group_by(_d.c.target)
        )
        return [(str(target), int(n)) for target, n in found]


def test_sigkill_during_evaluation_sends_no_step_twice_and_skips_none(
    engine: Engine, tmp_path: Path
) -> None:
    cid = _campaign(engine)
    ready = tmp_path / "ready"
    url = engine.url.render_as_string(hide_password=False)
    args = [CHILD, url, LATER.isoformat(), str(ready)]
    kill_when_ready(args, ready, "its second batch")
    # the first batch committed, the second (written when killed) not
    assert len(_step_rows(engine, cid)) == 50
    while followups.evaluate(engine, LATER):  # the next process evaluates again
        pass
    rows = _step_rows(engine, cid)
    assert len(rows) == PEOPLE  # none skipped
    assert {n for _, n in rows} == {1}  # none twice
    with engine.connect() as conn:
        children = conn.execute(select(func.count()).where(_c.c.step_of == cid)).scalar_one()
    assert children == 1
