"""One typed handle per table (``sqlalchemy.Table``), for Core statements.

SQLModel declares the tables in :mod:`storage.models`, but its ``Model.__table__`` is not
typed; these come from the shared metadata, where every table is a typed ``Table``.
"""

from __future__ import annotations

from typing import Final

from sqlalchemy import Table
from sqlmodel import SQLModel

import storage.models  # noqa: F401  (declares the tables in SQLModel's metadata)

_tables = SQLModel.metadata.tables

instances: Final[Table] = _tables["instances"]
contacts: Final[Table] = _tables["contacts"]
contact_search_pending: Final[Table] = _tables["contact_search_pending"]
contact_search_pending_ranges: Final[Table] = _tables["contact_search_pending_ranges"]
lists: Final[Table] = _tables["lists"]
list_members: Final[Table] = _tables["list_members"]
imports: Final[Table] = _tables["imports"]
import_rejects: Final[Table] = _tables["import_rejects"]
campaigns: Final[Table] = _tables["campaigns"]
deliveries: Final[Table] = _tables["deliveries"]
status_events: Final[Table] = _tables["status_events"]
inbound_messages: Final[Table] = _tables["inbound_messages"]
test_sends: Final[Table] = _tables["test_sends"]
leases: Final[Table] = _tables["leases"]
dispatch_workers: Final[Table] = _tables["dispatch_workers"]
sender_leases: Final[Table] = _tables["sender_leases"]
sender_chats: Final[Table] = _tables["sender_chats"]
sender_health_changes: Final[Table] = _tables["sender_health_changes"]
idempotency_keys: Final[Table] = _tables["idempotency_keys"]
dashboard_sessions: Final[Table] = _tables["dashboard_sessions"]
tags: Final[Table] = _tables["tags"]
contact_tags: Final[Table] = _tables["contact_tags"]
segments: Final[Table] = _tables["segments"]
audience_members: Final[Table] = _tables["audience_members"]
campaign_state_counts: Final[Table] = _tables["campaign_state_counts"]
counters: Final[Table] = _tables["counters"]
webhook_endpoints: Final[Table] = _tables["webhook_endpoints"]
webhook_subscriptions: Final[Table] = _tables["webhook_subscriptions"]
webhook_messages: Final[Table] = _tables["webhook_messages"]
webhook_attempts: Final[Table] = _tables["webhook_attempts"]
users: Final[Table] = _tables["users"]
api_keys: Final[Table] = _tables["api_keys"]
audit_log: Final[Table] = _tables["audit_log"]
