"""The Alembic revision this version of gatecast needs (``storage/migrations/versions``).

Its own module, free of SQLAlchemy, so ``gatecast --version`` prints it without loading
the tables; :mod:`storage.models` re-exports it.
"""

from __future__ import annotations

#: the Alembic revision the models describe (a new migration moves it)
HEAD_REVISION = "0034"
