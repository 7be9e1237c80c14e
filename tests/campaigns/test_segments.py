"""Audiences: tags and time zones on import, [audience] rules, saved segments, the one
INSERT ... SELECT at start (SQLite + PostgreSQL)."""

from __future__ import annotations

import unicodedata
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, func, select

from campaigns import delivery_rows as mat
from campaigns import segments as seg
from campaigns.campaign_file import AudienceSpec, CampaignSpec, parse_campaign
from campaigns.importer import ImportFailed, ImportOptions, ImportReport, import_file
from campaigns.service import CampaignSetupError, create_campaign, preview_campaign
from storage import tables
from tests.campaigns.campaign_fixtures import NOW

CSV = """phone,name,city,plan,tags,timezone
+14155550001,Ana,Berlin,gold,"vip, Newsletter",Europe/Berlin
+14155550002,Ben,BERLÍN,silver,vip,
+14155550003,Cé,berlin,bronze,vip,America/New_York
+14155550004,Dee,Zürich,gold,vip,Europe/Zurich
+14155550005,Eve,Berlin,gold,,Europe/Berlin
+14155550006,Fay,Berlin,Gold,"vip,complained",
+14155550007,Gus,Berlin,gold,vip,Mars/Base
"""


def _import(
    engine: Engine, tmp_path: Path, text: str, list_name: str, tags: tuple[str, ...] = ()
) -> ImportReport:
    path = tmp_path / f"{list_name}.csv"
    path.write_text(text, encoding="utf-8")
    return import_file(engine, path, ImportOptions(list_name=list_name, tags=tags), now=NOW)


def _campaign(audience: dict[str, object]) -> CampaignSpec:
    return parse_campaign(
        {"name": "p", "audience": audience, "message": {"type": "text", "text": "Hi {{ name }}"}}
    )


def test_import_tags_timezone_and_a_segment_materialised(engine: Engine, tmp_path: Path) -> None:
    report = _import(engine, tmp_path, CSV, "customers", tags=("Spring ",))
    assert report.rejects[0].row_number == 8
    assert "Mars/Base" in report.rejects[0].reason
    assert report.tags == ["complained", "newsletter", "spring", "vip"]
    _import(engine, tmp_path, "phone\n+14155550002\n", "do-not-contact")
    definition = {
        "lists": ["customers"],
        "tags": ["VIP"],
        "where": {"city": "berlin", "plan": ["GOLD", "silver"]},
        "exclude_lists": ["do-not-contact"],
        "exclude_tags": ["complained"],
    }
    created = seg.create_segment(
        engine, "berlin-vip", AudienceSpec.model_validate(definition), now=NOW
    )
    # Ana (Berlin gold vip) matches; Ben excluded by list, Fay by tag; Cé is bronze,
    # Dee in Zürich, Eve has no vip tag, Gus was rejected
    assert created.count is not None
    assert created.count.summary() == "1 recipient; 0 opted out; 2 excluded"
    campaign = create_campaign(engine, _campaign({"segment": "berlin-vip"}), now=NOW)
    assert campaign.recipients == 1
    with engine.begin() as conn:
        result = mat.materialise(conn, campaign.id, now=NOW, instances=["A"])
    assert result.queued == 1
    with engine.connect() as conn:
        targets = conn.execute(
            select(tables.deliveries.c.target).where(tables.deliveries.c.campaign_id == campaign.id)
        ).scalars()
        assert list(targets) == ["+14155550001"]
        tz = conn.execute(
            select(tables.contacts.c.attributes).where(tables.contacts.c.phone == "+14155550003")
        ).scalar_one()
        assert tz["timezone"] == "America/New_York"
        tagged = conn.execute(select(func.count()).select_from(tables.contact_tags)).scalar_one()
        assert tagged == 6 + 5 + 1 + 1  # spring x6, vip x5, newsletter, complained
    # materialising again adds nothing; the audience is not evaluated twice
    with engine.begin() as conn:
        assert mat.materialise(conn, campaign.id, now=NOW, instances=["A"]).queued == 0


def test_accents_and_case_union_of_lists(engine: Engine, tmp_path: Path) -> None:
    _import(engine, tmp_path, CSV, "customers")
    _import(engine, tmp_path, "phone,city\n+14155550009,berlin\n", "other")
    spec = _campaign({"lists": ["customers", "other"], "where": {"city": "BERLÍN"}})
    created = create_campaign(engine, spec, now=NOW)
    assert created.recipients == 6  # five of customers (Gus rejected) + the other list's one
    assert created.audience is not None and created.audience.excluded == 0
    previewed = preview_campaign(engine, spec)
    assert previewed.audience == created.audience and previewed.recipients_checked == 6


@pytest.mark.parametrize(
    ("audience", "field", "words"),
    [
        ({"lists": ["customers"], "where": {"citty": "x"}}, "audience.where.citty", "city"),
        ({"lists": ["nope"]}, "audience.lists", "'nope'"),
        ({"tags": ["gold-star"]}, "audience.tags", "'gold-star'"),
        ({"segment": "missing"}, "audience.segment", "no saved segment"),
        ({"lists": ["customers"], "where": {"city": "Paris"}}, "audience", "selects no contact"),
    ],
)
def test_bad_audience_refused_and_nothing_stored(
    engine: Engine, tmp_path: Path, audience: dict[str, object], field: str, words: str
) -> None:
    _import(engine, tmp_path, CSV, "customers")
    with pytest.raises(CampaignSetupError) as caught:
        create_campaign(engine, _campaign(audience), now=NOW)
    assert caught.value.field == field
    assert words in str(caught.value)
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(tables.campaigns)).scalar_one() == 0


def test_segment_rules(engine: Engine, tmp_path: Path) -> None:
    _import(engine, tmp_path, CSV, "customers")
    with pytest.raises(seg.AudienceError, match="unknown field"):
        seg.parse_segment({"lists": ["customers"], "wher": {}})
    with pytest.raises(seg.AudienceError, match="empty audience"):
        seg.parse_segment({"exclude_tags": ["vip"]})
    spec = seg.parse_segment({"lists": ["customers"]})
    seg.create_segment(engine, "all", spec, now=NOW)
    with pytest.raises(seg.SegmentExists):
        seg.create_segment(engine, "all", spec, now=NOW)
    page = seg.segments_page(engine, limit=10)
    assert page.total == 1 and page.items[0].name == "all"
    shown = seg.get_segment(engine, "all")
    assert shown is not None and shown.count is not None and shown.count.recipients == 6
    # a change: its name and id stay, counted as saved; a bad one changes nothing
    gold = seg.parse_segment({"lists": ["customers"], "where": {"plan": "GOLD"}})
    changed = seg.change_segment(engine, "all", gold)
    assert changed is not None and changed.count is not None
    assert (changed.id, changed.name, changed.count.recipients) == (shown.id, "all", 4)
    with pytest.raises(seg.AudienceError, match="citty"):
        seg.change_segment(engine, "all", seg.parse_segment({"where": {"citty": "x"}}))
    kept = seg.get_segment(engine, "all")
    assert kept is not None and kept.definition == changed.definition
    assert seg.change_segment(engine, "nope", gold) is None
    assert seg.delete_segment(engine, "all") and not seg.delete_segment(engine, "all")


def test_bad_tag_option_refused(engine: Engine, tmp_path: Path) -> None:
    with pytest.raises(ImportFailed, match="--tag"):
        _import(engine, tmp_path, CSV, "customers", tags=("a,b",))


def test_unicode_attribute_names_and_quotes_in_values(engine: Engine, tmp_path: Path) -> None:
    _import(engine, tmp_path, "phone,Straße\n+14155550001,O'Brien Straße\n+14155550002,x\n", "l")
    with pytest.raises(CampaignSetupError, match="selects no contact"):
        create_campaign(engine, _campaign({"where": {"strasse": "o'brien"}}), now=NOW)
    # names compare as the import keys them (Straße -> strasse), values folded (ß -> ss)
    created = create_campaign(engine, _campaign({"where": {"Straße": "O'BRIEN STRASSE"}}), now=NOW)
    assert created.recipients == 1


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(max_codepoint=0x2FF)))
def test_fold_value_ascii_shortcut_folds_as_the_general_rule(text: str) -> None:
    """ASCII text skips the decomposition: it must fold exactly as the general rule does
    (and non-ASCII text, Latin accents among it, still goes through it)."""
    decomposed = unicodedata.normalize("NFKD", text)
    general = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    assert seg.fold_value(text) == general.casefold().strip()
