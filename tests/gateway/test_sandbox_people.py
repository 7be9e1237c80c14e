"""The sandbox's simulated people (docs/sandbox.md "Simulated people"): reply, tap,
keyword and STOP rates, seeded; one answer per message at most; nothing after STOP."""

from __future__ import annotations

import json
import random
from collections import Counter
from typing import Any

import pytest

from gateway.event_parsing import parse_webhook
from gateway.events import IncomingMessage
from gateway.sandbox import SandboxConfig
from gateway.sandbox.planning import plan_message_events, stable_choice
from gateway.sandbox.records import SentMessage
from gateway.sandbox.state import SandboxState

BUTTONS = [("yes", "Yes"), ("no", "No"), ("later", "Later")]
INTERACTIVE: dict[str, Any] = {
    "message": {
        "interactiveButtons": [
            {
                "name": "quick_reply",
                "buttonParamsJson": json.dumps({"id": bid, "display_text": title}),
            }
            for bid, title in BUTTONS
        ]
    }
}
LIST: dict[str, Any] = {
    "message": {
        "sections": [{"rows": [{"rowId": "r1", "title": "One"}, {"rowId": "r2", "title": "Two"}]}]
    }
}
TEXT: dict[str, Any] = {"message": {"text": "hello"}}


def _state(**rates: Any) -> tuple[SandboxState, Any]:
    cfg = SandboxConfig(status_delays=(0.0, 0.0, 0.0), auto_link=True, **rates)
    state = SandboxState(cfg, clock=lambda: 1_700_000_000.0, start_emitter=False)
    iid = state.create_instance("sandbox-token")["instance_id"]
    return state, state.instances[iid]


def _send(state: SandboxState, inst: Any, to: str, kind: str, payload: dict[str, Any]) -> str:
    with state.lock:
        body = state.record_send(
            inst,
            to=to,
            chat=f"{to}@s.whatsapp.net",
            kind=kind,
            payload=payload,
            content=payload["message"],
            endpoint="send",
        )
    return str(body["message"]["key"]["id"])


def _people(n: int) -> list[str]:
    return [f"1555700{i:04d}" for i in range(n)]


def _answers(**rates: Any) -> list[dict[str, Any]]:
    state, inst = _state(**rates)
    for to in _people(400):
        _send(state, inst, to, "interactive", INTERACTIVE)
    return list(state.answers_view()["items"])


def test_rates_shape_the_answers() -> None:
    answers = _answers(seed=5, tap_rate=0.3, keyword_rate=0.2, keywords=("YES", "INFO"))
    how = Counter(a["answer"] for a in answers)
    assert set(how) == {"tap", "keyword"}
    assert 90 <= how["tap"] <= 150 and 50 <= how["keyword"] <= 110, how
    for a in answers:
        if a["answer"] == "tap":
            assert (a["kind"], a["quotes"]) == ("button", True)
            assert (a["id"], a["text"]) in BUTTONS
        else:
            assert a["kind"] == "text" and a["text"] in ("YES", "INFO") and a["id"] is None


def test_a_tap_is_the_recipients_stable_choice() -> None:
    taps = {a["to"]: a["id"] for a in _answers(seed=9, tap_rate=1.0)}
    assert len(taps) == 400
    assert all(bid == BUTTONS[stable_choice(9, to, 3)][0] for to, bid in taps.items())
    assert set(taps.values()) == {bid for bid, _ in BUTTONS}  # every button is tapped
    # a list row too, among the list's own rows
    state, inst = _state(seed=9, tap_rate=1.0)
    _send(state, inst, "15557000001", "list", LIST)
    [row] = state.answers_view()["items"]
    assert (row["kind"], row["id"]) in (("list", "r1"), ("list", "r2"))


def test_no_tap_on_a_message_without_choices() -> None:
    state, inst = _state(seed=2, tap_rate=1.0)
    for to in _people(20):
        _send(state, inst, to, "text", TEXT)
    assert state.answers_view()["items"] == []


def test_the_same_seed_replays_the_same_people() -> None:
    rates = {"tap_rate": 0.2, "keyword_rate": 0.2, "stop_rate": 0.1, "reply_rate": 0.1}
    first = _answers(seed=3, **rates)
    assert first == _answers(seed=3, **rates)
    assert first != _answers(seed=4, **rates)


def test_at_most_one_answer_per_message_and_nothing_after_stop() -> None:
    state, inst = _state(seed=1, stop_rate=0.3, tap_rate=0.3, keyword_rate=0.3)
    people = _people(60)
    for _round in range(4):
        for to in people:
            _send(state, inst, to, "interactive", INTERACTIVE)
    view = state.answers_view()
    answers = view["items"]
    per_message = Counter(a["message_id"] for a in answers)
    assert per_message and max(per_message.values()) == 1
    stopped = set(view["stopped"])
    assert stopped and stopped == {a["to"] for a in answers if a["answer"] == "stop"}
    for to in stopped:
        mine = [a for a in answers if a["to"] == to]
        assert mine[-1]["answer"] == "stop"  # the STOP is the last thing they said
        assert sum(a["answer"] == "stop" for a in mine) == 1
    # the record on each message agrees with the answers list
    with state.lock:
        recorded = {m.id: m.answer for m in state.messages.values() if m.answer}
    assert recorded == {a["message_id"]: a for a in answers}


def test_a_stop_keyword_is_a_stop() -> None:
    state, inst = _state(seed=8, keyword_rate=1.0, keywords=("STOP",))
    _send(state, inst, "15557000009", "text", TEXT)
    _send(state, inst, "15557000009", "text", TEXT)
    view = state.answers_view()
    assert [a["answer"] for a in view["items"]] == ["stop"]
    assert view["stopped"] == ["15557000009"]


def test_the_answer_event_is_what_the_record_says() -> None:
    cfg = SandboxConfig(
        seed=4,
        tap_rate=0.5,
        keyword_rate=0.5,
        status_delays=(0.0, 0.0, 0.0),
        reply_delay_seconds=(5.0, 6.0),
    )
    rng = random.Random(4)
    for i in range(30):
        msg = SentMessage(
            f"3EB0{i:018X}", "I1", f"1555800{i:04d}", "", "interactive", INTERACTIVE, 0.0, ""
        )
        plan = plan_message_events(cfg, rng, msg)
        incoming = [(d, job) for d, job in plan if job.name == "incoming"]
        assert len(incoming) == 1 and msg.answer is not None
        delay, job = incoming[0]
        assert 5.0 <= delay <= 6.0
        assert job.body is not None
        [event] = parse_webhook(job.body)
        assert isinstance(event, IncomingMessage)
        assert (event.text, event.button_id, event.message_id) == (
            msg.answer["text"],
            msg.answer["id"],
            msg.answer["incoming_id"],
        )


def test_defaults_answer_nothing_and_bad_rates_are_refused() -> None:
    state, inst = _state()
    _send(state, inst, "15557000010", "interactive", INTERACTIVE)
    assert state.answers_view() == {"items": [], "stopped": []}
    with pytest.raises(ValueError, match="add up to"):
        SandboxConfig(tap_rate=0.6, keyword_rate=0.6)
    with pytest.raises(ValueError, match="keywords"):
        SandboxConfig(keyword_rate=0.1, keywords=())
    with pytest.raises(ValueError, match="reply_delay_seconds"):
        SandboxConfig(reply_delay_seconds=(3.0, 1.0))
