"""Typed outgoing messages, and their JSON form (stored per delivery as ``content``).

``message_to_dict`` / ``message_from_dict`` are the storage contract: a campaign renders
one message per recipient, stores its dict, and the dispatcher rebuilds it to send.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

ButtonKind = Literal["quick_reply", "cta_url", "cta_call", "cta_copy"]
BUTTON_KINDS: tuple[str, ...] = ("quick_reply", "cta_url", "cta_call", "cta_copy")


@dataclass(frozen=True)
class Text:
    """A text message (to a phone number or a group)."""

    text: str


@dataclass(frozen=True)
class Media:
    """A media or document message; ``caption`` goes in the spec's ``message`` field."""

    media_url: str
    caption: str = ""
    filename: str | None = None


@dataclass(frozen=True)
class Button:
    """An interactive button; which of id/url/phone_number/copy_code is used depends on kind."""

    kind: ButtonKind
    display_text: str
    id: str | None = None
    url: str | None = None
    phone_number: str | None = None
    copy_code: str | None = None


@dataclass(frozen=True)
class Interactive:
    """The recommended ``interactive`` send_template message."""

    text: str
    title: str = ""
    subtitle: str = ""
    footer: str = ""
    buttons: tuple[Button, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class TemplateButton:
    """A legacy quick-reply template button."""

    display_text: str
    id: str


@dataclass(frozen=True)
class LegacyTemplate:
    """The deprecated ``template`` send_template message."""

    text: str
    footer: str = ""
    buttons: tuple[TemplateButton, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class ListRow:
    """One row of a list section."""

    title: str
    row_id: str
    description: str = ""


@dataclass(frozen=True)
class ListSection:
    """One section of a list message."""

    title: str
    rows: tuple[ListRow, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class ListMessage:
    """The ``list`` send_template message."""

    text: str
    button_text: str
    sections: tuple[ListSection, ...] = field(default_factory=tuple)
    title: str = ""
    footer: str = ""


Message = Text | Media | Interactive | LegacyTemplate | ListMessage

_TYPE_OF: dict[type, str] = {
    Text: "text",
    Media: "media",
    Interactive: "interactive",
    LegacyTemplate: "template",
    ListMessage: "list",
}
MESSAGE_TYPES: tuple[str, ...] = tuple(_TYPE_OF.values())


def message_type(message: Message) -> str:
    """The spec's type name of ``message``: text, media, interactive, template or list."""
    return _TYPE_OF[type(message)]


def message_to_dict(message: Message) -> dict[str, Any]:
    """The JSON-ready form of ``message`` with a ``type`` key."""
    out: dict[str, Any] = {"type": message_type(message)}
    if isinstance(message, Text):
        out["text"] = message.text
    elif isinstance(message, Media):
        out.update(media_url=message.media_url, caption=message.caption)
        if message.filename:
            out["filename"] = message.filename
    elif isinstance(message, Interactive):
        out.update(
            text=message.text,
            title=message.title,
            subtitle=message.subtitle,
            footer=message.footer,
            buttons=[{k: v for k, v in vars(b).items() if v is not None} for b in message.buttons],
        )
    elif isinstance(message, LegacyTemplate):
        out.update(
            text=message.text,
            footer=message.footer,
            buttons=[{"display_text": b.display_text, "id": b.id} for b in message.buttons],
        )
    else:
        out.update(
            text=message.text,
            title=message.title,
            footer=message.footer,
            button_text=message.button_text,
            sections=[
                {"title": s.title, "rows": [vars(r).copy() for r in s.rows]}
                for s in message.sections
            ],
        )
    return out


def message_from_dict(data: dict[str, Any]) -> Message:
    """Rebuild a message from :func:`message_to_dict`'s output.

    Raises ``ValueError`` naming the field when the dict is not a message.
    """
    kind = data.get("type")
    try:
        if kind == "text":
            return Text(text=str(data["text"]))
        if kind == "media":
            return Media(
                media_url=str(data["media_url"]),
                caption=str(data.get("caption", "")),
                filename=data.get("filename"),
            )
        if kind == "interactive":
            return Interactive(
                text=str(data["text"]),
                title=str(data.get("title", "")),
                subtitle=str(data.get("subtitle", "")),
                footer=str(data.get("footer", "")),
                buttons=tuple(Button(**b) for b in data.get("buttons", [])),
            )
        if kind == "template":
            return LegacyTemplate(
                text=str(data["text"]),
                footer=str(data.get("footer", "")),
                buttons=tuple(TemplateButton(**b) for b in data.get("buttons", [])),
            )
        if kind == "list":
            return ListMessage(
                text=str(data["text"]),
                title=str(data.get("title", "")),
                footer=str(data.get("footer", "")),
                button_text=str(data["button_text"]),
                sections=tuple(
                    ListSection(
                        title=str(s.get("title", "")),
                        rows=tuple(ListRow(**r) for r in s.get("rows", [])),
                    )
                    for s in data.get("sections", [])
                ),
            )
    except KeyError as exc:
        raise ValueError(f"message of type {kind!r} lacks field {exc.args[0]!r}") from exc
    except TypeError as exc:
        raise ValueError(f"message of type {kind!r} has a malformed field: {exc}") from exc
    raise ValueError(f"unknown message type {kind!r} (expected one of {', '.join(MESSAGE_TYPES)})")
