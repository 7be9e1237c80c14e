"""bench/memory.py's sender is one ``gatecast serve`` holds until its webhook is registered:
recorded unlinked, it sent before its webhook was registered and the sandbox's first
seconds of events went nowhere (rows never read)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.dispatch import open_db
from bench.memory import seed_run
from scheduler.webhook_keeper import WebhookKeeper


@pytest.fixture
def care_restored(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The bench's warm-up setting (``warmup_as_users``) undone after the test."""
    from scheduler.care import configure, current

    before = current()
    monkeypatch.setenv("GATECAST_WARMUP_ENABLED", "false")  # restored at teardown
    yield
    configure(before)


@pytest.mark.usefixtures("care_restored")
def test_the_bench_sender_is_held_by_serve_until_its_webhook_is_registered(
    tmp_path: Path,
) -> None:
    engine = open_db(f"sqlite:///{tmp_path / 'memory.db'}")
    try:
        seed_run(engine, "MEM0001", rows=3)

        def no_gateway() -> object:
            raise AssertionError("unproven() asks the database only")

        keeper = WebhookKeeper(
            engine,
            no_gateway,  # type: ignore[arg-type]
            "http://127.0.0.1:9/webhooks/gateway/secret",
            every_seconds=60,
        )
        # what serve's start passes to Dispatcher.hold_unregistered, then registers
        assert keeper.unproven() == ["MEM0001"]
    finally:
        engine.dispose()
