"""Idempotency keys in the database: one claim wins, answers replay, expiry and release."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine

from storage.queries import idempotency as q

NOW = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)


def _claim(
    engine: Engine, key: str = "k1", fp: str = "f1", now: datetime = NOW, who: str = "p1"
) -> tuple[bool, q.StoredKey]:
    return q.claim(
        engine,
        q.KeyRequest(who, key, fp, "POST", "/api/v1/campaigns"),
        now=now,
        expires_at=now + timedelta(hours=24),
        abandoned_before=now - timedelta(minutes=10),
    )


def test_first_claim_wins_and_its_answer_replays(engine: Engine) -> None:
    claimed, row = _claim(engine)
    assert claimed and not row.done
    again, seen = _claim(engine)
    assert not again and seen.id == row.id and not seen.done
    q.complete(engine, row.id, status_code=201, response_body='{"id":1}', now=NOW)
    _, done = _claim(engine, fp="other")
    assert done.done and done.status_code == 201 and done.response_body == '{"id":1}'
    assert done.fingerprint == "f1"  # the caller compares it with its own


def test_keys_are_scoped_per_principal(engine: Engine) -> None:
    assert _claim(engine, who="alice")[0]
    assert _claim(engine, who="bob")[0]


def test_released_abandoned_and_expired_claims_free_the_key(engine: Engine) -> None:
    _, row = _claim(engine)
    q.release(engine, row.id)
    assert _claim(engine)[0]  # released: claimable again
    # unfinished for longer than the abandon limit: its process died
    assert _claim(engine, now=NOW + timedelta(minutes=11))[0]
    _, fresh = _claim(engine, key="k2")
    q.complete(engine, fresh.id, status_code=201, response_body="{}", now=NOW)
    assert not _claim(engine, key="k2", now=NOW + timedelta(hours=23))[0]
    assert _claim(engine, key="k2", now=NOW + timedelta(hours=24, seconds=1))[0]


def test_concurrent_claims_give_the_key_to_one(engine: Engine) -> None:
    results: list[bool] = []
    lock = threading.Lock()

    def go() -> None:
        claimed, _ = _claim(engine, key="race")
        with lock:
            results.append(claimed)

    threads = [threading.Thread(target=go) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(results) == [False] * 5 + [True]
