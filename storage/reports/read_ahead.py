"""Fetching a report's rows ahead: a thread fetches chunks while the writer works on the
previous ones (the CSV and XLSX exports of both dialects).
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any

#: chunks the fetching thread may hold ahead of the writer, by default
AHEAD = 4

_Chunks = queue.Queue[list[Any] | BaseException | None]


def _fetch_chunks(
    fetch: Callable[[], list[Any]],
    close: Callable[[], None],
    chunks: _Chunks,
    stop: threading.Event,
) -> None:
    """Producer: ``fetch()`` chunks into ``chunks`` until done (``None``) or failed (the
    error); closes the cursor in this thread, the one that used it."""
    try:
        try:
            while not stop.is_set() and (rows := fetch()):
                chunks.put(rows)
        finally:
            close()
    except BaseException as exc:  # handed to the writer, which raises it
        chunks.put(exc)
        return
    chunks.put(None)


@contextlib.contextmanager
def prefetched(
    fetch: Callable[[], list[Any]], close: Callable[[], None], name: str, ahead: int = AHEAD
) -> Iterator[Iterator[list[Any]]]:
    """The chunks ``fetch()`` returns (an empty one ends them), fetched by a thread while
    the caller works on the previous ones: sqlite3 and psycopg release the GIL while the
    database steps or the socket waits, so the database and the writer run side by side.
    At most ``ahead`` chunks wait (memory stays flat); leaving stops the thread."""
    chunks: _Chunks = queue.Queue(ahead)
    stop = threading.Event()
    fetcher = threading.Thread(
        target=_fetch_chunks, args=(fetch, close, chunks, stop), name=name, daemon=True
    )
    fetcher.start()

    def chunked() -> Iterator[list[Any]]:
        while (rows := chunks.get()) is not None:
            if isinstance(rows, BaseException):
                raise rows
            yield rows

    try:
        yield chunked()
    finally:
        stop.set()
        while fetcher.is_alive():  # unblock a put, let the fetcher see the stop
            with contextlib.suppress(queue.Empty):
                chunks.get(timeout=0.05)
        fetcher.join()


__all__ = ["AHEAD", "prefetched"]
