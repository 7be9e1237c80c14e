"""A/B variants (issue 16, item 6): which variant a recipient gets, the comparison of the
variants' rates with a significance note, and an A/B test's pick of a winner.

* **Assignment.** Each recipient gets one variant, stable: a hash of the campaign id and
  the target, placed on the variants' cumulative weights (:func:`assign`). A restart, a
  preview and a rerun give the same variant. The variant's name is stored on the
  delivery row (``deliveries.variant``).
* **An A/B test** (``[ab] test_share, pick_by, after``): a recipient is in the test when a
  second hash of (campaign, target) falls below ``test_share`` (:func:`in_test`); the
  test's rows are sent at once, the rest wait (queued, no variant, no due time) until
  ``after`` the start, when :func:`pick_and_release` picks the variant with the best
  ``pick_by`` rate among the test's sent rows, stores the pick with the rates it saw
  (``campaigns.ab_pick``, logged) and renders the rest with the winner.
* **Comparison** (:func:`compare`): per variant, the delivered, read, replied and
  opted-out rates of its sent rows, and a two-proportion z-test of each variant against
  the best one on the rate compared. Below :data:`MIN_SAMPLE` sent per variant, or above
  :data:`ALPHA`, the note says "not significant" and why.
"""

from __future__ import annotations

import hashlib
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Engine

from campaigns.campaign_file import CampaignSpec, MessageSpec, stored_spec
from campaigns.delivery_lifecycle import SKIP_QUEUED
from campaigns.render import ContactData, RenderError, recipient_rng, render_message
from gateway.messages import message_to_dict
from storage.queries import variants as vq

log = logging.getLogger("gatecast.campaigns")

#: the rates compared, by the name ``[ab] pick_by`` uses: (count, higher is better)
RATES: dict[str, tuple[str, bool]] = {
    "delivered_rate": ("delivered", True),
    "read_rate": ("read", True),
    "reply_rate": ("replied", True),
    "opt_out_rate": ("opted_out", False),
}
#: the significance level of the z-test (two-sided)
ALPHA = 0.05
#: fewer sent rows than this in either variant: the test is not run ("too few")
MIN_SAMPLE = 30
#: rows of an A/B test's rest rendered and released per transaction
REST_CHUNK = 2000


def _unit(campaign_id: int, target: str, salt: str) -> float:
    """A number in [0, 1) fixed by the campaign, the target and ``salt``."""
    digest = hashlib.sha256(f"{salt}:{campaign_id}:{target}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def assign(campaign_id: int, target: str, message: MessageSpec) -> tuple[str, MessageSpec]:
    """The variant (name, message) recipient ``target`` of the campaign gets, stable."""
    names = message.variant_names()
    total = sum(v.weight for v in message.variants)
    point = _unit(campaign_id, target, "variant") * total
    for name, variant in zip(names, message.variants, strict=True):
        point -= variant.weight
        if point < 0:
            return name, variant
    return names[-1], message.variants[-1]


def in_test(campaign_id: int, target: str, share: float) -> bool:
    """Whether recipient ``target`` is in the campaign's A/B test (the first share)."""
    return _unit(campaign_id, target, "ab-test") < share


def variant_named(message: MessageSpec, name: str) -> MessageSpec:
    """The variant of ``message`` called ``name`` (KeyError when none is)."""
    for n, variant in zip(message.variant_names(), message.variants, strict=True):
        if n == name:
            return variant
    raise KeyError(name)


def message_for(spec: CampaignSpec, campaign_id: int, target: str) -> MessageSpec:
    """The message recipient ``target`` gets (its variant's, or the one message)."""
    if not spec.message.variants:
        return spec.message
    return assign(campaign_id, target, spec.message)[1]


def variant_for(spec: CampaignSpec, campaign_id: int, target: str) -> str | None:
    """The name of ``target``'s variant (None without variants)."""
    if not spec.message.variants:
        return None
    return assign(campaign_id, target, spec.message)[0]


# -- comparison --------------------------------------------------------------------------


@dataclass(frozen=True)
class VariantRates:
    """One variant's figures: its recipients, its sent rows, and the rates of them."""

    name: str
    weight: float
    recipients: int
    sent: int
    delivered: int
    read: int
    replied: int
    opted_out: int
    delivered_rate: float | None
    read_rate: float | None
    reply_rate: float | None
    opt_out_rate: float | None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return asdict(self)


@dataclass(frozen=True)
class Comparison:
    """The variants side by side on one rate, with the significance note."""

    rate: str
    variants: list[VariantRates]
    best: str | None
    #: each other variant against the best: name -> (z, two-sided p) or None (too few)
    tests: dict[str, tuple[float, float] | None]
    note: str

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "rate": self.rate,
            "best": self.best,
            "variants": [v.as_dict() for v in self.variants],
            "tests": {
                k: None if t is None else {"z": round(t[0], 3), "p": round(t[1], 4)}
                for k, t in self.tests.items()
            },
            "note": self.note,
        }


def _ratio(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def two_proportion_z(x1: int, n1: int, x2: int, n2: int) -> tuple[float, float] | None:
    """The pooled two-proportion z-test of x1/n1 against x2/n2: (z, two-sided p), or None
    when a sample is empty or the pooled rate is 0 or 1 (no variance: nothing to test)."""
    if n1 <= 0 or n2 <= 0:
        return None
    pooled = (x1 + x2) / (n1 + n2)
    se = math.sqrt(pooled * (1 - pooled) * (1 / n1 + 1 / n2))
    if se == 0:
        return None
    z = (x1 / n1 - x2 / n2) / se
    p = math.erfc(abs(z) / math.sqrt(2))
    return z, p


def rates(message: MessageSpec, counts: Mapping[str, Mapping[str, int]]) -> list[VariantRates]:
    """Each variant's figures from :func:`storage.queries.variants.variant_counts`, in the
    file's order (a variant nobody got shows zeros)."""
    out = []
    for name, variant in zip(message.variant_names(), message.variants, strict=True):
        c = counts.get(name, {})
        sent = c.get("sent", 0)
        out.append(
            VariantRates(
                name=name,
                weight=variant.weight,
                recipients=c.get("rows", 0),
                sent=sent,
                delivered=c.get("delivered", 0),
                read=c.get("read", 0),
                replied=c.get("replied", 0),
                opted_out=c.get("opted_out", 0),
                delivered_rate=_ratio(c.get("delivered", 0), sent),
                read_rate=_ratio(c.get("read", 0), sent),
                reply_rate=_ratio(c.get("replied", 0), sent),
                opt_out_rate=_ratio(c.get("opted_out", 0), sent),
            )
        )
    return out


def best_of(figures: Sequence[VariantRates], rate: str) -> VariantRates | None:
    """The variant with the best ``rate`` among those sent (ties: more sent, then the
    earlier in the file); None when none was sent."""
    field, higher = RATES[rate]
    sent = [v for v in figures if v.sent > 0]
    if not sent:
        return None

    def key(item: tuple[int, VariantRates]) -> tuple[float, int, int]:
        i, v = item
        value = getattr(v, field) / v.sent
        return (value if higher else -value, v.sent, -i)

    return max(enumerate(sent), key=key)[1]


def compare(message: MessageSpec, counts: Mapping[str, Mapping[str, int]], rate: str) -> Comparison:
    """The variants compared on ``rate`` (one of :data:`RATES`), with an honest note."""
    field, _higher = RATES[rate]
    figures = rates(message, counts)
    best = best_of(figures, rate)
    tests: dict[str, tuple[float, float] | None] = {}
    if best is None:
        return Comparison(rate, figures, None, tests, "nothing sent yet: no comparison")
    significant: list[str] = []
    too_few: list[str] = []
    for v in figures:
        if v.name == best.name:
            continue
        if min(v.sent, best.sent) < MIN_SAMPLE:
            tests[v.name] = None
            too_few.append(v.name)
            continue
        tests[v.name] = two_proportion_z(getattr(best, field), best.sent, getattr(v, field), v.sent)
        result = tests[v.name]
        if result is not None and result[1] < ALPHA:
            significant.append(f"{v.name} (p = {result[1]:.3f})")
    label = rate.replace("_", " ")
    if significant and not too_few and len(significant) == len(figures) - 1:
        note = (
            f"{best.name} has the best {label}; the difference is significant "
            f"(two-proportion z-test, p < {ALPHA}) against {', '.join(significant)}"
        )
    elif too_few:
        note = (
            f"{best.name} has the best {label} so far; not significant: fewer than "
            f"{MIN_SAMPLE} sent in {', '.join(sorted({best.name, *too_few}))}"
        )
    else:
        note = (
            f"{best.name} has the best {label} so far; not significant "
            f"(two-proportion z-test, p >= {ALPHA} against at least one variant)"
        )
    return Comparison(rate, figures, best.name, tests, note)


def campaign_comparison(conn: Connection, campaign_id: int, spec: CampaignSpec) -> dict[str, Any]:
    """What the report, the API and the dashboard show of a campaign's variants: each
    rate compared, the A/B test and its pick; empty when the campaign has no variants."""
    if not spec.message.variants:
        return {}
    counts = vq.variant_counts(conn, campaign_id)
    by = spec.ab.pick_by if spec.ab else "read_rate"
    compared = compare(spec.message, counts, by)
    _raw, _started, pick = vq.campaign_ab(conn, campaign_id)
    out: dict[str, Any] = {
        "compared_by": by,
        "variants": [v.as_dict() for v in compared.variants],
        "best": compared.best,
        "tests": compared.as_dict()["tests"],
        "note": compared.note,
        "ab": None,
    }
    if spec.ab is not None:
        out["ab"] = {
            "test_share": spec.ab.test_share,
            "pick_by": spec.ab.pick_by,
            "after": spec.ab.after,
            "pick": pick or None,
        }
    return out


# -- the A/B test's pick -------------------------------------------------------------------


def pick_due(engine: Engine, campaign_id: int) -> datetime | None:
    """When the campaign's A/B winner is to be picked: its start plus ``[ab] after``
    (None: no A/B test, not started, or picked already)."""
    with engine.connect() as conn:
        raw, started_at, pick = vq.campaign_ab(conn, campaign_id)
    if raw is None or pick or started_at is None:
        return None
    spec = stored_spec(raw, campaign_id)
    return None if spec.ab is None else started_at + spec.ab.wait


def pick_and_release(engine: Engine, campaign_id: int, *, now: datetime) -> dict[str, Any] | None:
    """Pick the campaign's A/B winner (once: a pick already stored is returned as it is)
    and release the rest with it: each waiting row rendered with the winner, due now.
    Returns the pick."""
    with engine.begin() as conn:
        raw, _started, pick = vq.campaign_ab(conn, campaign_id)
        if raw is None:
            return None
        spec = stored_spec(raw, campaign_id)
        if spec.ab is None:
            return None
        if not pick:
            compared = compare(spec.message, vq.variant_counts(conn, campaign_id), spec.ab.pick_by)
            winner = compared.best or spec.message.variant_names()[0]
            pick = {
                "winner": winner,
                "pick_by": spec.ab.pick_by,
                "at": now.isoformat(),
                "rates": {v.name: v.as_dict() for v in compared.variants},
                "note": compared.note
                if compared.best
                else f"nothing of the test was sent: {winner}, the first variant, is sent",
            }
            if vq.record_pick(conn, campaign_id, pick):
                log.info(
                    "campaign %s: A/B winner %s by %s (%s)",
                    campaign_id,
                    winner,
                    spec.ab.pick_by,
                    pick["note"],
                )
            else:
                _raw, _started, pick = vq.campaign_ab(conn, campaign_id)
    winner = str(pick["winner"])
    _release(engine, campaign_id, spec, winner, now)
    return dict(pick)


def _release(
    engine: Engine, campaign_id: int, spec: CampaignSpec, winner: str, now: datetime
) -> None:
    """Render the waiting rest with ``winner`` and make it due, chunk by chunk."""
    message = variant_named(spec.message, winner)
    after = 0
    while True:
        with engine.begin() as conn:
            rows = vq.waiting_rest(conn, campaign_id, after=after, limit=REST_CHUNK)
            if not rows:
                return
            out: list[tuple[int, str, dict[str, Any]]] = []
            failed: list[tuple[int, str]] = []
            for r in rows:
                data = _contact(r)
                try:
                    rendered = render_message(
                        message, data, recipient_rng(campaign_id, str(r["target"]))
                    )
                except RenderError as exc:
                    failed.append((int(r["id"]), exc.reason[:1000]))
                    continue
                out.append((int(r["id"]), winner, message_to_dict(rendered)))
            vq.release_rest(conn, out, due=now)
            vq.skip_rest(conn, failed, move=SKIP_QUEUED, now=now)
            after = int(rows[-1]["id"])


def _contact(row: Mapping[str, Any]) -> ContactData:
    if row["target_kind"] == "group":
        return ContactData(attributes={"group": row["target"]})
    return ContactData(
        phone=str(row["target"]), name=row["name"] or "", attributes=row["attributes"] or {}
    )


__all__ = [
    "ALPHA",
    "MIN_SAMPLE",
    "RATES",
    "Comparison",
    "VariantRates",
    "assign",
    "best_of",
    "campaign_comparison",
    "compare",
    "in_test",
    "message_for",
    "pick_and_release",
    "pick_due",
    "rates",
    "two_proportion_z",
    "variant_for",
    "variant_named",
]
