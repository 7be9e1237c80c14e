"""Configuration from environment variables (prefix ``GATECAST_``) and a ``.env`` file.

Secrets are :class:`pydantic.SecretStr`: their ``repr`` and ``str`` print ``**********``,
so they never reach logs or error messages by accident. Call ``.get_secret_value()``
only where the value goes on the wire.
"""

from __future__ import annotations

import ipaddress
from dataclasses import fields
from datetime import datetime
from functools import lru_cache
from typing import Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from campaigns.untrusted_files import (
    DEFAULT_PARSE_MEMORY,
    DEFAULT_PARSE_OUTPUT,
    DEFAULT_PARSE_SECONDS,
    ParseLimits,
)
from campaigns.variety import DEFAULT_MAX_IDENTICAL_IN_ROW
from scheduler.care import DEFAULTS as CARE
from scheduler.care import CareSettings
from scheduler.defaults import (
    DEFAULT_EVENT_RETENTION_DAYS,
    DEFAULT_SEND_CONCURRENCY,
    DEFAULT_SENDER_GRACE_SECONDS,
    DEFAULT_SENDER_LEASE_SECONDS,
    DEFAULT_WEBHOOK_REGISTER_CONCURRENCY,
    MIN_EVENT_RETENTION_DAYS,
)

DEFAULT_OPT_OUT_KEYWORDS = (
    "STOP",
    "STOPALL",
    "UNSUBSCRIBE",
    "CANCEL",
    "END",
    "QUIT",
    "OPTOUT",
    "OPT OUT",
    "PARAR",
    "SAIR",
    "CANCELAR",
    "BAJA",
    "ARRET",
    "ARRÊT",
    "STOPP",
    "ABMELDEN",
    "DISISCRIVI",
    "BASTA",
    "ALTO",
)


class Settings(BaseSettings):
    """Everything gatecast reads from its environment."""

    model_config = SettingsConfigDict(
        env_prefix="GATECAST_", env_file=".env", env_file_encoding="utf-8", extra="ignore"
    )

    gateway_url: str = Field("", description="The gateway's base URL, e.g. https://gw.example")
    gateway_prefix: Literal["api", "messenger_api"] = "api"
    gateway_kind: Literal["spec", "evolution", "waha"] = Field(
        "spec",
        description="Which gateway family GATECAST_GATEWAY_URL is: spec (the spec's "
        "gateway), evolution (Evolution API v2) or waha (WAHA); the key is "
        "GATECAST_ACCESS_TOKEN",
    )
    access_token: SecretStr = SecretStr("")
    database_url: str = "sqlite:///gatecast.db"
    public_url: str = Field("", description="Where the gateway can reach our webhook")
    webhook_secret: SecretStr = SecretStr("")
    webhook_check_seconds: float = Field(
        300.0,
        gt=0,
        le=86_400,
        description="How often the leader registers the webhook URL again for every "
        "connected instance (the gateway cannot say which URL it holds)",
    )
    webhook_register_concurrency: int = Field(
        DEFAULT_WEBHOOK_REGISTER_CONCURRENCY,
        ge=1,
        le=100,
        description="Most webhook registrations waiting on the gateway at once (at start, "
        "on the leader's check, on campaign run --webhook); dispatch does not wait for them",
    )
    webhook_allowed_sources: tuple[str, ...] = Field(
        (),
        description="Addresses (CIDRs) the webhook accepts requests from; empty: any",
    )
    journal_dir: str = Field(
        "",
        description="Where the webhook journal goes while the database is away; "
        "empty: next to a SQLite file, else the working directory",
    )
    api_key: SecretStr = SecretStr("")
    # users' passwords (issue 15): the argon2id cost of new hashes; tests lower it
    argon2_memory_kib: int = Field(
        65536,
        ge=8,
        le=4 * 1024 * 1024,
        description="Memory (KiB) one password hash uses; lower it only for tests",
    )
    argon2_time_cost: int = Field(
        3, ge=1, le=100, description="Passes one password hash makes; lower it only for tests"
    )
    default_region: str = "US"
    opt_out_keywords: tuple[str, ...] = DEFAULT_OPT_OUT_KEYWORDS
    import_max_bytes: int = 200 * 1024 * 1024
    media_max_bytes: int = Field(
        100 * 1024 * 1024,
        ge=1024,
        description="Largest uploaded media file of any kind; each kind keeps WhatsApp's own "
        "lower limit (image 5 MiB, video and audio 16 MiB, document 100 MiB)",
    )
    media_url_days: float = Field(
        30.0,
        gt=0,
        le=366,
        description="How long an uploaded media file's signed URL works (the gateway "
        "fetches it when it sends: keep it past the campaign's last send)",
    )
    request_max_bytes: int = Field(
        1024 * 1024,
        ge=1024,
        description="Largest request body of an API route that takes no upload (413 past it)",
    )
    xlsx_max_uncompressed_bytes: int = 1024 * 1024 * 1024
    import_max_columns: int = Field(1_000, ge=1, description="Most columns an import may have")
    import_max_rows: int = Field(2_000_000, ge=1, description="Most data rows an import may have")
    import_max_cell_chars: int = Field(
        32_767, ge=1, description="Most characters one cell of an import may hold"
    )
    # a workbook (XLSX, XLS, ODS) is read in a child process within these limits
    import_parse_memory_bytes: int = Field(
        DEFAULT_PARSE_MEMORY,
        ge=64 * 1024 * 1024,
        description="Most memory the child reading one uploaded workbook may use",
    )
    import_parse_seconds: float = Field(
        DEFAULT_PARSE_SECONDS, gt=0, description="Most seconds reading one workbook may take"
    )
    import_parse_output_bytes: int = Field(
        DEFAULT_PARSE_OUTPUT,
        ge=1024 * 1024,
        description="Most bytes of cell text reading one workbook may hand back",
    )
    http_timeout_seconds: float = 30.0
    send_method: Literal["get", "post"] = "get"
    host: str = "127.0.0.1"
    port: int = 8080
    reports_dir: str = "reports"
    sender_grace_seconds: float = Field(
        DEFAULT_SENDER_GRACE_SECONDS,
        ge=0,
        description="How long a paused sticky sender keeps its queued recipients before "
        "they go to the campaign's healthy senders",
    )
    send_concurrency: int = Field(
        DEFAULT_SEND_CONCURRENCY,
        ge=1,
        le=4096,
        description="Most paced sends one process lets wait on the gateway at once; size it "
        "as senders x gateway latency / gap between a sender's sends",
    )
    workers: int = Field(
        1,
        ge=1,
        le=64,
        description="Dispatching worker processes `gatecast serve` runs (itself and N-1 "
        "`gatecast worker` children); they share the senders with queued work",
    )
    intake_linger: float = Field(
        600.0,
        ge=0,
        description="Seconds the intake `gatecast serve` started keeps receiving after the "
        "last `serve` stopped, waiting for the next one (0: it stops with `serve`)",
    )
    sender_lease_seconds: float = Field(
        DEFAULT_SENDER_LEASE_SECONDS,
        ge=1,
        le=3600,
        description="How long a worker's lease on its share of the senders lasts unrenewed "
        "(renewed every third of it): a dead worker's senders go to the others after it",
    )
    dispatch_lease_seconds: float = Field(
        120.0,
        ge=1,
        le=24 * 3600,
        description="How long a claimed row may stay 'sending' before it counts as lost "
        "(becomes 'unknown'); keep it above the HTTP timeout",
    )
    unknown_settle_seconds: float = Field(
        600.0,
        ge=0,
        le=7 * 24 * 3600,
        description="`campaign retry --unknown` leaves alone 'unknown' rows attempted less "
        "than this long ago: the gateway's status events that settle them may still come",
    )
    event_retention_days: float = Field(
        DEFAULT_EVENT_RETENTION_DAYS,
        ge=0,
        description="Status events applied to their delivery are deleted this many days "
        f"after they were received (0 keeps them; at least {MIN_EVENT_RETENTION_DAYS:g})",
    )
    contact_cooldown_hours: float = Field(
        0.0,
        ge=0,
        le=366 * 24,
        description="Campaigns that do not set safety.contact_cooldown_hours skip a contact "
        "messaged by any campaign in the last this many hours (0: off)",
    )
    max_identical_in_row: int = Field(
        DEFAULT_MAX_IDENTICAL_IN_ROW,
        ge=0,
        le=1_000_000,
        description="Campaigns that do not set safety.max_identical_in_row send at most "
        "this many identical messages in a row per sender before holding the next (0: off)",
    )
    # sender care (issue 16; scheduler/care.py, docs/scheduling-and-pacing.md "Sender care")
    warmup_enabled: bool = Field(
        CARE.warmup_enabled,
        description="New senders warm up: a daily allowance of new-contact messages that "
        "grows with the sender's age in gatecast",
    )
    warmup_first_day: int = Field(
        CARE.warmup_first_day, ge=1, description="Warm-up: new-contact messages on day 1"
    )
    warmup_days: int = Field(
        CARE.warmup_days,
        ge=1,
        le=60,
        description="Warm-up: days the allowance doubles (then only the daily cap applies)",
    )
    warmup_spread: float = Field(
        CARE.warmup_spread,
        ge=0,
        lt=1,
        description="Warm-up: each day's allowance is drawn within +/- this share",
    )
    warmup_known_weight: float = Field(
        CARE.warmup_known_weight,
        ge=0,
        le=1,
        description="Warm-up: the share of the allowance a message to a known contact uses",
    )
    health_half_life_seconds: float = Field(
        CARE.health_half_life_seconds,
        gt=0,
        description="The health score halves in this many seconds without new signals",
    )
    health_medium: float = Field(
        CARE.health_medium, gt=0, description="Health score from which the pace is halved"
    )
    health_high: float = Field(
        CARE.health_high,
        gt=0,
        description="Health score from which the sender pauses for the cool-down",
    )
    health_critical: float = Field(
        CARE.health_critical,
        gt=0,
        description="Health score from which the sender stays paused until resumed by hand",
    )
    health_cooldown_seconds: float = Field(
        CARE.health_cooldown_seconds,
        ge=0,
        description="A sender paused at high health resumes by itself after this long",
    )
    timelock_seconds: float = Field(
        CARE.timelock_seconds,
        gt=0,
        le=7 * 24 * 3600,
        description="How long a 463 timelock lasts when the gateway does not say",
    )
    log_level: str = "INFO"
    access_log: bool = Field(
        False,
        description="Log one line per HTTP request (uvicorn's access log, with its request id)",
    )
    # dashboard sessions (issue 13): which reverse proxies are believed
    trusted_proxies: str = Field(
        "",
        description="Addresses or networks (comma-separated, * for any, empty for none) of "
        "reverse proxies whose X-Forwarded-Proto and X-Forwarded-For gatecast believes",
    )
    clock_start: datetime | None = Field(
        None, description="Rehearsals and tests: the process clock starts here (ISO, with offset)"
    )

    @model_validator(mode="after")
    def _health_levels_in_order(self) -> Settings:
        """The health thresholds must rise: medium < high < critical."""
        if not self.health_medium < self.health_high < self.health_critical:
            raise ValueError(
                "GATECAST_HEALTH_MEDIUM < GATECAST_HEALTH_HIGH < GATECAST_HEALTH_CRITICAL "
                f"is required, not {self.health_medium:g}, {self.health_high:g}, "
                f"{self.health_critical:g}"
            )
        return self

    def parse_limits(self) -> ParseLimits:
        """What reading one workbook in its child process may use."""
        return ParseLimits(
            self.import_parse_memory_bytes,
            self.import_parse_seconds,
            self.import_parse_output_bytes,
        )

    def care(self) -> CareSettings:
        """The sender care settings of the scheduler (scheduler/care.py)."""
        return CareSettings(**{f.name: getattr(self, f.name) for f in fields(CareSettings)})

    @model_validator(mode="after")
    def _lease_outlasts_a_send(self) -> Settings:
        """A row's lease must outlast its send, or a slow answer would count as lost."""
        if self.dispatch_lease_seconds <= self.http_timeout_seconds:
            raise ValueError(
                f"GATECAST_DISPATCH_LEASE_SECONDS ({self.dispatch_lease_seconds:g}) must be "
                f"longer than GATECAST_HTTP_TIMEOUT_SECONDS ({self.http_timeout_seconds:g}): "
                "a send still waiting for the gateway would be counted as lost"
            )
        return self

    @field_validator("event_retention_days")
    @classmethod
    def _retention(cls, value: float) -> float:
        """0 (keep every event) or at least the evidence settling's look-back."""
        if 0 < value < MIN_EVENT_RETENTION_DAYS:
            raise ValueError(
                f"must be 0 (keep every event) or at least {MIN_EVENT_RETENTION_DAYS:g} days: "
                "unknown deliveries are settled from events up to two days old"
            )
        return value

    @field_validator("webhook_allowed_sources")
    @classmethod
    def _cidrs(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        """Every entry must be an IP address or network (``203.0.113.0/24``)."""
        for cidr in value:
            try:
                ipaddress.ip_network(cidr.strip(), strict=False)
            except ValueError as exc:
                raise ValueError(f"not an IP address or network (CIDR): {cidr!r}") from exc
        return tuple(c.strip() for c in value)


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings (read once; tests build ``Settings(...)`` directly)."""
    return Settings()
