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
from rich.markup import escape

from campaigns.instances import webhook_address
from gatecast.settings import Settings
from gateway.client import GatewayClient
from scheduler.defaults import DEFAULT_WEBHOOK_REGISTER_CONCURRENCY
from scheduler.webhook_keeper import Registrations, register_concurrently
from storage.engine import Engine, sqlite_file
from storage.types import utcnow

SECRET_FILE_NAME = ".gatecast-webhook-secret"  # noqa: S105  (a file name, not a secret)


def secret_file_path(settings: Settings) -> Path:
    """Where a generated webhook secret is kept (beside the SQLite file, else the cwd)."""
    database = sqlite_file(settings.database_url)
    if database is not None:
        return database.resolve().parent / SECRET_FILE_NAME
    return Path.cwd() / SECRET_FILE_NAME


def stored_webhook_secret(settings: Settings) -> SecretStr | None:
    """The webhook secret configured or stored beside the database; None when neither
    (nothing is generated)."""
    configured = settings.webhook_secret.get_secret_value()
    if configured:
        return SecretStr(configured)
    path = secret_file_path(settings)
    if path.exists():
        stored = path.read_text(encoding="utf-8").strip()
        if stored:
            return SecretStr(stored)
    return None


def ensure_webhook_secret(settings: Settings) -> tuple[SecretStr, bool]:
    """The webhook secret and whether it was generated now (never logged in full)."""
    found = stored_webhook_secret(settings)
    if found is not None:
        return found, False
    path = secret_file_path(settings)
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
    concurrency: int = DEFAULT_WEBHOOK_REGISTER_CONCURRENCY,
) -> list[str]:
    """``set_webhook`` to ``url`` for each instance, at most ``concurrency`` at once
    (``GATECAST_WEBHOOK_REGISTER_CONCURRENCY``); prints one summary line and each failure
    (:func:`report_registrations`); returns those that were registered."""
    done = register_concurrently(
        engine, client, url, instance_ids, now=utcnow(), concurrency=concurrency
    )
    report_registrations(url, done, out or Console())
    return done.registered


#: how many senders the summary line names before it counts the rest
NAMED_IN_SUMMARY = 10


def report_registrations(url: str, done: Registrations, out: Console) -> None:
    """What a pass of registrations did, as ``serve``, ``worker`` and ``campaign run
    --webhook`` print it: each failure by sender, then one line for those registered
    (named up to :data:`NAMED_IN_SUMMARY`, else the first ones and a count): never a line
    per sender registered, whatever their number."""
    for iid, why in done.failed.items():
        out.print(f"[yellow]webhook not registered for {iid}:[/] {escape(why)}", highlight=False)
    ids = done.registered
    if not ids:
        return
    names = ", ".join(ids[:NAMED_IN_SUMMARY])
    if len(ids) > NAMED_IN_SUMMARY:
        names = f"{len(ids)} senders ({names} and {len(ids) - NAMED_IN_SUMMARY} more)"
    out.print(f"webhook {shown_webhook_url(url)} registered for {names}", highlight=False)
