"""Journey fixtures: one sandbox process per module, a fresh workspace per test.

Every test here is marked ``journey`` (run by ``make test``; ``-m journey`` runs them alone).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.journeys.harness import QUICK_STATUSES, Process, Workspace, start_sandbox, workspace


@pytest.fixture(scope="module")
def sandbox_process(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Process]:
    """``gatecast sandbox --auto-link`` shared by a module: with the options the module
    names in ``SANDBOX_ARGS``, else with quick status events (``QUICK_STATUSES``)."""
    args = getattr(request.module, "SANDBOX_ARGS", QUICK_STATUSES)
    proc = start_sandbox(tmp_path_factory.mktemp("sandbox"), *args)
    yield proc
    proc.stop()


@pytest.fixture
def ws(tmp_path: Path, sandbox_process: Process) -> Iterator[Workspace]:
    """A user's working directory pointed at the module's sandbox."""
    with workspace(tmp_path / "work", sandbox_process.url) as w:
        yield w


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test under tests/journeys as a journey."""
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.journey)
