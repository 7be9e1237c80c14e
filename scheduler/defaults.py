"""Scheduler defaults that light modules need too (the CLI's ``--help``, the settings).

Nothing heavy is imported here: ``gatecast --help`` shows these without the scheduler.
"""

from __future__ import annotations

from typing import Final

#: How long a paused sender keeps its queued recipients before they go to the campaign's
#: other senders (``GATECAST_SENDER_GRACE_SECONDS``, ``campaign run --sender-grace``).
DEFAULT_SENDER_GRACE_SECONDS: Final = 300.0
