"""The Core tables (:mod:`storage.tables`, generated) are the models' tables, exactly.

If this fails, :mod:`storage.models` changed without :mod:`storage.tables`: run
``python -m storage.tables_source && ruff format storage/tables.py``.
"""

from __future__ import annotations

import pytest
from sqlalchemy import Column, Table
from sqlalchemy.dialects.postgresql.psycopg import PGDialect_psycopg
from sqlalchemy.dialects.sqlite.pysqlite import SQLiteDialect_pysqlite
from sqlalchemy.engine import Dialect
from sqlalchemy.schema import CreateTable
from sqlmodel import SQLModel

import storage.models  # noqa: F401  (declares the tables in SQLModel's metadata)
from storage import tables
from storage.tables_source import TARGET, render

DIALECTS: dict[str, Dialect] = {
    "sqlite": SQLiteDialect_pysqlite(),
    "postgresql": PGDialect_psycopg(),  # type: ignore[no-untyped-call]
}


def _ddl(table: Table, dialect: Dialect) -> list[str]:
    """The table's DDL: its CREATE TABLE's columns in order, then its constraints in a
    fixed order (the order constraints were declared in does not matter)."""
    create = str(CreateTable(table).compile(dialect=dialect)).strip()
    items = create.removesuffix("\n)").split(", \n")
    columns = len(table.columns)
    return items[:columns] + sorted(items[columns:])


def _python_side(column: Column[object]) -> tuple[object, ...]:
    """What a Core insert or a result uses beside the DDL: defaults, the type's class."""
    default = column.default
    return (
        type(column.type).__name__.removeprefix("Auto"),  # SQLModel's AutoString: a String
        None if default is None else getattr(default, "arg", default),
        column.autoincrement,
        column.primary_key,
    )


def test_the_core_metadata_has_every_model_table() -> None:
    assert sorted(tables.metadata.tables) == sorted(SQLModel.metadata.tables)


@pytest.mark.parametrize("dialect", sorted(DIALECTS))
@pytest.mark.parametrize("name", sorted(SQLModel.metadata.tables))
def test_each_table_s_ddl_is_the_model_s(name: str, dialect: str) -> None:
    model = SQLModel.metadata.tables[name]
    core = tables.metadata.tables[name]
    assert _ddl(core, DIALECTS[dialect]) == _ddl(model, DIALECTS[dialect])
    assert [(c.name, _python_side(c)) for c in core.columns] == [
        (c.name, _python_side(c)) for c in model.columns
    ]


def test_the_core_tables_declare_no_index() -> None:
    """Indexes are the models' and the migrations' (a partial one would load PostgreSQL's
    dialect on SQLite)."""
    assert [t.name for t in tables.metadata.tables.values() if t.indexes] == []


def test_every_handle_is_its_table() -> None:
    for name, table in tables.metadata.tables.items():
        assert getattr(tables, name) is table


def test_the_generated_module_is_what_the_generator_writes_today() -> None:
    """Rendered again from the models, the source differs from the file only by
    ``ruff format``'s layout (the tokens are the same)."""

    def tokens(source: str) -> list[str]:
        return "".join(source.split()).replace(",)", ")").replace("'", '"').split(",")

    assert tokens(render(SQLModel.metadata)) == tokens(TARGET.read_text(encoding="utf-8"))
