"""Rendered variety (issue 16, item 4): the digest of a message body, and the campaign
create's count of distinct rendered bodies over a sample of its audience.

The identical-content guard (``scheduler/content_guard.py``) holds a sender's run of
identical bodies past ``[safety] max_identical_in_row``; it compares bodies by
:func:`body_digest`. At create the same digest counts how many distinct messages the
first :data:`SAMPLE` recipients get: below :data:`LOW_SHARE` of them, the create warns
(spintax or variables should vary the text, or the guard will slow the campaign down).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

#: the default of ``[safety] max_identical_in_row`` (``GATECAST_MAX_IDENTICAL_IN_ROW``);
#: here, not in ``campaign_file``, so settings import no template engine
DEFAULT_MAX_IDENTICAL_IN_ROW = 20

#: recipients whose rendered messages the create compares
SAMPLE = 200
#: fewer distinct bodies than this share of the sample is low variety
LOW_SHARE = 0.5


def body_digest(content: Any) -> str:
    """A short digest of a rendered message (its stored JSON form): equal bodies, equal
    digests (32 hex characters, ``instances.body_digest``)."""
    text = json.dumps(content, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


@dataclass(frozen=True)
class Variety:
    """Distinct rendered bodies over the recipients sampled, and the warning when low."""

    sampled: int
    distinct: int
    warning: str | None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"sampled": self.sampled, "distinct": self.distinct, "warning": self.warning}


@dataclass
class VarietyCount:
    """Counts distinct bodies as recipients are rendered (the first :data:`SAMPLE`)."""

    limit: int = SAMPLE
    sampled: int = 0
    digests: set[str] = field(default_factory=set)

    def add(self, content: Any) -> None:
        """Count one recipient's rendered message (beyond the sample: ignored)."""
        if self.sampled < self.limit:
            self.sampled += 1
            self.digests.add(body_digest(content))

    def result(self, max_in_row: int) -> Variety:
        """The count, with a warning when the distinct bodies are fewer than
        :data:`LOW_SHARE` of the sample (two recipients or more)."""
        distinct = len(self.digests)
        warning = None
        if self.sampled >= 2 and distinct < self.sampled * LOW_SHARE:
            guard = (
                f"the identical-content guard holds a sender after {max_in_row} identical "
                "messages in a row"
                if max_in_row > 0
                else "the identical-content guard is off ([safety] max_identical_in_row = 0)"
            )
            warning = (
                f"low variety: {distinct} distinct message(s) over the first "
                f"{self.sampled} recipients; vary the text with spintax ({{Hi|Hello}}) or "
                f"variables ({{{{ name }}}}): {guard}"
            )
        return Variety(self.sampled, distinct, warning)


__all__ = [
    "LOW_SHARE",
    "SAMPLE",
    "Variety",
    "VarietyCount",
    "body_digest",
]
