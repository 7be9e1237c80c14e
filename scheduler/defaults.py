"""Scheduler defaults that light modules need too (the CLI's ``--help``, the settings).

Nothing heavy is imported here: ``gatecast --help`` shows these without the scheduler.
"""

from __future__ import annotations

from typing import Final

#: How long a paused sender keeps its queued recipients before they go to the campaign's
#: other senders (``GATECAST_SENDER_GRACE_SECONDS``, ``campaign run --sender-grace``).
DEFAULT_SENDER_GRACE_SECONDS: Final = 300.0

#: How long status events stay stored once applied to their delivery
#: (``GATECAST_EVENT_RETENTION_DAYS``; 0 keeps them forever): :mod:`scheduler.retention`.
DEFAULT_EVENT_RETENTION_DAYS: Final = 30.0
#: The shortest retention allowed: longer than the evidence settling of ``unknown`` rows
#: looks back (``campaigns.delivery_lifecycle.EVIDENCE_LOOKBACK`` + ``EVIDENCE_WINDOW``).
MIN_EVENT_RETENTION_DAYS: Final = 3.0
#: How many paced sends one process lets wait on the gateway at once
#: (``GATECAST_SEND_CONCURRENCY``). Size it as senders x gateway latency / gap: 500 senders
#: at 20 a minute (a 3 s gap) on a gateway answering in 1 s keep about 167 sends waiting;
#: 256 leaves room for latency up to about 1.5 s at that size.
DEFAULT_SEND_CONCURRENCY: Final = 256
#: How long a worker's lease on a sender lasts without renewal
#: (``GATECAST_SENDER_LEASE_SECONDS``): a dead worker's senders go to the others after it;
#: a worker renews every third of it (:mod:`scheduler.sender_leases`).
DEFAULT_SENDER_LEASE_SECONDS: Final = 10.0
#: How many webhook registrations one process has waiting on the gateway at once
#: (``GATECAST_WEBHOOK_REGISTER_CONCURRENCY``): at start, on the leader's check and on
#: ``campaign run --webhook``. 500 senders on a gateway answering in 1 s register in
#: about 32 s at 16 (8 minutes one at a time); dispatch does not wait for them.
DEFAULT_WEBHOOK_REGISTER_CONCURRENCY: Final = 16
