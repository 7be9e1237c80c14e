"""Text both databases store: the one rule for the characters PostgreSQL refuses.

PostgreSQL's ``text`` and ``jsonb`` refuse the NUL character (U+0000, ``\\u0000`` in JSON),
and no database driver encodes a lone surrogate (U+D800 to U+DFFF: a JSON ``\\ud800``
without its pair; a valid pair decodes to one character). SQLite would take a NUL, but a
value must mean the same on both dialects, so the rule holds on both:

* input from a person (API, dashboard, CLI) holding one is refused, naming the field
  (:func:`unstorable_at`, :func:`describe`);
* input from the gateway (webhook events) has them removed (:func:`storable`), so an
  event is stored and applied, never lost for a character.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

#: the characters no database here stores: NUL and lone surrogates
UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def describe(text: str) -> str | None:
    """The first unstorable character of ``text`` in words, or None when it has none."""
    found = UNSTORABLE.search(text)
    if found is None:
        return None
    char = found.group()
    what = "a NUL character" if char == "\x00" else "a lone surrogate"
    return f"holds {what} (U+{ord(char):04X}) at position {found.start()}, which cannot be stored"


def unstorable_at(value: Any, path: str = "") -> tuple[str, str] | None:
    """The first string (or mapping key) of a JSON-like ``value`` holding an unstorable
    character: ``(its path, e.g. "tags[2]" or "" for value itself, what is wrong)``;
    None when there is none."""
    if isinstance(value, str):
        problem = describe(value)
        return None if problem is None else (path, problem)
    if isinstance(value, Mapping):
        for key, item in value.items():
            where = f"{path}.{key}" if path else str(key)
            if isinstance(key, str) and (problem := describe(key)) is not None:
                return (path, f"a key {problem}")
            found = unstorable_at(item, where)
            if found is not None:
                return found
        return None
    if isinstance(value, list | tuple | set | frozenset):
        for i, item in enumerate(value):
            found = unstorable_at(item, f"{path}[{i}]")
            if found is not None:
                return found
    return None


def storable(value: Any) -> Any:
    """``value`` (a string, or JSON-like: mappings, lists) with every unstorable character
    removed; what holds none is returned as it is."""
    if isinstance(value, str):
        return UNSTORABLE.sub("", value) if UNSTORABLE.search(value) else value
    if isinstance(value, Mapping):
        return {storable(k): storable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [storable(v) for v in value]
    return value


__all__ = ["UNSTORABLE", "describe", "storable", "unstorable_at"]
