"""A validated campaign as the TOML campaign file the CLI takes (the way back of
:func:`campaigns.campaign_file.parse_toml`).

``parse_toml(spec_to_toml(spec).encode()) == spec`` for every spec TOML can say: the
file lists what differs from the defaults (``name`` and ``[message] type`` always), in
the order the reference (docs/campaign-file.md) shows the sections. TOML has no null, so
a spec holding one where the default is a value (``pace.daily_cap`` null: no daily cap,
only possible through the JSON API) is refused naming the field. No TOML library: the
campaign file's shapes are few (text, numbers, true/false, lists of them, tables, lists
of tables), and each is written here with TOML's escapes.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from campaigns.campaign_file import CampaignFileError, CampaignSpec, FieldError

#: the order of the top-level keys and sections in the file written
_ORDER = (
    "name",
    "list",
    "groups",
    "instances",
    "audience",
    "message",
    "schedule",
    "pace",
    "retry",
    "safety",
    "steps",
)
_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")
_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\f": "\\f", "\r": "\\r"}


def _key(name: str) -> str:
    return name if _BARE_KEY.match(name) else _string(name)


def _escaped(text: str, *, newlines: bool) -> str:
    out: list[str] = []
    for ch in text:
        if ch == "\n":
            out.append("\n" if newlines else "\\n")
        elif ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04X}")
        else:
            out.append(ch)
    return "".join(out)


def _string(text: str) -> str:
    """A TOML string: a multi-line basic string when the text has line breaks."""
    if "\n" in text:
        # the newline right after the opening quotes is not part of the value
        return '"""\n' + _escaped(text, newlines=True) + '"""'
    return '"' + _escaped(text, newlines=False) + '"'


def _value(value: Any, path: str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _Unwritable(path, "not a finite number")
        return str(int(value)) if value.is_integer() and abs(value) < 1e15 else repr(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, Sequence):
        return "[" + ", ".join(_value(v, f"{path}[{i}]") for i, v in enumerate(value)) + "]"
    if isinstance(value, Mapping):
        inner = ", ".join(f"{_key(k)} = {_value(v, f'{path}.{k}')}" for k, v in value.items())
        return "{ " + inner + " }" if inner else "{}"
    if value is None:
        raise _Unwritable(path, "TOML has no null: give a value (or leave the field out)")
    raise _Unwritable(path, f"cannot be written as TOML ({type(value).__name__})")


class _Unwritable(ValueError):
    def __init__(self, path: str, message: str) -> None:
        super().__init__(message)
        self.path = path


def _is_table_list(value: Any) -> bool:
    return (
        isinstance(value, Sequence)
        and not isinstance(value, str)
        and bool(value)
        and all(isinstance(v, Mapping) for v in value)
    )


def _table(lines: list[str], header: str, data: Mapping[str, Any], path: str) -> None:
    """``data``'s plain keys, then its sub-tables and lists of tables (TOML's order)."""
    plain = [(k, v) for k, v in data.items() if not isinstance(v, Mapping) or k == "where"]
    plain = [(k, v) for k, v in plain if not _is_table_list(v)]
    for key, value in plain:
        lines.append(f"{_key(key)} = {_value(value, _join(path, key))}")
    for key, value in data.items():
        sub = _join(path, key)
        name = f"{header}.{_key(key)}" if header else _key(key)
        if isinstance(value, Mapping) and key != "where":
            lines.extend(["", f"[{name}]"])
            _table(lines, name, value, sub)
        elif _is_table_list(value):
            for i, item in enumerate(value):
                lines.extend(["", f"[[{name}]]"])
                _table(lines, name, item, f"{sub}[{i}]")


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _without_nulls(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def _wanted(spec: CampaignSpec) -> dict[str, Any]:
    """What the file says: every value that differs from its default, and the two
    required ones. A null is left out (it is the default) except where the default is a
    value: ``pace.daily_cap`` null (no cap) is kept, so that it is refused."""
    data = _without_nulls(spec.model_dump(mode="json", exclude_defaults=True))
    data["name"] = spec.name
    data["message"] = {"type": spec.message.type, **data.get("message", {})}
    if spec.pace.daily_cap is None:
        data.setdefault("pace", {})["daily_cap"] = None
    return {k: data[k] for k in _ORDER if k in data}


def spec_to_toml(spec: CampaignSpec, source: str = "the campaign") -> str:
    """The campaign file (TOML text) of a validated ``spec``.

    Raises :class:`CampaignFileError` naming a field TOML cannot hold (a null).
    """
    lines: list[str] = []
    try:
        _table(lines, "", _wanted(spec), "")
    except _Unwritable as exc:
        raise CampaignFileError([FieldError(exc.path, str(exc))], source) from None
    return "\n".join(lines).lstrip("\n") + "\n"


__all__ = ["spec_to_toml"]
