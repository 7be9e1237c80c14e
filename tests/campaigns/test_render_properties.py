"""Spintax properties: every output is one of the texts the template can produce."""

from __future__ import annotations

import itertools
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from campaigns.render import spin

WORD = st.text(alphabet="abcxyz .,!", min_size=0, max_size=4)


@st.composite
def spintax(draw: st.DrawFn, depth: int = 0) -> tuple[str, set[str]]:
    """A spintax text and the set of every text it can become."""
    parts: list[tuple[str, set[str]]] = []
    for _ in range(draw(st.integers(1, 3))):
        if depth < 2 and draw(st.booleans()):
            options = [draw(spintax(depth + 1)) for _ in range(draw(st.integers(2, 3)))]
            source = "{" + "|".join(o[0] for o in options) + "}"
            outcomes = set().union(*(o[1] for o in options))
            parts.append((source, outcomes))
        else:
            word = draw(WORD)
            parts.append((word, {word}))
    text = "".join(p[0] for p in parts)
    produced = {"".join(combo) for combo in itertools.product(*(sorted(p[1]) for p in parts))}
    return text, produced


@settings(max_examples=200, deadline=None)
@given(spintax(), st.integers(0, 2**32))
def test_output_is_a_possible_text(case: tuple[str, set[str]], seed: int) -> None:
    text, possible = case
    assert spin(text, random.Random(seed)) in possible


@given(st.text(alphabet="ab{}|", max_size=12), st.integers(0, 1000))
def test_never_crashes_on_any_braces(text: str, seed: int) -> None:
    out = spin(text, random.Random(seed))
    assert len(out) <= len(text)
