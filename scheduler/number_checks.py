"""The number check before a first message (decision 68, issue 33).

Where the gateway has a check that numbers are on the app (``capabilities.number_check``:
Evolution API's ``/chat/whatsappNumbers``), a number is asked about before the first
message to it, in batches, and the answer is kept per number (``number_checks``) for
:data:`MAX_AGE`; a number not on the app is skipped with :data:`NOT_ON_APP_ERROR`
instead of being sent (a send to a non-user is a ban signal). Two places ask:

- ahead of the dispatcher (:meth:`NumberChecks.poke`, about once a second from the
  tick): on a thread of its own, never the tick's, the soonest-due queued rows of the
  running campaigns whose number has no fresh answer, up to :data:`AHEAD_LIMIT` per
  pass, one request per sender per ``check_batch`` numbers; the queued rows whose number
  is not on the app are skipped in one statement;
- at the claim (:meth:`NumberChecks.screen`, from ``scheduler.sending``): a claimed row
  whose number was answered not on the app is skipped; one the pass ahead has not
  reached yet (an unpaced batch outrunning it) is asked about then, in one request per
  sender for the batch.

A gateway without the check (the spec's) costs nothing: no query, no request. A check
that fails (the gateway down, the sender not connected) leaves the numbers unchecked and
the rows are sent as before: Evolution refuses a send to a non-user itself, which
``gateway.dialects.evolution`` reads as "not on WhatsApp".
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Engine

from campaigns.delivery_lifecycle import NOT_ON_APP_ERROR, SKIP_QUEUED
from gateway.dialects import NOTHING_MORE, Capabilities
from gateway.errors import GatewayError, RequestValidationError
from gateway.requests import is_group
from scheduler.clock import Clock
from storage.queries import number_checks as nq

log = logging.getLogger("gatecast.dispatch")

#: an answer is asked again after this long (people join and leave the app)
MAX_AGE = timedelta(days=30)
#: the most rows one pass ahead looks at
AHEAD_LIMIT = 500


def capabilities_of(client: object) -> Capabilities:
    """What ``client``'s gateway offers beyond sending (nothing for a client without
    the attribute, such as a test's fake)."""
    found = getattr(client, "capabilities", NOTHING_MORE)
    return found if isinstance(found, Capabilities) else NOTHING_MORE


class NumberChecks:
    """Asks the gateway whether numbers are on the app, keeps the answers, skips the rows
    of numbers that are not (see the module's docstring)."""

    def __init__(self, engine: Engine, clock: Clock, client: Callable[[], Any]) -> None:
        self.engine = engine
        self.clock = clock
        self._client = client  # the calling thread's gateway client
        self._wanted: tuple[list[int], frozenset[str] | None] | None = None
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._stopping = False

    def _fresh_since(self) -> datetime:
        return self.clock.now() - MAX_AGE

    def ask(self, client: Any, by_sender: dict[str, list[str]]) -> dict[str, bool]:
        """Ask ``client``'s gateway about the numbers of each sender in batches and keep
        the answers; ``{number: on the app}`` for those answered."""
        caps = capabilities_of(client)
        answers: dict[str, bool] = {}
        for sender, numbers in sorted(by_sender.items()):
            unique = sorted(set(numbers))
            for i in range(0, len(unique), max(1, caps.check_batch)):
                chunk = unique[i : i + max(1, caps.check_batch)]
                try:
                    answers.update(client.check_numbers(sender, chunk))
                except (GatewayError, RequestValidationError) as exc:
                    log.warning(
                        "number check of %d number(s) through %s failed (%s): sent unchecked",
                        len(chunk),
                        sender,
                        exc,
                    )
                    break
        if answers:
            with self.engine.begin() as conn:
                nq.store(conn, answers, now=self.clock.now())
        return answers

    def screen(self, client: Any, targets: Iterable[tuple[int, str, str | None]]) -> set[int]:
        """Of ``targets`` (row id, number, sender) the rows whose number is not on the
        app: known answers read, the rest asked now (one request per sender per batch)."""
        if not capabilities_of(client).number_check:
            return set()
        rows = [(rid, to, s) for rid, to, s in targets if not is_group(to)]
        if not rows:
            return set()
        with self.engine.connect() as conn:
            known = nq.known(conn, [to for _, to, _ in rows], since=self._fresh_since())
        missing: dict[str, list[str]] = {}
        for _, to, sender in rows:
            if to not in known and sender is not None:
                missing.setdefault(sender, []).append(to)
        if missing:
            known.update(self.ask(client, missing))
        return {rid for rid, to, _ in rows if known.get(to) is False}

    def ahead(
        self, client: Any, campaign_ids: Sequence[int], senders: frozenset[str] | None = None
    ) -> int:
        """One pass ahead of the dispatcher over ``campaign_ids`` (the rows of
        ``senders`` only, when given: a worker's leased senders); how many queued rows it
        skipped."""
        if not campaign_ids or not capabilities_of(client).number_check:
            return 0
        since = self._fresh_since()
        with self.engine.connect() as conn:
            rows = nq.unchecked_queued(
                conn, campaign_ids, since=since, limit=AHEAD_LIMIT, senders=senders
            )
        by_sender: dict[str, list[str]] = {}
        for to, sender in rows:
            if sender is not None and not is_group(to):
                by_sender.setdefault(sender, []).append(to)
        if not by_sender:
            return 0
        answers = self.ask(client, by_sender)
        if all(answers.values()):
            return 0
        with self.engine.begin() as conn:
            return nq.skip_not_on_app(
                conn, campaign_ids, move=SKIP_QUEUED, since=since, error=NOT_ON_APP_ERROR
            )

    # -- the pass ahead's thread ------------------------------------------------------

    def poke(self, campaign_ids: Sequence[int], senders: frozenset[str] | None = None) -> None:
        """Ask for a pass ahead over ``campaign_ids`` (``senders``: this worker's leased
        senders, None: all) on the checks' own thread (started on the first poke); a pass
        already running takes the latest ids next."""
        if not campaign_ids or not capabilities_of(self._client()).number_check:
            return
        with self._lock:
            self._wanted = (list(campaign_ids), senders)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="gatecast-number-checks", daemon=True
                )
                self._thread.start()
        self._wake.set()

    def _run(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            with self._lock:
                wanted, self._wanted = self._wanted, None
                if self._stopping:
                    return
            if not wanted:
                continue
            try:
                skipped = self.ahead(self._client(), *wanted)
                if skipped:
                    log.info("%d queued row(s) skipped: not on WhatsApp", skipped)
            except Exception:
                log.exception("the number check ahead of the dispatcher failed")

    def close(self) -> None:
        """Stop the pass ahead's thread (after the pass it is in)."""
        with self._lock:
            self._stopping = True
            thread = self._thread
        self._wake.set()
        if thread is not None:
            thread.join(timeout=30)


__all__ = ["AHEAD_LIMIT", "MAX_AGE", "NumberChecks", "capabilities_of"]
