"""Property tests of the sandbox: what a client sends is what the sandbox records."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.sandbox import Sandbox, SandboxConfig, run_sandbox_in_thread
from gateway.sandbox.state import GatewayRefusal
from gateway.sandbox.validation import check_number

TOKEN = "sandbox-token"


@pytest.fixture(scope="module")
def linked() -> Iterator[tuple[Sandbox, str, httpx.Client]]:
    cfg = SandboxConfig(status_delays=(60.0, 60.0, 60.0))
    with run_sandbox_in_thread(cfg) as sb, httpx.Client() as client:
        yield sb, sb.create_linked_instance(), client


texts = st.text(
    alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"),
    min_size=1,
    max_size=60,
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=texts, as_json=st.booleans())
def test_message_text_round_trips(
    linked: tuple[Sandbox, str, httpx.Client], text: str, as_json: bool
) -> None:
    sb, iid, client = linked
    fields = {"number": "15551234567", "type": "text", "message": text, "instance_id": iid}
    fields["access_token"] = TOKEN
    if as_json:
        resp = client.post(f"{sb.url}/messenger_api/send", json=fields)
    else:
        resp = client.get(f"{sb.url}/api/send", params=fields)
    body = resp.json()
    mid = body["message"]["key"]["id"]
    assert sb.state.messages[mid].payload == {"type": "text", "message": text}


@given(number=st.text(max_size=20))
def test_only_7_to_15_ascii_digits_are_numbers(number: str) -> None:
    valid = number.isascii() and number.isdigit() and 7 <= len(number) <= 15
    try:
        assert check_number(number) == number
        assert valid
    except GatewayRefusal as exc:
        assert not valid
        assert exc.message in ("Phone number is required", "Invalid phone number")
