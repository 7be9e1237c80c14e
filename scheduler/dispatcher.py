"""The dispatcher: claim due rows, pace per sender, send, record outcomes in bulk, retry.

One :meth:`Dispatcher.tick` does, for every running campaign inside its sending window:

1. expire leases (rows left ``sending`` by a dead process become ``unknown``) and pause
   senders that received error-463 status events;
2. per usable sender: paced -> reserve the sender's next slot (``instances.next_send_at``,
   a conditional UPDATE) and claim one row in the same transaction; unpaced -> claim a
   batch of a few hundred;
3. skip opted-out contacts, send the rest on a small thread pool (one sync client per
   thread: DESIGN.md measured one shared AsyncClient as slow); unpaced batches are
   pipelined: the next batch is claimed and the previous one recorded while one sends
   (so at most two batches are in flight);
4. record every outcome in bulk in one transaction (a sent row's ``sent_at`` is the moment
   the gateway's answer to its own send came back), then apply webhook events that
   arrived before their send was recorded (``campaigns.tracking.apply_pending``);
5. pause a sender on instance problems or a burst of failures, pause a campaign whose
   failure rate passes its threshold, complete a campaign with nothing left to send.

Sticky senders that cannot send hand over (:meth:`Dispatcher._hand_over`, about once a
second per campaign): the queued rows of a sender that is paused for longer than the
sender grace (``sender_grace_seconds``, default :data:`DEFAULT_SENDER_GRACE_SECONDS`), or
at once when it is gone (the gateway no longer knows its id), and rows whose sender was
forgotten, go to the campaign's healthy senders (its ``instances`` that are unpaused and
not disconnected, logged out or gone; without ``instances``: the connected, unpaused
ones), each row to a stable choice among them. A campaign whose queued rows all wait for
senders that cannot send, with no healthy sender to take them, is *stalled*
(:attr:`Dispatcher.stalled`): ``campaign run`` ends on it, ``serve`` logs it and waits.

Nothing here sleeps on its own: :meth:`run` asks the injected clock to sleep until the
next due moment, so tests drive time by hand.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal, Protocol

from sqlalchemy import Connection, Engine, select

from campaigns import delivery_lifecycle as dl
from campaigns import lifecycle
from campaigns.delivery_lifecycle import Bucket
from campaigns.materialise import pick_sender
from gateway.messages import Message, message_from_dict
from gateway.outcomes import InstanceProblem, OutcomeKind, SendOutcome
from scheduler.clock import Clock, SystemClock
from scheduler.defaults import DEFAULT_SENDER_GRACE_SECONDS
from scheduler.pacing import cap_remaining, next_send_at, slots_per_claim
from scheduler.policy import CampaignPolicy, policy_from_spec
from scheduler.windows import in_window, local_day_start, next_local_day_start, next_window_open
from storage import tables
from storage.queries import deliveries as dq
from storage.queries import instances as iq

log = logging.getLogger("gatecast.dispatch")

_campaigns = tables.campaigns


class SupportsSend(Protocol):
    """What the dispatcher needs of a gateway client (``gateway.client.GatewayClient``)."""

    def send(self, instance_id: str, to: str, message: Message) -> SendOutcome:
        """Send one message; never raises for network problems."""
        ...


ApplyPending = Callable[[Connection, Sequence[str], datetime], int]


def _default_apply_pending(conn: Connection, message_ids: Sequence[str], now: datetime) -> int:
    from campaigns.tracking import apply_pending

    return int(apply_pending(conn, message_ids, now=now))


@dataclass
class TickResult:
    """What one tick did, and when the next one is worth running."""

    claimed: int = 0
    sent: int = 0
    retried: int = 0
    failed: int = 0
    unknown: int = 0
    skipped: int = 0
    expired: int = 0
    in_flight: int = 0
    completed: list[int] = field(default_factory=list)
    next_wake: datetime | None = None


@dataclass
class _Campaign:
    id: int
    policy: CampaignPolicy
    senders: list[str]
    senders_checked_at: datetime


@dataclass
class _Job:
    row: dq.ClaimedRow
    policy: CampaignPolicy
    message: Message | None
    error: str | None = None
    outcome: SendOutcome | None = None
    #: when the gateway's answer to this row's send came back (its ``sent_at`` if accepted)
    answered_at: datetime | None = None


class Dispatcher:
    """Sends the due deliveries of running campaigns, at each sender's pace."""

    def __init__(
        self,
        engine: Engine,
        client_factory: Callable[[], SupportsSend],
        *,
        clock: Clock | None = None,
        workers: int = 4,
        batch_size: int = 256,
        lease_seconds: float = 120.0,
        campaign_ids: Sequence[int] | None = None,
        failure_burst: int = 5,
        poll_seconds: float = 1.0,
        rng: random.Random | None = None,
        apply_pending: ApplyPending | None = None,
        pipeline: bool = True,
        on_outcome: Callable[[str], None] | None = None,
        sender_grace_seconds: float = DEFAULT_SENDER_GRACE_SECONDS,
    ) -> None:
        self.engine = engine
        self.clock: Clock = clock or SystemClock()
        self.workers = max(1, workers)
        self.batch_size = max(1, batch_size)
        self.lease = timedelta(seconds=lease_seconds)
        self.campaign_ids = None if campaign_ids is None else [int(c) for c in campaign_ids]
        self.failure_burst = failure_burst
        self.poll_seconds = poll_seconds
        self.rng = rng or random.Random()
        self._apply_pending = apply_pending or _default_apply_pending
        self._factory = client_factory
        self._local = threading.local()
        self._all_clients: list[SupportsSend] = []
        self._clients_lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._campaigns: dict[int, _Campaign] = {}
        self._streaks: dict[str, int] = {}
        self.paused_senders: dict[str, str] = {}
        self.pipeline = pipeline
        self._on_outcome = on_outcome  # e.g. a metrics counter of the layer above
        self._inflight: list[tuple[_Job, Future[SendOutcome] | None]] = []
        self._last_sweep: datetime | None = None
        self.sender_grace = timedelta(seconds=max(0.0, sender_grace_seconds))
        self._last_hand_over: dict[int, datetime] = {}
        #: running campaigns no sender can send for: campaign id -> why (senders, reasons)
        self.stalled: dict[int, str] = {}

    # -- clients -------------------------------------------------------------------------

    def _client(self) -> SupportsSend:
        client: SupportsSend | None = getattr(self._local, "client", None)
        if client is None:
            client = self._factory()
            self._local.client = client
            with self._clients_lock:
                self._all_clients.append(client)
        return client

    def close(self) -> None:
        """Record the batch in flight, stop the thread pool, close the clients it made."""
        try:
            self.flush()
        except Exception:
            log.exception("recording the last batch failed; its rows become unknown")
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        with self._clients_lock:
            clients, self._all_clients = self._all_clients, []
        for client in clients:
            close = getattr(client, "close", None)
            if callable(close):
                close()
        self._local = threading.local()

    def __enter__(self) -> Dispatcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- campaigns -----------------------------------------------------------------------

    def _running(self, conn: Connection, now: datetime) -> list[_Campaign]:
        stmt = select(_campaigns.c.id, _campaigns.c.spec, _campaigns.c.timezone).where(
            _campaigns.c.state == lifecycle.RUNNING
        )
        if self.campaign_ids is not None:
            stmt = stmt.where(_campaigns.c.id.in_(self.campaign_ids))
        out: list[_Campaign] = []
        seen: set[int] = set()
        for cid, spec, tz in conn.execute(stmt.order_by(_campaigns.c.id)):
            cid = int(cid)
            seen.add(cid)
            cached = self._campaigns.get(cid)
            if cached is None or now - cached.senders_checked_at > timedelta(seconds=5):
                try:
                    policy = policy_from_spec(spec or {}, timezone=tz)
                except (ValueError, KeyError) as exc:
                    log.error("campaign %s has an unreadable spec: %s", cid, exc)
                    continue
                cached = _Campaign(cid, policy, dq.queued_senders(conn, cid), now)
                self._campaigns[cid] = cached
            out.append(cached)
        for gone in set(self._campaigns) - seen:
            del self._campaigns[gone]
            self.stalled.pop(gone, None)
            self._last_hand_over.pop(gone, None)
        return out

    # -- one tick ------------------------------------------------------------------------

    def tick(self) -> TickResult:
        """Claim, send and record one round; returns counts and the next useful wake time."""
        now = self.clock.now()
        result = TickResult()
        with self.engine.begin() as conn:
            result.expired = dq.expire_leases(conn, now=now)
            reason = dl.RESTRICTION_PAUSE_REASON
            for instance_id in iq.pause_on_restriction_events(
                conn, now=now, code=dl.RESTRICTION_CODE, reason=reason
            ):
                self._note_pause(instance_id, reason)
            running = self._running(conn, now)
            self._refresh_pauses(conn, running)
        if self._last_sweep is None or now - self._last_sweep >= timedelta(seconds=1):
            self._last_sweep = now
            self.sweep_pending_events()
        if result.expired:
            log.warning("%d in-flight rows outlived their lease: marked unknown", result.expired)

        for camp in running:
            self._hand_over(camp, now)
        jobs: list[_Job] = []
        wakes: list[datetime] = []
        for camp in running:
            policy = camp.policy
            if not in_window(now, policy.timezone, policy.window):
                wakes.append(next_window_open(now, policy.timezone, policy.window))
                continue
            jobs.extend(self._claim_for(camp, now, wakes))

        submitted = self._submit(jobs) if jobs else []
        if self._inflight:  # the previous unpaced batch: record it while this one sends
            previous, self._inflight = self._inflight, []
            self._collect(previous)
            self._record([job for job, _ in previous], result)
        if jobs:
            pooled = any(future is not None for _, future in submitted)
            if self.pipeline and pooled and all(j.policy.pace.unpaced for j in jobs):
                self._inflight = submitted
            else:
                self._collect(submitted)
                self._record(jobs, result)
        self._finish_campaigns(running, result)

        result.claimed = len(jobs)
        result.in_flight = len(self._inflight)
        if jobs or self._inflight:
            result.next_wake = now
        else:
            poll = now + timedelta(seconds=self.poll_seconds)
            result.next_wake = min([*wakes, poll])
        return result

    def _claim_for(self, camp: _Campaign, now: datetime, wakes: list[datetime]) -> list[_Job]:
        policy = camp.policy
        pace = policy.pace
        jobs: list[_Job] = []
        lease_until = now + self.lease
        with self.engine.begin() as conn:
            paused = iq.pause_state(conn, camp.senders)
            unknown = [s for s in camp.senders if s not in paused]
            if unknown:  # a sender with no instances row yet: create it (pace state lives there)
                iq.ensure(conn, unknown, now=now)
            ready = [s for s in camp.senders if paused.get(s) is None]
            if not ready:
                return []
            times = iq.next_send_times(conn, ready)
        per_sender = max(1, self.batch_size // len(ready))
        for sender in ready:
            slot = times.get(sender)
            if not pace.unpaced and slot is not None and slot > now:
                wakes.append(slot)
                continue
            claimed = self._claim_sender(camp, sender, now, lease_until, per_sender, wakes)
            if claimed == "capped":
                wakes.append(next_local_day_start(now, policy.timezone))
                continue
            if claimed == "taken":  # paused meanwhile, or another worker holds the slot
                continue
            rows = claimed
            if not rows:
                with self.engine.connect() as conn:
                    due = dq.next_due_at(conn, camp.id, [sender])
                if due is not None:
                    wakes.append(max(due, now))
            for row in rows:
                try:
                    jobs.append(_Job(row, policy, message_from_dict(row.content)))
                except ValueError as exc:
                    jobs.append(_Job(row, policy, None, error=f"unsendable content: {exc}"))
        return jobs

    def _claim_sender(
        self,
        camp: _Campaign,
        sender: str,
        now: datetime,
        lease_until: datetime,
        per_sender: int,
        wakes: list[datetime],
    ) -> list[dq.ClaimedRow] | Literal["capped", "taken"]:
        """Claim one sender's next rows: the rows, ``"capped"`` (daily cap reached) or
        ``"taken"`` (the sender is paused, or another worker holds its pace slot).

        One transaction that first takes the sender's row (the pace slot's conditional
        UPDATE, or a plain row lock when unpaced with a cap), so the daily-cap count and the
        claim are atomic across workers: a second worker waits for the first one's claim to
        commit and then counts its rows, and the cap is never exceeded.
        """
        pace = camp.policy.pace
        capped = pace.daily_cap is not None
        with self.engine.begin() as conn:
            if pace.unpaced:
                if capped and not iq.lock_unpaused(conn, sender):
                    return "taken"
                limit = per_sender
            else:
                # the conditional UPDATE makes this worker the only one using the slot
                if not iq.reserve_slot(conn, sender, now=now, next_at=now):
                    return "taken"
                limit = slots_per_claim(pace, per_sender)
            if capped:
                day_start = local_day_start(now, camp.policy.timezone)
                remaining = cap_remaining(pace, dq.sends_since(conn, sender, day_start))
                if remaining is not None:
                    if remaining == 0:
                        conn.rollback()  # the slot stays as it was
                        return "capped"
                    limit = min(limit, remaining)
            rows = dq.claim(
                conn,
                campaign_id=camp.id,
                sender=sender,
                now=now,
                lease_until=lease_until,
                limit=limit,
            )
            if pace.unpaced:
                return rows
            if not rows:
                conn.rollback()  # keep the slot as it was: nothing was due
                return rows
            nxt = now
            for _ in rows:
                nxt = next_send_at(nxt, pace, self.rng)
            iq.set_next_send(conn, sender, nxt)
            wakes.append(nxt)
            return rows

    def _send_one(self, job: _Job) -> SendOutcome:
        """Send one row; ``job.answered_at`` becomes the moment its answer came back."""
        assert job.message is not None and job.row.sender is not None
        try:
            return self._client().send(job.row.sender, job.row.target, job.message)
        except ValueError as exc:  # the client refused the input before any I/O
            return SendOutcome(OutcomeKind.PERMANENT, reason=f"invalid request: {exc}")
        except Exception as exc:  # unexpected: the request may have gone out
            log.exception("send to row %s raised", job.row.id)
            return SendOutcome(OutcomeKind.AMBIGUOUS, reason=f"send raised {type(exc).__name__}")
        finally:
            job.answered_at = self.clock.now()

    def _submit(self, jobs: list[_Job]) -> list[tuple[_Job, Future[SendOutcome] | None]]:
        """Skip opted-out contacts and start the sends (on the pool when it pays off)."""
        ids = [j.row.contact_id for j in jobs if j.row.contact_id is not None]
        with self.engine.connect() as conn:
            opted_out = dq.opted_out_contact_ids(conn, ids)
        out: list[tuple[_Job, Future[SendOutcome] | None]] = []
        for job in jobs:
            if job.row.contact_id is not None and job.row.contact_id in opted_out:
                job.error = dl.OPTED_OUT_ERROR
                out.append((job, None))
            elif job.message is None:
                out.append((job, None))
            elif len(jobs) == 1 or self.workers == 1:
                job.outcome = self._send_one(job)
                out.append((job, None))
            else:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(
                        self.workers, thread_name_prefix="gatecast-send"
                    )
                out.append((job, self._pool.submit(self._send_one, job)))
        return out

    @staticmethod
    def _collect(submitted: list[tuple[_Job, Future[SendOutcome] | None]]) -> None:
        """Wait for the sends started by :meth:`_submit` and keep their outcomes."""
        for job, future in submitted:
            if future is not None:
                job.outcome = future.result()

    def flush(self) -> TickResult:
        """Wait for and record the batch still in flight (unpaced pipelining)."""
        result = TickResult()
        if self._inflight:
            previous, self._inflight = self._inflight, []
            self._collect(previous)
            self._record([job for job, _ in previous], result)
        return result

    # -- recording -----------------------------------------------------------------------

    def _record(self, jobs: list[_Job], result: TickResult) -> None:
        now = self.clock.now()
        sent: list[tuple[int, str, datetime]] = []
        requeue: list[tuple[int, datetime, str | None]] = []
        refund: list[tuple[int, datetime, str | None]] = []
        failed: list[tuple[int, str | None, str | None]] = []
        unknown: list[tuple[int, str | None, str | None]] = []
        skipped: list[tuple[int, str | None, str | None]] = []
        pauses: dict[str, str] = {}
        gone: set[str] = set()
        linked: set[str] = set()
        for job in jobs:
            row, outcome = job.row, job.outcome
            sender = row.sender or ""
            bucket, error, code = dl.classify(outcome, row.attempts, job.policy.retry, job.error)
            if outcome is None:
                (skipped if bucket is Bucket.SKIPPED else failed).append((row.id, error, code))
                continue
            if self._on_outcome is not None:
                self._on_outcome(outcome.kind.value)
            if bucket is Bucket.SENT:
                assert outcome.message_id is not None
                # sent_at: the gateway's acceptance of this send, not this batch's recording
                sent.append((row.id, outcome.message_id, job.answered_at or now))
                self._streaks[sender] = 0
                linked.add(sender)
            elif bucket is Bucket.REQUEUE:
                delay = job.policy.retry.delay(row.attempts, self.rng, outcome.retry_after)
                requeue.append((row.id, now + timedelta(seconds=delay), error))
            elif bucket is Bucket.REFUND:
                reason = outcome.problem.value if outcome.problem else "instance problem"
                pauses.setdefault(sender, reason)
                if outcome.problem is InstanceProblem.INVALID_INSTANCE:
                    gone.add(sender)
                refund.append((row.id, now, error))
                log.warning(
                    "sender %s cannot send (%s): %s; its rows wait",
                    sender,
                    reason,
                    outcome.reason,
                )
            elif bucket is Bucket.FAILED:
                failed.append((row.id, error, code))
                if outcome.kind is OutcomeKind.PERMANENT:
                    self._streaks[sender] = self._streaks.get(sender, 0) + 1
                    if self.failure_burst and self._streaks[sender] >= self.failure_burst:
                        pauses.setdefault(sender, dl.burst_pause_reason(self._streaks[sender]))
                        self._streaks[sender] = 0
            else:
                unknown.append((row.id, error, code))
        with self.engine.begin() as conn:
            dq.record_sent(conn, sent)
            dq.record_requeued(conn, requeue)
            dq.record_requeued(conn, refund, refund_attempt=True)
            dq.record_terminal(conn, failed, state=dl.FAILED, now=now)
            dq.record_terminal(conn, unknown, state=dl.UNKNOWN, now=now)
            dq.record_terminal(conn, skipped, state=dl.SKIPPED, now=now)
            for sender, reason in pauses.items():
                if iq.pause(conn, sender, reason, now=now):
                    self._note_pause(sender, reason)
            for sender in gone:  # the gateway no longer knows this id
                iq.mark_state(conn, sender, iq.GONE, now=now)
            iq.mark_linked_by_send(conn, sorted(linked - set(pauses)), now=now)
            if sent:
                self._apply_pending(conn, [m for _, m, _ in sent], now)
        result.sent += len(sent)
        result.retried += len(requeue)
        result.failed += len(failed)
        result.unknown += len(unknown)
        result.skipped += len(skipped)
        if failed or unknown:
            self._check_safety({j.row.campaign_id for j in jobs}, now)

    def _hand_over(self, camp: _Campaign, now: datetime) -> None:
        """Move queued rows off senders that cannot send to the campaign's healthy
        senders (see the module doc); record or clear the campaign's stall."""
        last = self._last_hand_over.get(camp.id)
        if last is not None and now - last < timedelta(seconds=1) and camp.id not in self.stalled:
            return
        self._last_hand_over[camp.id] = now
        with self.engine.begin() as conn:
            health = iq.health(conn, camp.senders)
            unable = {
                s: h for s, h in health.items() if h.paused_reason is not None or h.state == iq.GONE
            }
            orphans = iq.has_unassigned(conn, camp.id)
            if not unable and not orphans:
                self.stalled.pop(camp.id, None)
                return
            named = list(camp.policy.instances)
            if named:
                pool_health = iq.health(conn, named)
                pool = [
                    i
                    for i in named
                    if i in pool_health
                    and pool_health[i].paused_reason is None
                    and pool_health[i].state not in iq.UNABLE_STATES
                ]
            else:
                pool = iq.usable_ids(conn)
            pool = [i for i in pool if i not in unable]
            due = [
                s
                for s, h in unable.items()
                if h.state == iq.GONE
                or str(h.paused_reason).startswith(InstanceProblem.INVALID_INSTANCE.value)
                or h.paused_at is None
                or now - h.paused_at >= self.sender_grace
            ]
            if pool:
                moved = 0
                for sender in [*due, *([None] if orphans else [])]:
                    rows = iq.queued_targets(conn, camp.id, sender)
                    moves = [(rid, pick_sender(target, pool) or pool[0]) for rid, target in rows]
                    moved += iq.reassign_queued(conn, moves)
                    if sender is not None and moves:
                        log.warning(
                            "campaign %s: sender %s cannot send (%s): %d queued recipient(s) "
                            "handed to %s",
                            camp.id,
                            sender,
                            unable[sender].paused_reason or unable[sender].state,
                            len(moves),
                            ", ".join(pool),
                        )
                if moved:
                    camp.senders = dq.queued_senders(conn, camp.id)
                    camp.senders_checked_at = now
                self.stalled.pop(camp.id, None)
                return
            waiting = [s for s in camp.senders if s not in unable]
            if waiting:  # some sender with queued rows can still send
                self.stalled.pop(camp.id, None)
                return
            why = ", ".join(
                f"{s} ({h.paused_reason or h.state})" for s, h in sorted(unable.items())
            )
            if orphans:
                why = ", ".join(filter(None, [why, "recipients of a forgotten sender"]))
            queued = dq.state_counts(conn, camp.id).get(dl.QUEUED, 0)
        if camp.id not in self.stalled:
            log.warning(
                "campaign %s: no sender can send (%s); %d recipient(s) wait",
                camp.id,
                why,
                queued,
            )
        self.stalled[camp.id] = f"{why}; {queued} recipient(s) wait"

    def sweep_pending_events(self) -> int:
        """Apply stored status events whose message id a delivery now carries.

        Closes the race where an event commits (unapplied) right after the dispatcher
        recorded its id and looked for pending events. Runs about once a second.
        """
        applied = 0
        with self.engine.begin() as conn:
            ids = dq.unapplied_known_message_ids(conn)
            if ids:
                applied = self._apply_pending(conn, ids, self.clock.now())
        return applied

    def _refresh_pauses(self, conn: Connection, running: list[_Campaign]) -> None:
        """Make ``paused_senders`` what the database says (a resume elsewhere clears it)."""
        senders = sorted({s for camp in running for s in camp.senders} | set(self.paused_senders))
        state = iq.pause_state(conn, senders)
        self.paused_senders = {k: v for k, v in state.items() if v}

    def _note_pause(self, instance_id: str, reason: str) -> None:
        self.paused_senders[instance_id] = reason
        log.warning("sender instance %s paused: %s", instance_id, reason)

    def _check_safety(self, campaign_ids: Iterable[int], now: datetime) -> None:
        for cid in campaign_ids:
            camp = self._campaigns.get(cid)
            if camp is None:
                continue
            safety = camp.policy.safety
            with self.engine.begin() as conn:
                counts = dq.state_counts(conn, cid)
                attempted = sum(counts[s] for s in dl.ATTEMPTED)
                if attempted < max(1, safety.min_sample):
                    continue
                rate = counts[dl.FAILED] / attempted
                if rate <= safety.max_failure_rate:
                    continue
                reason = (
                    f"failure rate {rate:.0%} of {attempted} attempts passed the limit "
                    f"{safety.max_failure_rate:.0%}"
                )
                try:
                    lifecycle.transition(conn, cid, lifecycle.PAUSED, reason=reason, now=now)
                except lifecycle.InvalidTransition:
                    continue
            log.warning("campaign %s paused: %s", cid, reason)

    def _finish_campaigns(self, running: list[_Campaign], result: TickResult) -> None:
        now = self.clock.now()
        for camp in running:
            with self.engine.begin() as conn:
                if dq.has_pending(conn, camp.id, open_states=dl.OPEN):
                    continue
                try:
                    lifecycle.transition(conn, camp.id, lifecycle.COMPLETED, now=now)
                except lifecycle.InvalidTransition:
                    continue
            result.completed.append(camp.id)
            log.info("campaign %s completed", camp.id)

    # -- loops ---------------------------------------------------------------------------

    def run(
        self,
        stop: threading.Event | None = None,
        *,
        until_done: bool = False,
        on_tick: Callable[[TickResult], None] | None = None,
        max_ticks: int | None = None,
        stop_when_stalled: bool = False,
    ) -> int:
        """Tick until ``stop`` is set (or, with ``until_done``, no watched campaign runs;
        with ``stop_when_stalled``, also when every running one is stalled).

        Between idle ticks the clock sleeps until the next due moment (at most
        ``poll_seconds``). Returns the number of ticks.
        """
        ticks = 0
        while stop is None or not stop.is_set():
            result = self.tick()
            ticks += 1
            if on_tick is not None:
                on_tick(result)
            if max_ticks is not None and ticks >= max_ticks:
                break
            if until_done and not self._any_running():
                break
            if stop_when_stalled and self._all_stalled() and not self._inflight:
                break
            if result.claimed or result.in_flight:
                continue
            wait = 0.0
            if result.next_wake is not None:
                wait = (result.next_wake - self.clock.now()).total_seconds()
            self.clock.sleep(min(max(wait, 0.0), self.poll_seconds) if wait > 0 else 0.001)
        self.flush()
        return ticks

    def _all_stalled(self) -> bool:
        """True when every watched running campaign is stalled (and there is one)."""
        running = set(self._campaigns)
        return bool(running) and running <= set(self.stalled)

    def _any_running(self) -> bool:
        stmt = select(_campaigns.c.id).where(_campaigns.c.state == lifecycle.RUNNING)
        if self.campaign_ids is not None:
            stmt = stmt.where(_campaigns.c.id.in_(self.campaign_ids))
        with self.engine.connect() as conn:
            return conn.execute(stmt.limit(1)).first() is not None


def describe_counts(counts: dict[str, Any]) -> str:
    """``sent 10, delivered 3, ...`` for logs and progress lines (non-zero states only)."""
    return ", ".join(f"{k} {v}" for k, v in counts.items() if v)
