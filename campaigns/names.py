"""What a name may hold: the one rule every name check calls (contacts, lists, tags,
segments, campaigns, instance labels, key labels; user names are plainer still).

A name is shown to other people (lists, reports, the dashboard): it must not hold a
character that reorders the text around it, the bidirectional controls (a right-to-left
override makes ``"invoice\\u202egnp.exe"`` read as ``"invoiceexe.png"``), nor one no
database stores (:mod:`gateway.text`).
"""

from __future__ import annotations

import re

from gateway.text import describe

#: the bidirectional formatting characters: the embeddings and overrides U+202A to U+202E,
#: the isolates U+2066 to U+2069, the marks U+200E, U+200F and U+061C
BIDI_CONTROLS = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a name for a character it holds, or None when it can."""
    found = BIDI_CONTROLS.search(name)
    if found is not None:
        return (
            f"holds a bidirectional control character (U+{ord(found.group()):04X}) at "
            f"position {found.start()}, which could disguise it"
        )
    return describe(name)


__all__ = ["BIDI_CONTROLS", "name_problem"]
