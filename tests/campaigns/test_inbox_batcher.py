"""The inbox's batcher: group commit, a failure per request, the idle sweep, the pass."""

from __future__ import annotations

import asyncio
from typing import Any

from campaigns.inbox.batcher import SWEEPS_AFTER_ACTIVITY
from tests.campaigns.inbox_fakes import make_batcher


def test_batcher_reports_failure_per_request() -> None:
    calls: list[int] = []

    def apply(events: list[Any]) -> Any:
        calls.append(len(events))
        if "bad" in events:
            raise ValueError("boom")
        return None

    async def go() -> list[str]:
        batcher = make_batcher(apply, max_wait=0.05)
        await batcher.start()
        results = await asyncio.gather(
            batcher.submit(["ok1"]),  # type: ignore[list-item]
            batcher.submit(["bad"]),  # type: ignore[list-item]
            batcher.submit(["ok2"]),  # type: ignore[list-item]
            return_exceptions=True,
        )
        await batcher.stop()
        return ["error" if isinstance(r, Exception) else "ok" for r in results]

    assert asyncio.run(go()) == ["ok", "error", "ok"]
    assert calls[0] == 3  # one grouped attempt first


def test_batcher_sweeps_when_idle_after_activity() -> None:
    sweeps: list[int] = []

    async def go() -> None:
        batcher = make_batcher(
            lambda events: None,
            max_wait=0.001,
            sweep=lambda: sweeps.append(1) or 0,  # type: ignore[func-returns-value]
            sweep_after=0.01,
        )
        await batcher.start()
        await asyncio.sleep(0.1)
        assert sweeps == []  # nothing happened yet: no polling
        await batcher.submit(["x"])  # type: ignore[list-item]
        await asyncio.sleep(0.3)
        await batcher.stop()

    asyncio.run(go())
    assert len(sweeps) == SWEEPS_AFTER_ACTIVITY


def test_inbox_acknowledges_stored_events_and_applies_them_later() -> None:
    """With apply_later, a request is answered once stored; the ids are applied together."""
    later: list[list[str]] = []

    def store(events: list[Any]) -> Any:
        from campaigns.gateway_events import ApplyStats

        return ApplyStats(pending=[str(e) for e in events])

    def apply_later(ids: list[str]) -> int:
        later.append(ids)
        return len(ids)

    async def go() -> tuple[list[list[str]], int]:
        batcher = make_batcher(store, apply_later=apply_later, later_seconds=0.05)
        await batcher.start()
        await asyncio.gather(*(batcher.submit([f"m{i}"]) for i in range(5)))  # type: ignore[list-item]
        answered = list(later)  # every request answered, nothing applied yet
        waiting = batcher.unapplied
        await asyncio.sleep(0.3)
        assert batcher.unapplied == 0
        await batcher.submit(["m9"])  # type: ignore[list-item]
        await batcher.stop()  # applies what it holds
        return answered, waiting

    answered, waiting = asyncio.run(go())
    assert answered == [] and waiting == 5
    assert later == [[f"m{i}" for i in range(5)], ["m9"]]


def test_inbox_applies_at_the_event_threshold_and_retries_a_failed_pass() -> None:
    calls: list[list[str]] = []

    def apply_later(ids: list[str]) -> int:
        calls.append(ids)
        if len(calls) == 1:
            raise RuntimeError("database went away")
        return len(ids)

    async def go() -> None:
        from campaigns.gateway_events import ApplyStats

        batcher = make_batcher(
            lambda events: ApplyStats(pending=[str(e) for e in events]),
            apply_later=apply_later,
            later_events=3,
            later_seconds=60,
        )
        await batcher.start()
        for i in range(3):
            await batcher.submit([f"m{i}"])  # type: ignore[list-item]
        for _ in range(500):  # the pass runs (in a thread) right after the third answer
            if calls:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)
        assert calls == [["m0", "m1", "m2"]]  # the threshold, not the (long) timer
        assert batcher.unapplied == 3  # kept after the failure
        await batcher.stop()

    asyncio.run(go())
    assert calls == [["m0", "m1", "m2"]] * 2


def test_each_request_is_answered_only_after_its_own_batch_is_stored() -> None:
    """Two batches stored at once (``parallel=2``), the pass beside them: a request's
    future resolves only once the store call holding its events returned; one slow batch
    (and a slow pass) holds up neither the other batch nor its answers."""
    stored: list[list[str]] = []
    gates: dict[str, asyncio.Event] = {}
    passing = asyncio.Event()

    async def on_loop(events: list[Any]) -> Any:
        from campaigns.gateway_events import ApplyStats

        gate = gates.setdefault(events[0], asyncio.Event())
        await gate.wait()  # the commit in progress: the server has not answered yet
        stored.append(list(events))
        return ApplyStats(pending=list(events))

    def apply_later(ids: list[str]) -> int:
        passing.set()
        return len(ids)

    async def go() -> None:
        batcher = make_batcher(
            lambda events: None,
            on_loop=on_loop,
            parallel=2,
            apply_later=apply_later,
            later_seconds=0.0,  # the pass at once
        )
        await batcher.start()
        first = asyncio.ensure_future(batcher.submit(["a"]))  # type: ignore[list-item]
        await asyncio.sleep(0.01)
        second = asyncio.ensure_future(batcher.submit(["b"]))  # type: ignore[list-item]
        await asyncio.sleep(0.01)
        third = asyncio.ensure_future(batcher.submit(["c"]))  # type: ignore[list-item]
        await asyncio.sleep(0.01)
        # "a" and "b" commit at once (two slots); "c" waits for a slot
        assert set(gates) == {"a", "b"} and not (first.done() or second.done())
        gates["b"].set()
        await second
        assert stored == [["b"]] and not first.done() and not third.done()
        await asyncio.sleep(0.01)
        assert set(gates) == {"a", "b", "c"}  # "b"'s slot went to "c"
        gates["c"].set()
        await third
        assert not first.done()  # still not stored: not answered
        gates["a"].set()
        await first
        await batcher.stop()
        assert sorted(e for b in stored for e in b) == ["a", "b", "c"]
        assert passing.is_set()

    asyncio.run(go())
