"""When the contact search catches up with the writes.

Writes to ``contacts`` only queue the contacts whose searched text they changed (a
trigger; migration 0014), or, for a PostgreSQL import's new contacts, their range
(migration 0019): an import of a million new contacts pays almost nothing for the search
in its transaction. The search table is filled from that queue in bulk by
:func:`catch_up_search`, called by an import once it has committed
(``campaigns.importer.import_file``) and by the leader every few seconds
(``scheduler.service``) for the single-contact writes of the API, the dashboard and the
CLI. A search is right whatever the queue holds: it checks the queued contacts directly
(``storage.queries.contact_search``); the catching up keeps it fast.
"""

from __future__ import annotations

import threading

from sqlalchemy import Engine

from storage.queries import contact_search as cs

#: ids of a queued range filled per transaction
RANGE_BATCH = 50_000


def catch_up_search(engine: Engine, *, stop: threading.Event | None = None) -> int:
    """Fill the search rows of every queued contact, a batch per transaction (another
    process may write between them); how many contacts were filled. The ranges an import
    queued are filled first, straight from ``contacts`` (``contact_search.fill_range``),
    a batch per transaction too."""
    done = after = 0
    while stop is None or not stop.is_set():
        with engine.begin() as conn:
            fill = cs.fill_range(conn, limit=RANGE_BATCH)
        done += fill.filled
        if not fill.covered:
            break
    while stop is None or not stop.is_set():
        with engine.begin() as conn:
            batch = cs.catch_up_batch(conn)
            n, after = cs.catch_up(conn, after=after, limit=batch)
        done += n
        if n < batch:
            break
    if done > 5_000:  # a big write: the queue's dead entries go now, not at autovacuum
        cs.tidy_after_catch_up(engine)
    return done
