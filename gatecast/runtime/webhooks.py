"""The webhook gatecast receives: its secret, its URL, and its registration with senders.

The secret comes from ``GATECAST_WEBHOOK_SECRET``, else from a generated owner-only file
beside the SQLite database (or in the working directory); it is never printed in full.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Sequence
from pathlib import Path

from pydantic import SecretStr
from rich.console import Console

from campaigns.instances import InstanceGone, set_webhook, webhook_address
from gatecast.settings import Settings
from gateway.client import GatewayClient
from gateway.errors import GatewayError
from storage.engine import Engine, sqlite_file
from storage.types import utcnow

SECRET_FILE_NAME = ".gatecast-webhook-secret"  # noqa: S105  (a file name, not a secret)


def secret_file_path(settings: Settings) -> Path:
    """Where a generated webhook secret is kept (beside the SQLite file, else the cwd)."""
    database = sqlite_file(settings.database_url)
    if database is not None:
        return database.resolve().parent / SECRET_FILE_NAME
    return Path.cwd() / SECRET_FILE_NAME


def ensure_webhook_secret(settings: Settings) -> tuple[SecretStr, bool]:
    """The webhook secret and whether it was generated now (never logged in full)."""
    configured = settings.webhook_secret.get_secret_value()
    if configured:
        return SecretStr(configured), False
    path = secret_file_path(settings)
    if path.exists():
        stored = path.read_text(encoding="utf-8").strip()
        if stored:
            return SecretStr(stored), False
    path.parent.mkdir(parents=True, exist_ok=True)
    value = secrets.token_urlsafe(24)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return SecretStr(path.read_text(encoding="utf-8").strip()), False
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(value + "\n")
    return SecretStr(value), True


def with_webhook_secret(settings: Settings) -> tuple[Settings, bool]:
    """``settings`` with ``webhook_secret`` filled in (generated and stored if unset)."""
    secret, created = ensure_webhook_secret(settings)
    return settings.model_copy(update={"webhook_secret": secret}), created


def hint(secret: SecretStr) -> str:
    """How a secret is shown in output: never any of its characters."""
    del secret
    return "***"


def webhook_url(settings: Settings, own_address: str) -> str:
    """The URL this deployment registers (:func:`campaigns.instances.webhook_address`:
    ``GATECAST_PUBLIC_URL``, else ``own_address``); it contains the secret, so it goes to
    the gateway only. ``settings`` must hold the secret (:func:`with_webhook_secret`)."""
    url = webhook_address(
        settings.public_url, own_address, settings.webhook_secret.get_secret_value()
    )
    if url is None:
        raise ValueError("a webhook URL needs an address and the webhook secret")
    return url


def shown_webhook_url(url: str) -> str:
    """A webhook URL as output shows it: the secret replaced by :func:`hint`."""
    return url.rsplit("/", 1)[0] + "/" + hint(SecretStr(""))


def register_webhooks(
    engine: Engine,
    client: GatewayClient,
    url: str,
    instance_ids: Sequence[str],
    *,
    out: Console | None = None,
) -> list[str]:
    """``set_webhook`` to ``url`` for each instance; returns those that were registered."""
    out = out or Console()
    done: list[str] = []
    for iid in instance_ids:
        try:
            set_webhook(engine, client, iid, url, now=utcnow())
        except (GatewayError, InstanceGone) as exc:
            out.print(f"[yellow]webhook not registered for {iid}:[/] {exc}")
            continue
        done.append(iid)
    if done:
        out.print(f"webhook {shown_webhook_url(url)} registered for {', '.join(done)}")
    return done
