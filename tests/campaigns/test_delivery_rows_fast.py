"""The fast materialisation path gives exactly the rows of the reference path (SQLite + PG).

:func:`campaigns.delivery_rows.build_rows` (dicts, an eagerly seeded RNG per recipient,
``insert_deliveries``) is the reference; :func:`materialise` and
:func:`materialise_committed` (driver-ready tuples, a lazily seeded RNG, a static message
rendered once, anti-join pages) must store the same rows.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, delete, select

from campaigns import delivery_rows as mat
from campaigns.campaign_file import parse_campaign
from campaigns.render import recipient_rng
from campaigns.service import create_campaign
from storage import tables
from storage.queries.campaigns import insert_deliveries
from tests.campaigns.campaign_fixtures import NOW, make_list, people, spec

deliveries = tables.deliveries
COLUMNS: tuple[str, ...] = ("target", "target_kind", "contact_id", "sender", "state")
COLUMNS += ("attempts", "due_at", "content", "error", "queued_at")


def _stored(engine: Engine, campaign_id: int) -> dict[str, tuple[Any, ...]]:
    cols = [deliveries.c[c] for c in COLUMNS]
    with engine.connect() as conn:
        rows = conn.execute(select(*cols).where(deliveries.c.campaign_id == campaign_id)).all()
    return {r.target: tuple(r) for r in rows}


def _forget(engine: Engine, campaign_id: int) -> None:
    with engine.begin() as conn:
        conn.execute(delete(deliveries).where(deliveries.c.campaign_id == campaign_id))


def _reference(engine: Engine, campaign_id: int, instances: list[str]) -> None:
    """The reference path: every member through build_rows and insert_deliveries."""
    with engine.begin() as conn:
        stored, source = mat._load(conn, campaign_id)
        assert source is not None
        for chunk in mat.list_recipients(conn, source[1], chunk=5):
            senders = {r.target: mat.pick_sender(r.target, instances) for r in chunk}
            insert_deliveries(
                conn, mat.build_rows(stored, campaign_id, chunk, now=NOW, senders=senders)
            )


MESSAGES: list[dict[str, Any]] = [
    {"type": "text", "text": "{Hi|Hello} {{ name }} in {{ city }}"},
    {"type": "text", "text": "Same text for everyone, no variables."},
    {"type": "text", "text": "{{ name }}: {a|{b|c}|d} {e|f}"},
    {"type": "media", "media_url": "https://e.x/m.pdf", "caption": "{{ city }} menu"},
]


@pytest.mark.parametrize("message", MESSAGES)
def test_fast_paths_store_the_reference_rows(engine: Engine, message: dict[str, Any]) -> None:
    crowd = people(13)
    crowd[3]["opted_out"] = True
    crowd[5]["attributes"] = {}  # no city: unrenderable where the message uses it
    crowd[7]["name"] = "{x|y} {{ not jinja }}"  # spintax-looking data is spun, never Jinja
    make_list(engine, "customers", crowd)
    cid = create_campaign(engine, spec(message=message), now=NOW).id
    _reference(engine, cid, ["A"])
    ref = _stored(engine, cid)
    assert len(ref) == 13
    _forget(engine, cid)
    with engine.begin() as conn:
        one = mat.materialise(conn, cid, now=NOW, instances=["A"])
    assert _stored(engine, cid) == ref
    assert one.queued == sum(1 for r in ref.values() if r[4] == "queued")
    _forget(engine, cid)
    committed = mat.materialise_committed(engine, cid, now=NOW, instances=["A"], chunk=4)
    assert committed == one
    assert _stored(engine, cid) == ref


def test_static_detection() -> None:
    def message(**m: Any) -> Any:
        return parse_campaign({"name": "n", "list": "l", "message": m}).message

    assert mat.is_static(message(type="text", text="Hello there | friends"))
    assert not mat.is_static(message(type="text", text="Hello {{ name }}"))
    assert not mat.is_static(message(type="text", text="{Hi|Hello}"))
    assert not mat.is_static(message(type="text", text="Hi {# a comment #}"))
    assert not mat.is_static(
        message(type="media", media_url="https://e.x/{a}.pdf", caption="plain")
    )


@settings(max_examples=60, deadline=None)
@given(
    campaign_id=st.integers(min_value=1, max_value=10**9),
    target=st.text(max_size=20),
    calls=st.lists(st.sampled_from(["choice", "random", "randint", "shuffle", "gauss"])),
)
def test_lazy_rng_draws_what_the_eager_one_draws(
    campaign_id: int, target: str, calls: list[str]
) -> None:
    lazy: random.Random = mat._LazyRng(campaign_id, target)
    eager = recipient_rng(campaign_id, target)
    for call in calls:
        if call == "choice":
            assert lazy.choice("abcdefg") == eager.choice("abcdefg")
        elif call == "random":
            assert lazy.random() == eager.random()
        elif call == "randint":
            assert lazy.randint(0, 10**20) == eager.randint(0, 10**20)
        elif call == "gauss":
            assert lazy.gauss(0, 1) == eager.gauss(0, 1)
        else:
            a, b = list(range(9)), list(range(9))
            lazy.shuffle(a)
            eager.shuffle(b)
            assert a == b
