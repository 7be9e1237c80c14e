"""The predicates of the partial indexes (:mod:`storage.models` declares the indexes).

A query that should use one says its predicate literally (SQLite and a generic
PostgreSQL plan match the text); importing them here costs nothing (no SQLAlchemy).
"""

from __future__ import annotations

#: the predicate of the partial indexes over the queue (a query must say it literally,
#: ``state = 'queued'``, for SQLite and a generic PostgreSQL plan to use them)
QUEUED_ROWS = "state = 'queued'"
#: the predicate of the partial index over the queue of campaigns sent in recipient time
ZONED_QUEUED_ROWS = "state = 'queued' AND recipient_tz IS NOT NULL"
#: the predicate of the partial index over queued rows without a sender (a forgotten
#: sender's, handed over by the sweeper; a query must say it literally, as above)
UNASSIGNED_QUEUED_ROWS = "state = 'queued' AND sender IS NULL"
#: the predicate of the partial index over the rows being sent (the few in flight)
SENDING_ROWS = "state = 'sending'"
#: the predicate of the partial index over outbound webhook messages not yet settled
PENDING_MESSAGES = "state = 'pending'"
#: the predicate of the partial index over status events that carry an error code
WITH_ERROR_CODE = "error_code IS NOT NULL"
#: the predicate of the partial index over status events not yet applied to a delivery
#: (the few that raced their send, and those of messages no delivery carries)
UNAPPLIED_EVENTS = "applied = false"
#: the predicate of the partial index over incoming messages the reply rules have yet to
#: look at (campaigns/reply_rules.py)
RULES_DUE = "rules_due = true"
