"""Secrets are never shown, not even in part."""

from __future__ import annotations

from pydantic import SecretStr

from gatecast.runtime.webhooks import hint, shown_webhook_url, webhook_url
from gatecast.settings import Settings


def test_hint_shows_no_character_of_the_secret() -> None:
    secret = SecretStr("Zq9xW2abcdef")
    assert hint(secret) == "***"
    assert "Zq9x" not in hint(secret)


def test_webhook_url_carries_the_secret_for_the_gateway_only() -> None:
    settings = Settings(webhook_secret=SecretStr("s3cr3t"))
    url = webhook_url(settings, "http://h:1/")
    assert url == "http://h:1/webhooks/gateway/s3cr3t"
    assert shown_webhook_url(url) == "http://h:1/webhooks/gateway/***"


def test_webhook_url_is_the_public_url_whatever_the_process() -> None:
    settings = Settings(webhook_secret=SecretStr("s3"), public_url="https://hooks.example/gc/")
    assert webhook_url(settings, "http://127.0.0.1:8001") == (
        "https://hooks.example/gc/webhooks/gateway/s3"
    )
    assert webhook_url(settings, "http://127.0.0.1:8002") == webhook_url(settings, "")


def test_settings_repr_hides_secrets() -> None:
    s = Settings(
        access_token=SecretStr("tok-123"),
        webhook_secret=SecretStr("wh-456"),
        api_key=SecretStr("key-789"),
    )
    text = repr(s) + str(s) + str(s.model_dump())
    for secret in ("tok-123", "wh-456", "key-789"):
        assert secret not in text
