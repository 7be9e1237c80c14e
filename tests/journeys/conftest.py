"""Journey fixtures: one sandbox process per module, a fresh workspace per test.

Every test here is marked ``journey`` (run by ``make test``; ``-m journey`` runs them alone).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.journeys.harness import Process, Workspace, start_sandbox, workspace


@pytest.fixture(scope="module")
def sandbox_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Process]:
    """``gatecast sandbox --auto-link`` with quick status events, shared by a module."""
    proc = start_sandbox(tmp_path_factory.mktemp("sandbox"), "--status-delays", "0.05,0.1,0.2")
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
