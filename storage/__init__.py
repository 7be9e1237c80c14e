"""Persistence: tables, engines, migrations and the hot SQL statements.

Imports nothing of gatecast's other packages.
"""

from storage.engine import current_revision, is_postgres, make_engine, session_scope, upgrade
from storage.types import utcnow

__all__ = ["current_revision", "is_postgres", "make_engine", "session_scope", "upgrade", "utcnow"]
