"""``gateway.text``: the characters no database stores, found with their place, removed."""

from __future__ import annotations

from gateway.text import describe, storable, unstorable_at


def test_found_with_their_place() -> None:
    assert describe("plain") is None and describe("\U0001f600 emoji") is None
    assert "NUL character (U+0000) at position 1" in (describe("a\x00") or "")
    assert "lone surrogate (U+D800)" in (describe("\ud800") or "")
    assert unstorable_at({"a": ["x", {"b": "y\x00"}]}) is not None
    where, _ = unstorable_at({"a": ["x", {"b": "y\x00"}]}) or ("", "")
    assert where == "a[1].b"
    where, problem = unstorable_at({"k\x00": "v"}) or ("", "")
    assert where == "" and problem.startswith("a key holds")
    assert unstorable_at({"a": [1, 2.5, None, True, "ok"]}) is None


def test_removed() -> None:
    assert storable({"t\x00": ["a\x00b", "\udc00c", 3]}) == {"t": ["ab", "c", 3]}
    same = {"a": "b"}
    assert storable("plain") == "plain" and storable(same) == same
