"""The deployment settings (issue 31, decision 65): the defaults every role reads and
only admins change (``gatecast.web.roles.ADMIN_TO_CHANGE``), and facts of the deployment
shown read-only (never a secret)."""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import urlsplit, urlunsplit

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, Field

from campaigns import audit
from campaigns.campaign_file import PaceSpec
from campaigns.deployment_defaults import (
    DefaultsError,
    parse_defaults,
    read_defaults,
    save_defaults,
)
from gatecast.web.api.common import RequestBody
from gatecast.web.api.errors import campaign_file_errors
from gatecast.web.audit import note_changes
from gatecast.web.auth import identify
from gatecast.web.context import AppContext, get_ctx
from gatecast.web.problems import Problem, errors_detail

router = APIRouter(tags=["settings"])
Ctx = Annotated[AppContext, Depends(get_ctx)]


class Deployment(BaseModel):
    """Facts of the deployment, set where gatecast runs (read-only here)."""

    public_url: str | None = Field(
        description="Where the gateway reaches gatecast's webhook; null: not set"
    )
    webhook_secret_set: bool = Field(description="Whether the webhook has a secret (never shown)")
    gateway_url: str = Field(description="The gateway's address, without credentials")
    warmup_enabled: bool = Field(description="Whether new senders warm up")
    built_in_region: str = Field(description="The region used when no default is stored")
    built_in_pace: dict[str, Any] = Field(description="The pace used when no default is stored")


class SettingsPublic(BaseModel):
    """The stored defaults (null: not set, the built-in one applies) and the deployment."""

    region: str | None = Field(description="Country of numbers without + in an import")
    pace: dict[str, Any] | None = Field(description="A campaign file's [pace]")
    schedule: dict[str, Any] | None = Field(description="window and timezone")
    deployment: Deployment


class SettingsChange(RequestBody):
    """The defaults to store, all three at once (null or left out: not set, the built-in
    default applies). Used when a campaign or an import is created, never after."""

    region: str | None = Field(None, max_length=8, description="ISO 3166 code, e.g. GB")
    pace: dict[str, Any] | None = Field(
        None,
        description="per_minute, delay_seconds [min, max], daily_cap: a campaign file's [pace]",
        examples=[{"per_minute": 10, "delay_seconds": [8, 20], "daily_cap": 300}],
    )
    schedule: dict[str, Any] | None = Field(
        None,
        description="window [open, close] (HH:MM) and timezone (IANA)",
        examples=[{"window": ["09:00", "20:00"], "timezone": "Europe/London"}],
    )


def without_credentials(url: str) -> str:
    """``url`` without user, password, query or fragment: ``https://gw.example:8080/x``."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def read_settings(ctx: AppContext) -> SettingsPublic:
    """The settings as the API and the Settings page show them."""
    s = ctx.settings
    return SettingsPublic(
        **read_defaults(ctx.engine).as_json(),
        deployment=Deployment(
            public_url=s.public_url or None,
            webhook_secret_set=bool(s.webhook_secret.get_secret_value()),
            gateway_url=without_credentials(s.gateway_url),
            warmup_enabled=s.warmup_enabled,
            built_in_region=s.default_region.upper(),
            built_in_pace=PaceSpec().model_dump(mode="json"),
        ),
    )


@router.get("/settings", response_model=SettingsPublic)
def get_settings(ctx: Ctx) -> SettingsPublic:
    """The deployment's defaults and facts (any role)."""
    return read_settings(ctx)


@router.put("/settings", response_model=SettingsPublic)
def put_settings(body: SettingsChange, ctx: Ctx, request: Request) -> SettingsPublic:
    """Store the defaults (admins): 422 naming each wrong field (``pace.daily_cap``)
    stores nothing. Campaigns and imports created later use them; nothing already
    created changes."""
    try:
        defaults = parse_defaults(body.model_dump())
    except DefaultsError as exc:
        errors = campaign_file_errors(exc)
        raise Problem(
            422,
            "invalid_request",
            errors_detail(errors, "the settings"),
            title="The settings are not valid",
            errors=errors,
        ) from None
    before = read_defaults(ctx.engine)
    who = identify(request)
    save_defaults(ctx.engine, defaults, now=ctx.clock(), by=who.actor if who else None)
    note_changes(request, audit.changed(before.as_json(), defaults.as_json()))
    return read_settings(ctx)
