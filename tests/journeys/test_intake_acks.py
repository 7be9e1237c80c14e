"""An acknowledged event is a stored event, even when the intake dies mid-batch.

The gateway posts status events and STOP replies from 16 connections at once to
``gatecast serve``'s intake (so requests wait together on the batches being committed,
several at once on PostgreSQL), and the intake's handler is SIGKILLed while they flow;
the posting goes on against the spare that takes over. Whatever was in flight at the kill
may be lost, unanswered (a gateway's timeout); every event that was answered 200 is in
the database, and every acknowledged STOP is stored as an opt-out. SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from gateway.sandbox.events_out import incoming_body, status_body
from storage import tables
from tests.journeys.harness import Process, Workspace, wait_for, workspace

SECRET = "intake-acks-secret-0123456789abcdef"
#: posting connections, and the posts each makes (every tenth a STOP reply)
CLIENTS = 16
POSTS = 60


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def acks_ws(
    request: pytest.FixtureRequest, tmp_path: Path, sandbox_process: Process
) -> Iterator[Workspace]:
    """A workspace on SQLite, or on a fresh PostgreSQL database (``pg_url``)."""
    settings = {"GATECAST_WEBHOOK_SECRET": SECRET}
    if request.param == "postgresql":
        settings["GATECAST_DATABASE_URL"] = request.getfixturevalue("pg_url")
    with workspace(tmp_path / "work", sandbox_process.url, **settings) as ws:
        if request.param == "postgresql":
            ws.run("db", "upgrade")
        yield ws


def _body(sender: str, client: int, k: int) -> tuple[str, bytes]:
    """Post ``k`` of ``client``: a status event, every tenth a STOP; (its id, its body)."""
    message_id = f"ack-{client}-{k}"
    digits = f"3161{client:02d}{k:05d}"
    if k % 10 == 9:
        body = incoming_body("spec", sender, message_id, digits, "STOP", 1_700_000_000)
    else:
        status = "delivered" if k % 2 else "read"
        body = status_body("spec", sender, message_id, f"{digits}@s.whatsapp.net", status, 0)
    return message_id, json.dumps(body).encode()


@pytest.mark.slow  # a serve, a linked sender and a kill per database: about a minute each
def test_every_acknowledged_event_is_stored_when_the_handler_dies_mid_batch(
    acks_ws: Workspace,
) -> None:
    ws = acks_ws
    sender = ws.link_sender()  # the intake stores only the events of senders it holds
    server = ws.serve()
    first = ws.intake()
    assert first is not None
    url = f"{server.url}/webhooks/gateway/{SECRET}"
    acked: set[str] = set()
    lost: list[str] = []
    lock = threading.Lock()

    def post(client: int) -> None:
        with httpx.Client(timeout=60) as http:
            for k in range(POSTS):
                message_id, body = _body(sender, client, k)
                try:
                    answer = http.post(url, content=body)
                except httpx.HTTPError as exc:  # in flight at the kill: never answered
                    lost.append(f"{message_id}: {exc!r}")
                    continue
                if answer.status_code == 200:
                    with lock:
                        acked.add(message_id)

    clients = [threading.Thread(target=post, args=(c,)) for c in range(CLIENTS)]
    for thread in clients:
        thread.start()
    wait_for(lambda: len(acked) >= CLIENTS * POSTS // 4, timeout=120, what="posts answered")
    os.kill(first.handler, signal.SIGKILL)  # requests in flight, batches committing
    for thread in clients:
        thread.join()
    again = wait_for(
        lambda: (r := ws.intake()) is not None and r.handler != first.handler and r,
        timeout=60,
        what="the spare serving",
    )
    assert again.pid == first.pid
    assert server.stop() == 0

    engine = sa.create_engine(ws.database_url)
    try:
        with engine.connect() as conn:
            statuses = set(conn.execute(sa.select(tables.status_events.c.message_id)).scalars())
            replies = conn.execute(
                sa.select(
                    tables.inbound_messages.c.message_id, tables.inbound_messages.c.is_opt_out
                )
            ).all()
    finally:
        engine.dispose()
    stops = {str(m) for m, is_stop in replies if is_stop}
    acked_stops = {m for m in acked if int(m.rsplit("-", 1)[1]) % 10 == 9}
    # the spare took over: the last posts were acknowledged too
    assert {f"ack-{c}-{POSTS - 1}" for c in range(CLIENTS)} <= acked, lost
    assert acked - acked_stops <= statuses, sorted(acked - acked_stops - statuses)[:5]
    assert acked_stops <= stops, sorted(acked_stops - stops)[:5]
