"""APScheduler wiring: campaign starts (date triggers), recurrences (cron triggers).

The database is the source of truth. Jobs live in a MemoryJobStore and are rebuilt
from the ``campaigns`` table on start and on every :meth:`CampaignJobs.sync`: a
campaign created by another process (CLI, API) gets its job at the next sync.

Deliberate settings (DESIGN.md found APScheduler pitfalls):
- ``misfire_grace_time=None``: APScheduler never drops a late job silently; the job
  itself applies gatecast's missed-start policy (``scheduler.starts``), which can
  record *why* a start was missed.
- ``coalesce=True`` and ``max_instances=1``: a backlog of cron fires runs once.
- The per-delivery timing is in ``deliveries.due_at``, never one job per message.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.date import DateTrigger
from sqlalchemy import Engine, select

from campaigns import lifecycle
from scheduler.recurrence import catch_up, make_trigger
from scheduler.starts import fail_start, start_campaign
from storage import tables
from storage.types import utcnow

log = logging.getLogger("gatecast.scheduler")

_campaigns = tables.campaigns

JOB_DEFAULTS: dict[str, Any] = {
    "misfire_grace_time": None,
    "coalesce": True,
    "max_instances": 1,
}


class CampaignJobs:
    """Owns a BackgroundScheduler whose jobs mirror the scheduled campaigns."""

    def __init__(self, engine: Engine, *, now: Callable[[], datetime] = utcnow) -> None:
        self.engine = engine
        self.now = now
        self.scheduler = BackgroundScheduler(timezone=UTC, job_defaults=JOB_DEFAULTS)
        self._caught_up: set[int] = set()

    def start(self) -> None:
        """Start the scheduler thread and build the jobs from the database."""
        if not self.scheduler.running:
            self.scheduler.start()
        self.sync()

    def shutdown(self) -> None:
        """Stop the scheduler (jobs are rebuilt from the database next time)."""
        if self.scheduler.running:
            self.scheduler.shutdown(wait=False)
        self._caught_up.clear()

    def clear(self) -> None:
        """Drop every job (this process lost the scheduler lease)."""
        for job in self.scheduler.get_jobs():
            job.remove()
        self._caught_up.clear()

    # -- jobs ----------------------------------------------------------------------------

    def _start_job(self, campaign_id: int) -> None:
        # a start that cannot happen marks the campaign failed (scheduler.starts); what
        # reaches here is transient (database unavailable, a race) and is retried next sync
        try:
            start_campaign(self.engine, campaign_id, now=self.now())
        except Exception:
            log.exception("starting campaign %s failed; retrying at the next sync", campaign_id)

    def _cron_job(self, parent_id: int) -> None:
        now = self.now()
        try:
            with self.engine.connect() as conn:
                state = conn.execute(
                    select(_campaigns.c.state).where(_campaigns.c.id == parent_id)
                ).scalar()
            if state != lifecycle.SCHEDULED:
                return
            # the occurrence this fire stands for: the latest fire time up to now
            catch_up(self.engine, parent_id, now=now)
        except Exception:
            log.exception("recurring campaign %s failed to fire", parent_id)

    def sync(self) -> None:
        """Make the job set match the campaigns table (add, replace, remove)."""
        now = self.now()
        wanted: dict[str, tuple[Any, Callable[..., None], tuple[Any, ...]]] = {}
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(
                    _campaigns.c.id,
                    _campaigns.c.start_at,
                    _campaigns.c.cron,
                    _campaigns.c.timezone,
                ).where(_campaigns.c.state == lifecycle.SCHEDULED)
            ).all()
        due_now: list[int] = []
        for cid, start_at, cron, tz in rows:
            cid = int(cid)
            if cron:
                if cid not in self._caught_up:
                    self._caught_up.add(cid)
                    try:
                        catch_up(self.engine, cid, now=now)
                    except Exception:
                        log.exception("catching up recurring campaign %s failed", cid)
                try:
                    trigger = make_trigger(cron, tz or "UTC")
                except ValueError as exc:  # validated at create: only a damaged row
                    fail_start(self.engine, cid, f"cannot schedule {cron!r}: {exc}", now=now)
                    continue
                wanted[f"cron:{cid}"] = (trigger, self._cron_job, (cid,))
            elif start_at is None or start_at <= now:
                due_now.append(cid)
            else:
                wanted[f"start:{cid}"] = (
                    DateTrigger(run_date=start_at, timezone=UTC),
                    self._start_job,
                    (cid,),
                )
        existing = {job.id: job for job in self.scheduler.get_jobs()}
        for job_id, job in existing.items():
            if job_id not in wanted:
                job.remove()
        for job_id, (trigger, func, args) in wanted.items():
            job = existing.get(job_id)
            if job is not None and str(job.trigger) == str(trigger):
                continue
            self.scheduler.add_job(
                func, trigger, args=args, id=job_id, replace_existing=True, name=job_id
            )
        for cid in due_now:
            self._start_job(cid)

    def job_ids(self) -> list[str]:
        """The ids of the current jobs (``start:<id>``, ``cron:<id>``)."""
        return sorted(job.id for job in self.scheduler.get_jobs())
