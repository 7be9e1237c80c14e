"""Rendering: sandboxed strict Jinja2, spintax after Jinja, seeded per recipient."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from campaigns.campaign_file import MessageSpec, parse_campaign
from campaigns.render import ContactData, RenderError, recipient_rng, render_message, spin
from gateway.messages import Interactive, ListMessage, Media, Text, message_to_dict


def _message(**fields: object) -> MessageSpec:
    return parse_campaign({"name": "n", "list": "l", "message": fields}).message


ALICE = ContactData(phone="+14155550101", name="Alice", attributes={"city": "Lisbon", "tier": 2})


def test_text_with_variables_and_attributes() -> None:
    msg = render_message(
        _message(type="text", text="Hi {{ name }} from {{ city }} ({{ phone }}) t{{ tier + 1 }}"),
        ALICE,
        random.Random(1),
    )
    assert msg == Text(text="Hi Alice from Lisbon (+14155550101) t3")


def test_missing_variable_names_it() -> None:
    with pytest.raises(RenderError) as info:
        render_message(_message(type="text", text="Hi {{ surname }}"), ALICE, random.Random(1))
    assert "surname" in info.value.reason
    assert info.value.reason.startswith("missing variable")


def test_spintax_after_jinja_variables_inside() -> None:
    seen = Counter(
        render_message(
            _message(type="text", text="{Hi {{ name }}|Hello {{ city }}}!"), ALICE, random.Random(i)
        ).text  # type: ignore[union-attr]
        for i in range(200)
    )
    assert set(seen) == {"Hi Alice!", "Hello Lisbon!"}


def test_nested_spintax_and_literal_braces() -> None:
    outputs = {spin("{a|{b|c}} {x} {", random.Random(i)) for i in range(300)}
    assert outputs == {"a {x} {", "b {x} {", "c {x} {"}


def test_seeded_per_recipient_is_reproducible() -> None:
    spec = _message(type="text", text="{a|b|c|d|e|f|g|h} {1|2|3|4|5|6|7|8}")
    first = [render_message(spec, ALICE, recipient_rng(7, f"+1{i}")) for i in range(50)]
    again = [render_message(spec, ALICE, recipient_rng(7, f"+1{i}")) for i in range(50)]
    assert first == again
    assert len({m.text for m in first}) > 5  # type: ignore[union-attr]


def test_sandbox_blocks_unsafe_access() -> None:
    spec = _message(type="text", text="{{ name.__class__.__mro__[1].__subclasses__() }}")
    with pytest.raises(RenderError):
        render_message(spec, ALICE, random.Random(1))


def test_no_autoescape() -> None:
    contact = ContactData(phone="+1", name="<Tom & Jerry>")
    assert render_message(_message(type="text", text="{{ name }}"), contact, random.Random(0)) == (
        Text(text="<Tom & Jerry>")
    )


def test_media_caption_rendered_url_kept() -> None:
    msg = render_message(
        _message(
            type="media", media_url="https://e.x/a.pdf", filename="a.pdf", caption="{{ name }}"
        ),
        ALICE,
        random.Random(0),
    )
    assert msg == Media(media_url="https://e.x/a.pdf", caption="Alice", filename="a.pdf")


def test_interactive_renders_all_texts() -> None:
    spec = _message(
        type="interactive",
        text="Hi {{ name }}",
        title="T {{ city }}",
        subtitle="S",
        footer="F {{ name }}",
        buttons=[
            {"kind": "quick_reply", "display_text": "Yes {{ name }}", "id": "yes"},
            {"kind": "cta_url", "display_text": "Go", "url": "https://e.x"},
        ],
    )
    msg = render_message(spec, ALICE, random.Random(0))
    assert isinstance(msg, Interactive)
    assert (msg.text, msg.title, msg.footer) == ("Hi Alice", "T Lisbon", "F Alice")
    assert msg.buttons[0].display_text == "Yes Alice"
    assert msg.buttons[1].url == "https://e.x"
    assert message_to_dict(msg)["buttons"][0] == {
        "kind": "quick_reply",
        "display_text": "Yes Alice",
        "id": "yes",
    }


def test_list_renders_rows() -> None:
    spec = _message(
        type="list",
        text="Hi {{ name }}",
        button_text="Menu for {{ city }}",
        sections=[{"title": "S", "rows": [{"title": "{{ name }}'s pick", "row_id": "r1"}]}],
    )
    msg = render_message(spec, ALICE, random.Random(0))
    assert isinstance(msg, ListMessage)
    assert msg.button_text == "Menu for Lisbon"
    assert msg.sections[0].rows[0].title == "Alice's pick"
    assert msg.sections[0].rows[0].row_id == "r1"


def test_template_buttons() -> None:
    spec = _message(
        type="template", text="Hi", footer="f", buttons=[{"display_text": "OK", "id": "ok"}]
    )
    d = message_to_dict(render_message(spec, ALICE, random.Random(0)))
    assert d["buttons"] == [{"display_text": "OK", "id": "ok"}]
