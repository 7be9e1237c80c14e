"""Request building and validation: shapes of the spec, errors naming the field."""

from __future__ import annotations

import json

import pytest

from gateway.errors import RequestValidationError
from gateway.messages import (
    Button,
    Interactive,
    LegacyTemplate,
    ListMessage,
    ListRow,
    ListSection,
    Media,
    TemplateButton,
    Text,
)
from gateway.requests import (
    build_instance_operation,
    build_send,
    build_set_webhook,
    normalise_number,
    validate_group_id,
    validate_http_url,
)


@pytest.mark.parametrize(
    ("raw", "digits"),
    [
        ("+1 415 555 2671", "14155552671"),
        ("14155552671", "14155552671"),
        ("+44 (20) 7946-0958", "442079460958"),
        ("0044 20 7946 0958", "442079460958"),
        ("919876543210@s.whatsapp.net", "919876543210"),
        ("5511987654321@c.us", "5511987654321"),
        (" +49.30.1234567 ", "49301234567"),
    ],
)
def test_numbers_normalised_to_digits(raw: str, digits: str) -> None:
    assert normalise_number(raw) == digits


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("+1 415 CALL NOW", "not a phone number"),
        ("12345", "digits"),
        ("1234567890123456", "digits"),
        ("+999 1234 5678", "country code"),
        ("+1 415 555", "digits"),
        ("+1 4155 5526 710", "country"),  # 11 digits after +1: too long for NANP
        ("٤١٥٥٥٥٢٦٧١٠", "not a phone number"),  # non-ASCII digits
    ],
)
def test_bad_numbers_rejected_naming_the_field(raw: str, why: str) -> None:
    with pytest.raises(RequestValidationError) as err:
        normalise_number(raw, "to")
    assert err.value.field == "to"
    assert str(err.value).startswith("to: ")
    assert why in str(err.value)


def test_group_ids() -> None:
    assert validate_group_id("120363025246125486@g.us") == "120363025246125486@g.us"
    assert validate_group_id("1234567890-1600000000@g.us") == "1234567890-1600000000@g.us"
    for bad in ("120363025246125486", "@g.us", "12 34@g.us", "1203@s.whatsapp.net"):
        with pytest.raises(RequestValidationError, match="group_id"):
            validate_group_id(bad)


def test_urls() -> None:
    assert validate_http_url("https://x.example/a.png?x=1", "f") == "https://x.example/a.png?x=1"
    for bad in (None, "", "ftp://x.example/a", "x.example/a.png", "https://", "http://a b/c"):
        with pytest.raises(RequestValidationError) as err:
            validate_http_url(bad, "message.media_url")
        assert err.value.field == "message.media_url"


def test_text_to_a_number_is_a_get_with_the_spec_fields() -> None:
    req = build_send("INST1", "+1 415 555 2671", Text("hello"))
    assert (req.method, req.endpoint, req.json, req.credentials) == ("GET", "send", None, "query")
    assert req.params == {
        "number": "14155552671",
        "type": "text",
        "message": "hello",
        "instance_id": "INST1",
    }


def test_media_post_puts_everything_in_the_json_body() -> None:
    msg = Media("https://cdn.example/doc.pdf", caption="Invoice", filename="invoice.pdf")
    req = build_send("INST1", "14155552671", msg, send_method="post")
    assert (req.method, req.endpoint, req.params, req.credentials) == ("POST", "send", {}, "body")
    assert req.json == {
        "number": "14155552671",
        "type": "media",
        "message": "Invoice",
        "media_url": "https://cdn.example/doc.pdf",
        "filename": "invoice.pdf",
        "instance_id": "INST1",
    }


def test_group_sends_go_to_send_group() -> None:
    req = build_send("INST1", "120363025246125486@g.us", Media("http://m.example/a.jpg"))
    assert req.endpoint == "send_group"
    assert req.params == {
        "group_id": "120363025246125486@g.us",
        "type": "media",
        "message": "",
        "media_url": "http://m.example/a.jpg",
        "instance_id": "INST1",
    }
    with pytest.raises(RequestValidationError, match="groups take text and media only"):
        build_send("INST1", "120363025246125486@g.us", Interactive("hi", buttons=()))


def test_interactive_buttons_carry_a_json_string_with_exactly_the_spec_keys() -> None:
    msg = Interactive(
        "Body",
        title="T",
        subtitle="S",
        footer="F",
        buttons=(
            Button("quick_reply", "Yes", id="yes"),
            Button("cta_url", "Site", url="https://shop.example/x?a=1&b=2"),
            Button("cta_call", "Call", phone_number="+1 415 555 2671"),
            Button("cta_copy", "Copy", copy_code="SAVE10"),
        ),
    )
    req = build_send("INST1", "14155552671", msg)
    assert (req.method, req.endpoint, req.params) == (
        "POST",
        "send_template",
        {"instance_id": "INST1"},
    )
    assert req.credentials == "query"
    assert req.json is not None
    assert req.json["number"] == "14155552671"
    assert req.json["type"] == "interactive"
    body = req.json["message"]
    assert {k: body[k] for k in ("text", "title", "subtitle", "footer")} == {
        "text": "Body",
        "title": "T",
        "subtitle": "S",
        "footer": "F",
    }
    buttons = body["interactiveButtons"]
    assert [b["name"] for b in buttons] == ["quick_reply", "cta_url", "cta_call", "cta_copy"]
    assert all(isinstance(b["buttonParamsJson"], str) for b in buttons)
    params = [json.loads(b["buttonParamsJson"]) for b in buttons]
    assert params == [
        {"display_text": "Yes", "id": "yes"},
        {"display_text": "Site", "url": "https://shop.example/x?a=1&b=2"},
        {"display_text": "Call", "phone_number": "+14155552671"},
        {"display_text": "Copy", "copy_code": "SAVE10"},
    ]


@pytest.mark.parametrize(
    ("button", "field"),
    [
        (Button("quick_reply", "Yes"), "message.buttons[0].id"),
        (Button("quick_reply", "", id="y"), "message.buttons[0].display_text"),
        (Button("cta_url", "Site"), "message.buttons[0].url"),
        (Button("cta_url", "Site", url="shop.example"), "message.buttons[0].url"),
        (Button("cta_call", "Call", phone_number="14155552671"), "message.buttons[0].phone_number"),
        (Button("cta_call", "Call", phone_number="+1 CALL"), "message.buttons[0].phone_number"),
        (Button("cta_copy", "Copy"), "message.buttons[0].copy_code"),
        (Button("bogus", "X"), "message.buttons[0].kind"),  # type: ignore[arg-type]
    ],
)
def test_bad_buttons_are_named(button: Button, field: str) -> None:
    with pytest.raises(RequestValidationError) as err:
        build_send("INST1", "14155552671", Interactive("Body", buttons=(button,)))
    assert err.value.field == field


def test_duplicate_quick_reply_ids_rejected() -> None:
    msg = Interactive(
        "B", buttons=(Button("quick_reply", "A", id="x"), Button("quick_reply", "B", id="x"))
    )
    with pytest.raises(RequestValidationError, match=r"message.buttons\[1\].id"):
        build_send("INST1", "14155552671", msg)


def test_legacy_template_buttons_index_from_one() -> None:
    msg = LegacyTemplate(
        "Pick", footer="f", buttons=(TemplateButton("One", "1"), TemplateButton("Two", "2"))
    )
    req = build_send("INST1", "14155552671", msg)
    assert req.json == {
        "number": "14155552671",
        "type": "template",
        "message": {
            "text": "Pick",
            "footer": "f",
            "templateButtons": [
                {"index": 1, "quickReplyButton": {"displayText": "One", "id": "1"}},
                {"index": 2, "quickReplyButton": {"displayText": "Two", "id": "2"}},
            ],
        },
    }


def test_list_message_shape() -> None:
    msg = ListMessage(
        "Menu",
        button_text="Open",
        title="Title",
        footer="Foot",
        sections=(ListSection("S1", rows=(ListRow("Row", "r1", "desc"), ListRow("R2", "r2"))),),
    )
    req = build_send("INST1", "14155552671", msg)
    assert req.json is not None and req.json["type"] == "list"
    assert req.json["message"] == {
        "text": "Menu",
        "footer": "Foot",
        "title": "Title",
        "buttonText": "Open",
        "sections": [
            {
                "title": "S1",
                "rows": [
                    {"title": "Row", "rowId": "r1", "description": "desc"},
                    {"title": "R2", "rowId": "r2", "description": ""},
                ],
            }
        ],
    }


@pytest.mark.parametrize(
    ("msg", "field"),
    [
        (ListMessage("M", button_text=""), "message.button_text"),
        (ListMessage("M", button_text="Open"), "message.sections"),
        (
            ListMessage("M", button_text="O", sections=(ListSection("S"),)),
            "message.sections[0].rows",
        ),
        (
            ListMessage("M", button_text="O", sections=(ListSection("S", (ListRow("t", ""),)),)),
            "message.sections[0].rows[0].row_id",
        ),
        (LegacyTemplate("T"), "message.buttons"),
        (LegacyTemplate("T", buttons=(TemplateButton("A", ""),)), "message.buttons[0].id"),
        (Text(""), "message.text"),
        (Media("not a url"), "message.media_url"),
        (Media("https://x.example/a", filename="../etc/passwd"), "message.filename"),
    ],
)
def test_bad_messages_are_named(msg: object, field: str) -> None:
    with pytest.raises(RequestValidationError) as err:
        build_send("INST1", "14155552671", msg)  # type: ignore[arg-type]
    assert err.value.field == field


def test_instance_id_and_to_are_checked() -> None:
    with pytest.raises(RequestValidationError, match="instance_id"):
        build_send("", "14155552671", Text("x"))
    with pytest.raises(RequestValidationError, match=r"^to: "):
        build_send("I", "hello", Text("x"))


def test_instance_operations() -> None:
    assert build_instance_operation("create_instance").params == {}
    req = build_instance_operation("reboot", "ABC", method="GET")
    assert (req.method, req.endpoint, req.params) == ("GET", "reboot", {"instance_id": "ABC"})
    hook = build_set_webhook("ABC", "https://me.example/hook?x=1", enable=False)
    assert hook.params == {
        "instance_id": "ABC",
        "webhook_url": "https://me.example/hook?x=1",
        "enable": "false",
    }
    with pytest.raises(RequestValidationError, match="webhook_url"):
        build_set_webhook("ABC", "not-a-url")
    with pytest.raises(RequestValidationError, match="instance_id"):
        build_instance_operation("logout", "")
