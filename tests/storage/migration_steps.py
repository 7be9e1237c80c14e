"""Migration tests' step down: Alembic's downgrade on an engine (``storage.engine.upgrade``
is the step up)."""

from __future__ import annotations

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine

from storage.engine import MIGRATIONS_DIR


def downgrade(engine: Engine, revision: str) -> None:
    """Bring the schema down to ``revision`` with Alembic."""
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, revision)
