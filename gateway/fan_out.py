"""Gateway calls for many instances, a bounded number waiting at once.

Registering webhooks (``scheduler.webhook_keeper.register_concurrently``) and asking
about scans (``campaigns.instances.confirm_scans``) make one call per instance; on a
gateway answering in 1 s, 500 of them one after the other take minutes. Threads share
the caller's client (httpx's connection pool is thread-safe).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")


def each_at_most(
    call: Callable[[str], T], instance_ids: Sequence[str], concurrency: int
) -> list[T]:
    """``call(id)`` for each of ``instance_ids`` (duplicates once), at most ``concurrency``
    at once (1 or one id: in this thread); the results in the order of the ids. ``call``
    keeps its own failures: an exception it raises propagates once every call ended."""
    ids = list(dict.fromkeys(instance_ids))
    if len(ids) <= 1 or concurrency <= 1:
        return [call(i) for i in ids]
    workers = min(concurrency, len(ids))
    with ThreadPoolExecutor(workers, thread_name_prefix="gatecast-gateway") as pool:
        return list(pool.map(call, ids))
