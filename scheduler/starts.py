"""Starting a campaign: the missed-start policy, materialising rows, entering ``running``.

A start runs in three steps so that a big list never holds SQLite's write lock for long
(DESIGN.md decision 1 still holds: every row exists before anything is sent):

1. a short transaction checks the campaign (still ``scheduled``, start not missed, a
   sender instance available) and records the senders' instance rows;
2. :func:`campaigns.delivery_rows.materialise_committed` creates the delivery rows in
   chunks, each committed on its own (rendering happens outside write transactions);
3. a short transaction materialises whatever is still missing (members added
   meanwhile; normally nothing) and moves the campaign to ``running``.

A crash after step 2 began leaves ``queued`` rows of a campaign that is still
``scheduled``: the dispatcher claims rows of ``running`` campaigns only, so none is
sent, and the next start (the scheduler re-fires a due start on restart; ``campaign
run`` again) completes the rows idempotently and starts it. Should the campaign be
cancelled meanwhile, or its start be missed, the left-over queued rows become skipped.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, Engine, select
from sqlalchemy.exc import IntegrityError, OperationalError

from campaigns import lifecycle
from campaigns.campaign_file import CampaignFileError, start_missed
from campaigns.delivery_lifecycle import SKIP_QUEUED
from campaigns.delivery_rows import materialise, materialise_committed
from scheduler.policy import policy_from_spec
from storage import states, tables
from storage.queries import campaigns as cq
from storage.queries import instances as iq
from storage.queries import tallies

log = logging.getLogger("gatecast.scheduler")

_campaigns = tables.campaigns

#: the error of left-over queued rows of a campaign cancelled while it was starting
CANCELLED_WHILE_STARTING = "campaign cancelled"

#: why a campaign without a sender to send through failed to start
NO_SENDER = (
    "no sender instance: none named in the campaign and none linked (a sender is linked "
    "once its QR code was shown for the scan, or a connection event or an accepted send "
    "said so); link a sender, then create the campaign again"
)

#: campaigns being started by this process
_starting: set[int] = set()
_starting_lock = threading.Lock()


@dataclass(frozen=True)
class StartResult:
    """What became of a start request: ``started``, ``missed``, ``failed`` or ``skipped``.

    ``queued`` and ``skipped`` count the campaign's rows in those states once started.
    """

    campaign_id: int
    outcome: str
    detail: str = ""
    queued: int = 0
    skipped: int = 0


def missed_reason(start_at: datetime) -> str:
    """The reason recorded on a campaign whose start was missed beyond its grace."""
    return f"missed start at {start_at.isoformat()}"


def start_failure_reason(exc: Exception) -> str:
    """What the user reads on a campaign whose start raised ``exc``."""
    if isinstance(exc, CampaignFileError):
        problems = "; ".join(str(e) for e in exc.errors)
        return f"cannot start: the stored campaign is not valid ({problems})"[:500]
    return f"cannot start: {exc}"[:500]


def _mark_failed(conn: Connection, campaign_id: int, reason: str, *, now: datetime) -> None:
    lifecycle.transition(conn, campaign_id, lifecycle.FAILED, reason=reason, now=now)
    cq.skip_queued(conn, campaign_id, reason, move=SKIP_QUEUED, now=now)  # interrupted start


def fail_start(
    engine: Engine,
    campaign_id: int,
    reason: str,
    *,
    now: datetime,
    exc: BaseException | None = None,
) -> StartResult:
    """Mark a ``scheduled`` campaign whose start cannot happen ``failed`` with ``reason``.

    Once: the scheduler starts only ``scheduled`` campaigns, so it is not retried each
    sync; ``campaign show`` and the API show the reason. Left-over queued rows (an
    interrupted start) become skipped with the same reason. One log record, with the
    traceback of ``exc`` when an error caused it.
    """
    with engine.begin() as conn:
        try:
            _mark_failed(conn, campaign_id, reason, now=now)
        except lifecycle.InvalidTransition as refused:
            return StartResult(campaign_id, "skipped", str(refused))
    log.error("campaign %s failed to start: %s", campaign_id, reason, exc_info=exc)
    return StartResult(campaign_id, "failed", reason)


def _check(
    engine: Engine, campaign_id: int, *, now: datetime, enforce_grace: bool
) -> StartResult | list[str]:
    """Step 1: the senders to materialise for, or the result of a start that ends here."""
    with engine.begin() as conn:
        row = conn.execute(
            select(
                _campaigns.c.state,
                _campaigns.c.spec,
                _campaigns.c.timezone,
                _campaigns.c.start_at,
            ).where(_campaigns.c.id == campaign_id)
        ).first()
        if row is None:
            return StartResult(campaign_id, "skipped", "no such campaign")
        state, spec, tz, start_at = row
        if state != lifecycle.SCHEDULED:
            return StartResult(campaign_id, "skipped", f"campaign is {state}")
        policy = policy_from_spec(spec or {}, timezone=tz)
        if (
            enforce_grace
            and start_at is not None
            and start_missed(start_at, now, policy.missed_grace_minutes)
        ):
            reason = missed_reason(start_at)
            _mark_failed(conn, campaign_id, reason, now=now)
            log.warning(
                "campaign %s: %s (grace %s min)", campaign_id, reason, policy.missed_grace_minutes
            )
            return StartResult(campaign_id, "missed", reason)
        # without ``instances``: every linked one (connected, unconfirmed): campaigns.instances
        instances = list(policy.instances) or iq.linked_ids(conn)
        if not instances:
            _mark_failed(conn, campaign_id, NO_SENDER, now=now)
            log.error("campaign %s failed to start: %s", campaign_id, NO_SENDER)
            return StartResult(campaign_id, "failed", NO_SENDER)
        iq.ensure(conn, instances, now=now)
    return instances


def start_campaign(
    engine: Engine, campaign_id: int, *, now: datetime, enforce_grace: bool = True
) -> StartResult:
    """Start a ``scheduled`` campaign now, or mark it failed when its start was missed.

    A start that cannot happen (no sender, an unreadable stored spec, any error but an
    unavailable database or a race with another process) marks the campaign ``failed``
    once with the reason (:func:`fail_start`); those two are raised for the caller to retry.

    Missed-start policy: a start up to ``schedule.missed_grace_minutes`` late runs late;
    later than that (the service was down) the campaign becomes ``failed`` with the
    reason ``missed start at <time>``. ``enforce_grace=False`` (``campaign run``: the
    user asked for it now) starts it however late. Anything but ``scheduled`` is skipped.
    Rows are created in committed chunks first (see the module doc); a rerun after a
    crash completes them. A start of a campaign this process is already starting (a
    date job and the scheduler's sync firing together) is skipped; in other processes
    the unique rows and the state check keep a second start harmless.
    """
    with _starting_lock:
        if campaign_id in _starting:
            return StartResult(campaign_id, "skipped", "campaign is already starting")
        _starting.add(campaign_id)
    try:
        return _start(engine, campaign_id, now=now, enforce_grace=enforce_grace)
    except (OperationalError, IntegrityError):
        # the database is unavailable or busy, or another process raced this start:
        # nothing to record, the caller retries (the next start is idempotent)
        raise
    except Exception as exc:
        return fail_start(engine, campaign_id, start_failure_reason(exc), now=now, exc=exc)
    finally:
        with _starting_lock:
            _starting.discard(campaign_id)


def _start(engine: Engine, campaign_id: int, *, now: datetime, enforce_grace: bool) -> StartResult:
    checked = _check(engine, campaign_id, now=now, enforce_grace=enforce_grace)
    if isinstance(checked, StartResult):
        return checked
    instances = checked
    materialise_committed(engine, campaign_id, now=now, instances=instances)
    with engine.begin() as conn:
        state = conn.execute(
            select(_campaigns.c.state).where(_campaigns.c.id == campaign_id)
        ).scalar_one_or_none()
        if state != lifecycle.SCHEDULED:
            # changed while its rows were being created (e.g. cancelled): nothing starts
            if state == lifecycle.CANCELLED:
                cq.skip_queued(
                    conn, campaign_id, CANCELLED_WHILE_STARTING, move=SKIP_QUEUED, now=now
                )
            return StartResult(campaign_id, "skipped", f"campaign is {state}")
        materialise(conn, campaign_id, now=now, instances=instances)
        lifecycle.transition(conn, campaign_id, lifecycle.RUNNING, now=now)
    with engine.connect() as conn:
        counts = tallies.delivery_counts(conn, campaign_id)
    queued, skipped = counts.get(states.QUEUED, 0), counts.get(states.SKIPPED, 0)
    log.info("campaign %s started: %d queued, %d skipped", campaign_id, queued, skipped)
    return StartResult(campaign_id, "started", queued=queued, skipped=skipped)
