"""``parse_webhook``: hand-written bodies from the field notes, the spec vocabulary, errors."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.event_parsing import parse_webhook
from gateway.events import (
    ConnectionStatus,
    DeliveryStatus,
    IncomingMessage,
    MalformedEvent,
    MessageStatus,
    Presence,
    QrCode,
    UnknownEvent,
)
from gateway.sandbox import events_out

IID = "6501A9176BD17"
MID = "3EB0C5F1A2B3C4D5E6F7A8"
T0 = datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC)  # 1700000000


def envelope(event: str, payload: Any) -> dict[str, Any]:
    return {"instance_id": IID, "data": {"event": event, "data": payload}}


def update(status: Any, **extra: Any) -> dict[str, Any]:
    key = {"remoteJid": "919876543210@s.whatsapp.net", "fromMe": True, "id": MID}
    return {"key": key, "update": {"status": status, **extra}}


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (0, DeliveryStatus.FAILED),
        (1, DeliveryStatus.PENDING),
        (2, DeliveryStatus.SENT),
        (3, DeliveryStatus.DELIVERED),
        (4, DeliveryStatus.READ),
        (5, DeliveryStatus.PLAYED),
        ("SERVER_ACK", DeliveryStatus.SENT),
        ("DELIVERY_ACK", DeliveryStatus.DELIVERED),
        ("READ", DeliveryStatus.READ),
        ("ERROR", DeliveryStatus.FAILED),
        ("3", DeliveryStatus.DELIVERED),
    ],
)
def test_messages_update_status_codes(status: Any, expected: DeliveryStatus) -> None:
    [event] = parse_webhook(json.dumps(envelope("messages.update", [update(status)])))
    assert event == MessageStatus(
        IID, MID, expected, chat="919876543210@s.whatsapp.net", error_code=None, at=None
    )


def test_failed_status_carries_the_error_code() -> None:
    body = envelope("messages.update", [update(0, messageStubParameters=["463"])])
    [event] = parse_webhook(body)
    assert isinstance(event, MessageStatus)
    assert event.status is DeliveryStatus.FAILED and event.error_code == "463"


def test_several_updates_in_one_body_and_unknown_status() -> None:
    body = envelope("messages.update", [update(2), update(3), update(99)])
    events = parse_webhook(body)
    assert [type(e).__name__ for e in events] == ["MessageStatus", "MessageStatus", "UnknownEvent"]


def test_status_of_a_message_we_received_is_not_ours() -> None:
    item = update(4)
    item["key"]["fromMe"] = False
    assert isinstance(parse_webhook(envelope("messages.update", [item]))[0], UnknownEvent)


def _incoming(message: dict[str, Any], jid: str = "919876543210@s.whatsapp.net") -> dict[str, Any]:
    return {
        "key": {"remoteJid": jid, "fromMe": False, "id": "ABCDEF0123"},
        "pushName": "Asha",
        "message": message,
        "messageTimestamp": "1700000000",
    }


@pytest.mark.parametrize(
    ("message", "text"),
    [
        ({"conversation": "STOP"}, "STOP"),
        ({"extendedTextMessage": {"text": "hello"}}, "hello"),
        ({"imageMessage": {"caption": "look"}}, "look"),
        ({"videoMessage": {"caption": "clip"}}, "clip"),
        ({"templateButtonReplyMessage": {"selectedDisplayText": "Yes"}}, "Yes"),
        ({"listResponseMessage": {"title": "Row 2"}}, "Row 2"),
        ({"buttonsResponseMessage": {"selectedDisplayText": "No"}}, "No"),
        ({"interactiveResponseMessage": {"body": {"text": "Maybe"}}}, "Maybe"),
        ({"ephemeralMessage": {"message": {"conversation": "wrapped"}}}, "wrapped"),
        ({"stickerMessage": {}}, ""),
    ],
)
def test_incoming_text_from_every_place(message: dict[str, Any], text: str) -> None:
    for payload in ({"messages": [_incoming(message)], "type": "notify"}, [_incoming(message)]):
        [event] = parse_webhook(envelope("messages.upsert", payload))
        assert event == IncomingMessage(
            IID,
            "ABCDEF0123",
            "919876543210@s.whatsapp.net",
            text,
            sender_phone="919876543210",
            is_group=False,
            at=T0,
        )


@pytest.mark.parametrize(
    ("message", "choice"),
    [
        ({"conversation": "hi"}, (None, None, None)),
        (
            {"extendedTextMessage": {"text": "yes", "contextInfo": {"stanzaId": "3EB0A"}}},
            (None, None, "3EB0A"),
        ),
        (
            {
                "buttonsResponseMessage": {
                    "selectedButtonId": "yes",
                    "selectedDisplayText": "Yes",
                    "contextInfo": {"stanzaId": "3EB0B", "participant": "1@s.whatsapp.net"},
                }
            },
            ("yes", None, "3EB0B"),
        ),
        ({"templateButtonReplyMessage": {"selectedId": 7}}, ("7", None, None)),
        (
            {"listResponseMessage": {"title": "Row", "singleSelectReply": {"selectedRowId": "r"}}},
            (None, "r", None),
        ),
        (
            {
                "interactiveResponseMessage": {
                    "nativeFlowResponseMessage": {"paramsJson": '{"id": "more"}'},
                    "contextInfo": {"stanzaId": "3EB0C"},
                }
            },
            ("more", None, "3EB0C"),
        ),
        (
            {"ephemeralMessage": {"message": {"buttonsResponseMessage": {"selectedButtonId": ""}}}},
            (None, None, None),
        ),
        ({"extendedTextMessage": {"contextInfo": {"stanzaId": {"x": 1}}}}, (None, None, None)),
    ],
)
def test_incoming_choice_and_quote(message: dict[str, Any], choice: tuple[Any, ...]) -> None:
    """The button or row tapped and the quoted message id are kept (issue 32)."""
    [event] = parse_webhook(envelope("messages.upsert", [_incoming(message)]))
    assert isinstance(event, IncomingMessage)
    assert (event.button_id, event.row_id, event.quoted_id) == choice


@pytest.mark.parametrize(
    ("jid", "phone", "group"),
    [
        ("919876543210@c.us", "919876543210", False),
        ("919876543210:12@s.whatsapp.net", "919876543210", False),
        ("120363041234567890@g.us", None, True),
        ("123456789012345@lid", None, False),
    ],
)
def test_addresses(jid: str, phone: str | None, group: bool) -> None:
    [event] = parse_webhook(envelope("messages.upsert", [_incoming({"conversation": "x"}, jid)]))
    assert isinstance(event, IncomingMessage)
    assert (event.chat, event.sender_phone, event.is_group) == (jid, phone, group)


def test_status_broadcast_is_ignored_and_own_upserts_are_statuses() -> None:
    own = {
        "key": {"remoteJid": "15551234567@s.whatsapp.net", "fromMe": True, "id": MID},
        "messageTimestamp": 1700000000000,  # milliseconds
        "status": "DELIVERY_ACK",
    }
    echo_without_status = {**own}
    del echo_without_status["status"]
    payload = [_incoming({"conversation": "story"}, "status@broadcast"), own, echo_without_status]
    events = parse_webhook(envelope("messages.upsert", payload))
    assert events[0] == MessageStatus(
        IID, MID, DeliveryStatus.DELIVERED, chat="15551234567@s.whatsapp.net", at=T0
    )
    assert isinstance(events[1], UnknownEvent) and len(events) == 2


@pytest.mark.parametrize(
    ("stamp", "expected"),
    [
        (1700000000, T0),
        ("1700000000", T0),
        (1700000000000, T0),
        ("2023-11-14T22:13:20Z", T0),
        ("2023-11-14T22:13:20", T0),
        ({"low": 1700000000, "high": 0, "unsigned": True}, T0),
        ("yesterday", None),
    ],
)
def test_timestamps(stamp: Any, expected: datetime | None) -> None:
    msg = _incoming({"conversation": "x"})
    msg["messageTimestamp"] = stamp
    [event] = parse_webhook(envelope("messages.upsert", [msg]))
    assert isinstance(event, IncomingMessage) and event.at == expected


def test_double_encoded_payload() -> None:
    body: dict[str, Any] = {
        "instance_id": IID,
        "data": {"event": "messages.update", "data": json.dumps([update(3)])},
    }
    [event] = parse_webhook(body)
    assert isinstance(event, MessageStatus) and event.status is DeliveryStatus.DELIVERED
    body["data"]["data"] = "[not json"
    with pytest.raises(MalformedEvent, match=r"data\.data: a string that is not JSON"):
        parse_webhook(body)


def test_other_reference_events_are_unknown() -> None:
    for name in ("contacts.update", "contacts.upsert", "groups.update", "chats.set"):
        [event] = parse_webhook(envelope(name, [{"id": "x"}]))
        assert event == UnknownEvent(IID, name)


def test_spec_vocabulary() -> None:
    status = {
        "event": "message_status",
        "instance_id": IID,
        "data": {
            "id": MID,
            "chat": "15551234567@s.whatsapp.net",
            "status": "failed",
            "error_code": "404",
            "timestamp": 1700000000,
        },
    }
    incoming = {
        "event": "message",
        "instance_id": IID,
        "data": {
            "id": "X1",
            "chat": "15551234567@s.whatsapp.net",
            "from": "15551234567@s.whatsapp.net",
            "text": "hi",
            "timestamp": "1700000000",
        },
    }
    presence = {
        "event": "presence",
        "instance_id": IID,
        "data": {"chat": "15551234567@s.whatsapp.net", "status": "available"},
    }
    qr = {"event": "qr", "instance_id": IID, "data": {"base64": "data:image/png;base64,AAAA"}}
    conn = {
        "event": "connection",
        "instance_id": IID,
        "data": {"state": "logged_out", "reason": "logout", "phone": None},
    }
    events = parse_webhook([status, incoming, presence, qr, conn])
    assert events == [
        MessageStatus(
            IID,
            MID,
            DeliveryStatus.FAILED,
            chat="15551234567@s.whatsapp.net",
            error_code="404",
            at=T0,
        ),
        IncomingMessage(
            IID, "X1", "15551234567@s.whatsapp.net", "hi", sender_phone="15551234567", at=T0
        ),
        Presence(IID, "15551234567@s.whatsapp.net", "available"),
        QrCode(IID, "data:image/png;base64,AAAA"),
        ConnectionStatus(IID, "logged_out", "logout", None),
    ]


def test_reference_connection_update() -> None:
    events = parse_webhook(envelope("connection.update", {"qr": "iVBORw0KGgo"}))
    assert events == [QrCode(IID, "data:image/png;base64,iVBORw0KGgo")]
    closed = {"connection": "close", "lastDisconnect": {"error": {"output": {"statusCode": 401}}}}
    assert parse_webhook(envelope("connection.update", closed)) == [
        ConnectionStatus(IID, "logged_out")
    ]
    opened = {"connection": "open", "me": {"id": "15550001111:3@s.whatsapp.net"}}
    assert parse_webhook(envelope("connection.update", opened)) == [
        ConnectionStatus(IID, "connected", phone="15550001111")
    ]


def test_baileys_presence_update() -> None:
    payload = {
        "id": "1555@s.whatsapp.net",
        "presences": {"1555@s.whatsapp.net": {"lastKnownPresence": "composing"}},
    }
    assert parse_webhook(envelope("presence.update", payload)) == [
        Presence(IID, "1555@s.whatsapp.net", "composing")
    ]


def test_every_shape_the_sandbox_emits_parses() -> None:
    for dialect in ("spec", "reference"):
        bodies = [
            events_out.status_body(
                dialect, IID, MID, "1555@s.whatsapp.net", st, 1700000000, variant=v
            )
            for st in ("sent", "delivered", "read", "played")
            for v in (0, 1, 2)
        ]
        statuses = [e for b in bodies for e in parse_webhook(json.dumps(b))]
        assert all(isinstance(e, MessageStatus) and e.message_id == MID for e in statuses)
        assert len(statuses) == len(bodies)
        failed = events_out.status_body(
            dialect, IID, MID, "1555@s.whatsapp.net", "failed", 1700000000, error_code="404"
        )
        [f] = parse_webhook(failed)
        assert isinstance(f, MessageStatus) and (f.status, f.error_code) == (
            DeliveryStatus.FAILED,
            "404",
        )
        for kind, rid in (
            ("text", None),
            ("button", "b1"),
            ("template_button", "t1"),
            ("list", "r1"),
        ):
            for variant in range(16):
                quoted = MID if variant >= 8 else None
                body = events_out.incoming_body(
                    dialect,
                    IID,
                    "3A01",
                    "15551234567",
                    "Yes",
                    1700000000,
                    reply_kind=kind,
                    reply_id=rid,
                    variant=variant % 8,
                    quoted_id=quoted,
                )
                [inc] = parse_webhook(body)
                assert isinstance(inc, IncomingMessage)
                assert (inc.text, inc.sender_phone, inc.at) == ("Yes", "15551234567", T0)
                choice = (inc.button_id, inc.row_id, inc.quoted_id)
                row = rid if kind == "list" else None
                button = rid if kind in ("button", "template_button") else None
                assert choice == (button, row, quoted), (dialect, kind, variant)
        for state in ("connected", "waiting_scan", "disconnected", "logged_out"):
            [c] = parse_webhook(
                events_out.connection_body(dialect, IID, state, phone="15550001111")
            )
            assert isinstance(c, ConnectionStatus)
            assert c == ConnectionStatus(IID, state, c.reason, "15550001111")
        [q] = parse_webhook(events_out.qr_body(dialect, IID, "data:image/png;base64,QQ=="))
        assert q == QrCode(IID, "data:image/png;base64,QQ==")
        [p] = parse_webhook(
            events_out.presence_body(dialect, IID, "1555@s.whatsapp.net", "unavailable", 1700000000)
        )
        assert isinstance(p, Presence) and p.status == "unavailable"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"", "body: empty"),
        (b"not json", "body: not JSON"),
        (b"\xff\xfe", "body: not UTF-8"),
        ("[1]", "[0]: expected an object, got a number"),
        ({"instance_id": IID}, "body: no event name"),
        ({"event": 5}, "event: expected an event name, got a number"),
        (
            envelope(
                "messages.update",
                [update(2), update(3), {"key": {"remoteJid": "x"}, "update": {"status": 2}}],
            ),
            "data.data[2].key.id: missing",
        ),
        (
            envelope("messages.update", [{"update": {"status": 2}}]),
            "data.data[0].key: expected an object, got null",
        ),
        (
            envelope("messages.update", [update({"x": 1})]),
            "data.data[0].update.status: expected a status code or name",
        ),
        (
            envelope("messages.upsert", {"messages": "nope"}),
            "data.data.messages: expected an array",
        ),
        (
            envelope("messages.upsert", [{"key": {"id": "A"}}]),
            "data.data[0].key.remoteJid: missing",
        ),
        ({"event": "message_status", "data": {"status": "read"}}, "data.id: missing"),
        ({"event": "message", "data": 7}, "data: expected an object or an array, got a number"),
        ({"event": "qr", "data": {}}, "data.base64: missing"),
        ({"instance_id": ["x"], "event": "qr"}, "instance_id: expected a string, got an array"),
    ],
)
def test_malformed_bodies_say_what_and_where(body: Any, message: str) -> None:
    with pytest.raises(MalformedEvent) as info:
        parse_webhook(body)
    assert message in str(info.value)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=5)
    ),
    max_leaves=25,
)
event_names = st.sampled_from(
    [
        "messages.update",
        "messages.upsert",
        "message",
        "message_status",
        "presence",
        "presence.update",
        "qr",
        "connection",
        "connection.update",
        "contacts.update",
        "x",
    ]
)
keys = st.sampled_from(
    [
        "key",
        "update",
        "status",
        "id",
        "remoteJid",
        "fromMe",
        "message",
        "messages",
        "messageTimestamp",
        "chat",
        "text",
        "presences",
        "connection",
        "qr",
        "data",
    ]
)
shaped = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.text(max_size=10)
    | st.sampled_from(["SERVER_ACK", "1700000000", "a@g.us", "1@c.us"]),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(keys, children, max_size=5),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(body=json_values)
def test_arbitrary_json_never_crashes(body: Any) -> None:
    try:
        events = parse_webhook(json.dumps(body))
    except MalformedEvent:
        return
    assert isinstance(events, list)


@settings(max_examples=400, deadline=None)
@given(
    name=event_names,
    payload=shaped,
    reference=st.booleans(),
    iid=st.one_of(st.none(), st.text(max_size=5), st.integers()),
)
def test_event_shaped_json_never_crashes(
    name: str, payload: Any, reference: bool, iid: Any
) -> None:
    body = (
        {"instance_id": iid, "data": {"event": name, "data": payload}}
        if reference
        else {"event": name, "instance_id": iid, "data": payload}
    )
    try:
        events = parse_webhook(body)
    except MalformedEvent as exc:
        assert str(exc)
        return
    assert isinstance(events, list)


@pytest.mark.parametrize(
    "body", ["[" * 10_000 + "]" * 10_000, '{"a":' * 10_000 + "1" + "}" * 10_000]
)
def test_a_body_nested_too_deeply_is_malformed(body: str) -> None:
    with pytest.raises(MalformedEvent, match="body: JSON nested too deeply"):
        parse_webhook(body.encode())


def test_characters_no_database_stores_are_removed_not_refused() -> None:
    """A NUL or a lone surrogate in an event (text, ids, a payload encoded twice) is
    removed: the event is still stored and applied (gateway.text)."""
    body = json.dumps(
        {
            "event": "message",
            "instance_id": "IID\x00",
            "data": {"id": "in\x00-1", "chat": "4915112345678@s.whatsapp.net", "text": "ST\x00OP"},
        }
    )
    (event,) = parse_webhook(body.encode())
    assert isinstance(event, IncomingMessage)
    assert (event.instance_id, event.message_id, event.text) == ("IID", "in-1", "STOP")
    twice = json.dumps(
        {
            "event": "message",
            "instance_id": IID,
            "data": json.dumps(
                {"id": "m\ud800", "chat": "4915112345678@s.whatsapp.net", "text": "a\x00"}
            ),
        }
    )
    (event,) = parse_webhook(twice)
    assert isinstance(event, IncomingMessage)
    assert (event.message_id, event.text) == ("m", "a")
    # a valid pair is one character, kept
    (event,) = parse_webhook(body.replace("ST\\u0000OP", "\\ud83d\\ude00"))
    assert isinstance(event, IncomingMessage) and event.text == "\U0001f600"
