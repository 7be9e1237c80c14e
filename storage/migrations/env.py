"""Alembic environment: runs on the connection handed in by ``storage.engine.upgrade``."""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine
from sqlmodel import SQLModel

import storage.models  # noqa: F401  (registers the tables)

target_metadata = SQLModel.metadata
config = context.config


def _run(connection: object) -> None:
    context.configure(
        connection=connection,  # type: ignore[arg-type]
        target_metadata=target_metadata,
        render_as_batch=True,
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


connection = config.attributes.get("connection")
if connection is not None:
    _run(connection)
else:
    url = config.get_main_option("sqlalchemy.url") or "sqlite:///gatecast.db"
    with create_engine(url).begin() as conn:
        _run(conn)
