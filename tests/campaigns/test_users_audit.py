"""Users, keys and the audit log on real SQLite files and a real PostgreSQL database:
passwords hashed with argon2, keys stored as digests with a role capped by the user's,
expiry, revocation; audit entries filtered, paged, exported (formulas neutralised,
secrets never stored) and scrubbed by an erasure."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy import Engine

from campaigns import audit, users
from campaigns.erasure import erase_contact
from campaigns.importer import ImportOptions, import_file
from storage import tables

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
FAST = users.Hashing(64, 1)


def test_passwords_are_argon2_hashes_and_checked(engine: Engine) -> None:
    users.create_user(engine, "ana", "operator", "a long password", FAST, NOW)
    with engine.connect() as conn:
        stored = conn.execute(sa.select(tables.users.c.password_hash)).scalar_one()
    assert stored.startswith("$argon2id$") and "a long password" not in stored
    assert users.authenticate(engine, "ana", "a long password", FAST) == users.Holder(
        1, "ana", "operator"
    )
    assert users.authenticate(engine, "ana", "a wrong password", FAST) is None
    assert users.authenticate(engine, "nobody", "a long password", FAST) is None
    users.set_disabled(engine, "ana")
    assert users.authenticate(engine, "ana", "a long password", FAST) is None


@pytest.mark.parametrize(
    ("name", "role", "password", "field"),
    [
        ("", "viewer", "long enough!", "name"),
        ("bad name", "viewer", "long enough!", "name"),
        ("ana", "chief", "long enough!", "role"),
        ("ana", "viewer", "short", "password"),
    ],
)
def test_bad_users_are_refused_naming_the_field(
    sqlite_engine: Engine, name: str, role: str, password: str, field: str
) -> None:
    with pytest.raises(users.UserError) as caught:
        users.create_user(sqlite_engine, name, role, password, FAST, NOW)
    assert caught.value.field == field
    assert users.users_page(sqlite_engine).total == 0


def test_keys_digests_roles_expiry_and_revocation(engine: Engine) -> None:
    users.create_user(engine, "olga", "operator", "a long password", FAST, NOW)
    with pytest.raises(users.UserError, match="may not be admin"):
        users.create_key(engine, "olga", NOW, role="admin")
    with pytest.raises(users.UserError, match="not in the future"):
        users.create_key(engine, "olga", NOW, expires_at=NOW)
    made = users.create_key(engine, "olga", NOW, expires_at=NOW + timedelta(hours=1))
    viewer_key = users.create_key(engine, "olga", NOW, role="viewer")
    with engine.connect() as conn:
        digests = conn.execute(sa.select(tables.api_keys.c.digest)).scalars().all()
    assert made.secret not in digests and users.key_digest(made.secret) in digests
    holder = users.key_holder(engine, made.secret, NOW)
    assert holder is not None and (holder.name, holder.role) == ("olga", "operator")
    assert users.key_holder(engine, made.secret, NOW + timedelta(hours=1)) is None  # expired
    assert users.key_holder(engine, made.secret + "x", NOW) is None
    # demoting the user demotes the keys; a key never acts above its user
    users.set_role(engine, "olga", "viewer")
    holder = users.key_holder(engine, made.secret, NOW)
    assert holder is not None and holder.role == "viewer"
    assert users.revoke_key(engine, viewer_key.key.id, NOW)
    assert users.key_holder(engine, viewer_key.secret, NOW) is None
    states = {k.id: k.state(NOW) for k in users.keys_page(engine, "olga").items}
    assert states == {made.key.id: "active", viewer_key.key.id: "revoked"}
    assert not users.revoke_key(engine, 999, NOW)


def test_audit_entries_filtered_paged_and_exported(engine: Engine) -> None:
    for n, (actor, outcome) in enumerate(
        [("olga", "ok"), ("vic", "refused"), ("olga", "failed"), ("=cmd()", "ok")]
    ):
        audit.record(
            engine,
            at=NOW + timedelta(minutes=n),
            actor=actor,
            role="operator",
            action=f"POST /api/v1/campaigns/{{campaign_id}}/pause #{n}",
            outcome=outcome,
            source="10.0.0.7",
            target_type="campaign",
            target_id=n,
            detail={"path": f"/x/{n}", "password": "hunter2", "api_key": "gck_x"},
        )
    page = audit.entries(engine, audit.AuditFilter(actor="olga"), limit=1)
    assert page.total == 2 and [e.action[-2:] for e in page.items] == ["#2"]  # newest first
    assert audit.entries(engine, audit.AuditFilter(outcome="refused")).items[0].actor == "vic"
    since = audit.entries(engine, audit.AuditFilter(since=NOW + timedelta(minutes=2)))
    assert since.total == 2
    entry = audit.entries(engine, limit=1, offset=3).items[0]
    assert entry.detail == {"path": "/x/0"}  # secrets never stored
    rows = list(csv.DictReader(io.StringIO("".join(audit.export_lines(engine)))))
    assert [r["actor"] for r in rows] == ["olga", "vic", "olga", "'=cmd()"]
    assert "hunter2" not in "".join(audit.export_lines(engine))
    with pytest.raises(ValueError, match="outcome"):
        audit.record(engine, at=NOW, actor="x", role="", action="y", outcome="maybe")


def test_erasure_scrubs_the_number_from_audit_entries(engine: Engine, tmp_path: Path) -> None:
    people = tmp_path / "people.csv"
    people.write_text("name,phone\nZed,+447911123456\nAda,+447911123457\n", encoding="utf-8")
    import_file(engine, people, ImportOptions(list_name="customers", region="GB"))
    common: dict[str, Any] = {"at": NOW, "actor": "cli:me", "role": "cli", "outcome": "ok"}
    audit.record(
        engine, **common, action="contacts optout", target_type="contact", target_id="+447911123456"
    )
    audit.record(
        engine, **common, action="contacts tag", detail={"args": ["07911 123456", "--tag", "x"]}
    )
    audit.record(
        engine, **common, action="contacts tag", detail={"args": ["+447911123457", "--tag", "y"]}
    )
    erased = erase_contact(engine, phone_e164="+447911123456")
    assert erased.audit_entries_scrubbed == 2
    kept = audit.entries(engine, limit=10).items
    by_action = [(e.action, e.target_id, e.detail) for e in reversed(kept)]
    assert by_action == [
        ("contacts optout", f"erased:{erased.contact_id}", {"erased": True}),
        ("contacts tag", None, {"erased": True}),
        ("contacts tag", None, {"args": ["+447911123457", "--tag", "y"]}),
    ]
