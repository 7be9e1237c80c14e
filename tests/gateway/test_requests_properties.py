"""Property tests: whatever the values, what reaches the wire decodes back to them."""

from __future__ import annotations

import json
from urllib.parse import parse_qsl, quote

import httpx
import phonenumbers
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from phonenumbers import PhoneNumberFormat, PhoneNumberType

from gateway.client import GatewayClient
from gateway.errors import RequestValidationError
from gateway.messages import Button, Interactive, Media, Text
from gateway.requests import normalise_number

TOKEN = "t0k&en=#?+ é"
OK = {"status": "success", "message": {"key": {"id": "ID1"}}}

texts = st.text(min_size=1, max_size=200).filter(lambda s: s.strip() != "")
tricky = st.sampled_from(
    ["&", "=", "#", "\n", "\r\n", "+", "%", "%20", "?", " ", "é", "🎉", "\x00"]
)
messages = st.one_of(
    texts, st.lists(st.one_of(tricky, texts), min_size=1, max_size=8).map("".join)
).filter(lambda s: s.strip() != "")
instance_ids = st.text(
    alphabet=st.characters(blacklist_categories=("Cs", "Zs", "Zl", "Zp", "Cc")),
    min_size=1,
    max_size=30,
).filter(lambda s: s.strip() == s and not any(c.isspace() for c in s) and s)
url_values = st.text(max_size=40)


def _capture(send_method: str = "get") -> tuple[GatewayClient, list[httpx.Request]]:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=OK)

    client = GatewayClient(
        "http://gw.test",
        TOKEN,
        transport=httpx.MockTransport(handler),
        send_method=send_method,  # type: ignore[arg-type]
    )
    return client, seen


def _decoded_query(request: httpx.Request) -> dict[str, str]:
    raw = request.url.query.decode("ascii")  # the wire form is pure ASCII
    assert not any(ch in raw for ch in " \n\r#")
    pairs = parse_qsl(raw, keep_blank_values=True, strict_parsing=True)
    assert len(pairs) == len({k for k, _ in pairs})
    return dict(pairs)


@settings(max_examples=150, deadline=None)
@given(text=messages, instance_id=instance_ids)
def test_text_query_round_trips(text: str, instance_id: str) -> None:
    client, seen = _capture()
    with client:
        assert client.send(instance_id, "+14155552671", Text(text)).accepted
    assert _decoded_query(seen[0]) == {
        "number": "14155552671",
        "type": "text",
        "message": text,
        "instance_id": instance_id,
        "access_token": TOKEN,
    }


@settings(max_examples=100, deadline=None)
@given(
    caption=st.one_of(st.just(""), messages),
    q=url_values,
    filename=st.text(min_size=1, max_size=30),
)
def test_media_query_round_trips(caption: str, q: str, filename: str) -> None:
    filename = filename.replace("/", "_").replace("\\", "_")
    media_url = f"https://cdn.example/f.pdf?q={quote(q, safe='')}&x=1"
    client, seen = _capture()
    with client:
        out = client.send("INST", "120363025246125486@g.us", Media(media_url, caption, filename))
    assert out.accepted
    assert _decoded_query(seen[0]) == {
        "group_id": "120363025246125486@g.us",
        "type": "media",
        "message": caption,
        "media_url": media_url,
        "filename": filename,
        "instance_id": "INST",
        "access_token": TOKEN,
    }


@settings(max_examples=100, deadline=None)
@given(q=url_values, instance_id=instance_ids, enable=st.booleans())
def test_webhook_url_query_round_trips(q: str, instance_id: str, enable: bool) -> None:
    hook = f"https://me.example/hook?sig={quote(q, safe='')}&a=b#frag"
    client, seen = _capture()
    with client:
        client.set_webhook(instance_id, hook, enable)
    assert _decoded_query(seen[0]) == {
        "instance_id": instance_id,
        "webhook_url": hook,
        "enable": "true" if enable else "false",
        "access_token": TOKEN,
    }


@settings(max_examples=100, deadline=None)
@given(text=messages, display=messages, button_id=messages, copy=messages)
def test_post_bodies_and_button_params_round_trip(
    text: str, display: str, button_id: str, copy: str
) -> None:
    client, seen = _capture("post")
    msg = Interactive(
        text,
        buttons=(
            Button("quick_reply", display, id=button_id),
            Button("cta_copy", display, copy_code=copy),
        ),
    )
    with client:
        assert client.send("INST", "14155552671", msg).accepted
        assert client.send("INST", "14155552671", Text(text)).accepted
    template, plain = seen
    assert _decoded_query(template) == {"instance_id": "INST", "access_token": TOKEN}
    body = json.loads(template.content)
    assert body["message"]["text"] == text
    params = [json.loads(b["buttonParamsJson"]) for b in body["message"]["interactiveButtons"]]
    assert params == [
        {"display_text": display, "id": button_id},
        {"display_text": display, "copy_code": copy},
    ]
    assert json.loads(plain.content) == {
        "number": "14155552671",
        "type": "text",
        "message": text,
        "instance_id": "INST",
        "access_token": TOKEN,
    }


@settings(max_examples=200, deadline=None)
@given(
    region=st.sampled_from(sorted(phonenumbers.SUPPORTED_REGIONS)),
    kind=st.sampled_from([PhoneNumberType.MOBILE, PhoneNumberType.FIXED_LINE]),
    style=st.sampled_from(["e164", "international", "00", "jid"]),
)
def test_real_numbers_in_any_format_normalise_to_e164_digits(
    region: str, kind: int, style: str
) -> None:
    example = phonenumbers.example_number_for_type(region, kind)
    assume(example is not None)
    assert example is not None  # for mypy: assume() does not narrow
    e164 = phonenumbers.format_number(example, PhoneNumberFormat.E164)
    written = {
        "e164": e164,
        "international": phonenumbers.format_number(example, PhoneNumberFormat.INTERNATIONAL),
        "00": "00" + e164[1:],
        "jid": e164[1:] + "@s.whatsapp.net",
    }[style]
    assume(8 <= len(e164) - 1 <= 15)
    assert normalise_number(written) == e164[1:]


@settings(max_examples=200, deadline=None)
@given(
    digits=st.text(alphabet="0123456789", min_size=8, max_size=12),
    junk=st.characters(categories=["L"]),
    at=st.integers(0, 12),
)
def test_anything_with_a_letter_is_refused(digits: str, junk: str, at: int) -> None:
    raw = "+1" + digits[:at] + junk + digits[at:]
    with pytest.raises(RequestValidationError) as err:
        normalise_number(raw, "to")
    assert err.value.field == "to"
