"""Erasure (the right to be forgotten): one contact's number and personal data removed
from every table, in ONE transaction.

What an erase does (docs/contacts-import.md, "Erasing a contact"):

- the contact row goes, with its list memberships, tags and campaign audience rows;
- its delivery rows stay, so every campaign's counts stay true, but anonymised: the
  target becomes ``erased:<row id>``, the rendered message (its variables), the reply
  text, the error text and the link to the contact are removed; a row not yet sent
  (``queued``) is stopped as ``skipped`` with the error ``erased``;
- status events of those rows, and any whose chat is the number, lose their chat;
- inbound messages (replies, STOPs) from the number are kept as counted events with their
  chat replaced by ``erased:<id>`` and sender, contact and text removed;
- test sends to the number, or rendered for the contact, are deleted (they count nowhere);
- rejected import rows holding the number in any usual format (its digits with or
  without country code, spaces, dashes, brackets, a leading 0: :func:`holds_number`) are
  deleted, and so are stored API answers (idempotency records) holding it;
- audit log entries whose detail (e.g. a CLI command's arguments) or target holds the
  number keep who, when and what, but their detail becomes ``{"erased": true}`` and such
  a target ``erased:<id>``;
- on SQLite the deleted and rewritten bytes are overwritten with zeros
  (``secure_delete``) and the write-ahead log is checkpointed, so the number does not
  stay readable in the file's free space; the deliveries' target search index is merged,
  so the old target's entries leave it too (not only marked deleted).

No suppression list is kept (decision 20 in docs/architecture.md): even a hash of a
phone number is personal data that can be reversed by trying every number, so keeping
one would undo the erase. A later import of the same number creates a new contact; to
keep someone from being messaged, opt them out instead (that keeps the number, which is
what makes the opt-out work).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

import phonenumbers
from sqlalchemy import Engine

from campaigns import audit
from campaigns.delivery_lifecycle import ERASED
from storage.queries import erasure as q

#: the target (and inbound chat) an erased row gets, followed by the row's id
ERASED_PREFIX = "erased:"
#: the error of a row stopped because its recipient was erased
ERASED_ERROR = "erased"
#: the rule the delivery rows are rewritten by
ANONYMISE = q.Anonymise(
    target_prefix=ERASED_PREFIX,
    stop_states=ERASED.from_states,
    stopped_state=ERASED.to,
    stopped_error=ERASED_ERROR,
)
_NON_DIGITS = re.compile(r"\D+")


class NoSuchContact(LookupError):
    """There is no contact with that number (nothing was changed)."""


@dataclass(frozen=True)
class Erased:
    """What an erase removed or anonymised (counts only: never the number)."""

    contact_id: int
    deliveries_anonymised: int
    status_events_scrubbed: int
    inbound_messages_scrubbed: int
    memberships_removed: int
    import_rejects_removed: int
    idempotency_records_removed: int
    #: outbound webhook messages about the contact (waiting or already delivered)
    outbound_messages_removed: int
    #: audit log entries whose detail or target held the number
    audit_entries_scrubbed: int = 0
    #: test sends to the number or rendered for the contact
    test_sends_removed: int = 0
    #: the senders' memory of a chat with the number (sender care's known chats)
    sender_chats_removed: int = 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form."""
        return asdict(self)


def digit_forms(phone_e164: str) -> tuple[str, str]:
    """The number's digits as written internationally (``447911123456``) and nationally
    without a trunk prefix (``7911123456``): a cell holding either run of digits, whatever
    its separators, holds the number."""
    international = phone_e164.lstrip("+")
    try:
        parsed = phonenumbers.parse(phone_e164, None)
        national = phonenumbers.national_significant_number(parsed)
    except phonenumbers.NumberParseException:
        national = international
    return international, national


#: a run of digits as people write a phone number: separators, brackets, a leading +
_PHONE_LIKE = re.compile(r"\+?[0-9][0-9 ().\-/]{4,}[0-9]")


def holds_number(text: Any, forms: tuple[str, str]) -> bool:
    """Whether ``text`` (a cell, a JSON answer, a dict of cells) holds the number in a
    usual format: a run of digits (spaces, dashes, dots, brackets between them) whose
    digits contain the national digits ``forms[1]``."""
    if text is None:
        return False
    if isinstance(text, dict):
        return any(holds_number(v, forms) for v in text.values())
    national = forms[1]
    return any(national in _NON_DIGITS.sub("", run) for run in _PHONE_LIKE.findall(str(text)))


def _holding(pages: Any, forms: tuple[str, str]) -> list[int]:
    """The ids of the paged rows any of whose values holds the number."""
    return [
        row_id
        for page in pages
        for row_id, values in page
        if any(holds_number(v, forms) for v in values)
    ]


def erase_contact(
    engine: Engine, *, phone_e164: str | None = None, contact_id: int | None = None
) -> Erased:
    """Erase the contact with ``phone_e164`` (or id ``contact_id``) everywhere (module
    notes), in one transaction; :class:`NoSuchContact` when there is none."""
    with engine.begin() as conn:
        found = q.lock_contact(conn, phone_e164=phone_e164, contact_id=contact_id)
        if found is None:
            raise NoSuchContact("no such contact")
        contact_id, phone_e164 = found
        forms = digit_forms(phone_e164)
        secure_before = q.secure_delete(conn)
        deliveries, message_ids = q.anonymise_deliveries(conn, contact_id, phone_e164, ANONYMISE)
        q.purge_rewritten_targets(conn)
        events = q.scrub_status_events(conn, phone_e164, message_ids)
        chats = [f"{forms[0]}@", f"{forms[0]}:"]
        inbound = q.scrub_inbound(conn, contact_id, phone_e164, chats, ERASED_PREFIX)
        memberships = q.delete_memberships(conn, contact_id)
        tests = q.delete_test_sends(conn, contact_id, phone_e164)
        sender_chats = q.delete_sender_chats(conn, phone_e164, chats)
        rejects = q.delete_rejects(conn, _holding(q.reject_pages(conn), forms))
        keys = q.delete_stored_answers(conn, _holding(q.stored_answer_pages(conn), forms))
        # last: the statements above may have queued outbound messages about the contact
        outbox = q.delete_outbox_messages(
            conn, f"contact:{contact_id}", _holding(q.outbox_pages(conn), forms)
        )
        scrubbed = audit.scrub_number(
            conn, lambda value: holds_number(value, forms), f"{ERASED_PREFIX}{contact_id}"
        )
        q.delete_contact(conn, contact_id)
        q.secure_delete(conn, secure_before)
    with engine.connect() as conn:
        q.checkpoint(conn)
    return Erased(
        contact_id=contact_id,
        deliveries_anonymised=deliveries,
        status_events_scrubbed=events,
        inbound_messages_scrubbed=inbound,
        memberships_removed=memberships,
        import_rejects_removed=rejects,
        idempotency_records_removed=keys,
        outbound_messages_removed=outbox,
        audit_entries_scrubbed=scrubbed,
        test_sends_removed=tests,
        sender_chats_removed=sender_chats,
    )


__all__ = [
    "ANONYMISE",
    "ERASED_ERROR",
    "ERASED_PREFIX",
    "Erased",
    "NoSuchContact",
    "digit_forms",
    "erase_contact",
    "holds_number",
]
