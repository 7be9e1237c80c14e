"""Regenerate ``versions/0001_initial.py`` from the models (only before the first release).

Usage: ``python -m storage.migrations.regenerate_initial``. Once a release ships,
add new revisions with ``alembic revision --autogenerate`` instead.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from alembic import command
from alembic.config import Config

from storage.engine import MIGRATIONS_DIR, make_engine


def main() -> None:
    target = MIGRATIONS_DIR / "versions" / "0001_initial.py"
    target.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        engine = make_engine(f"sqlite:///{Path(tmp) / 'empty.db'}")
        cfg = Config()
        cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
        with engine.begin() as conn:
            cfg.attributes["connection"] = conn
            command.revision(cfg, message="initial schema", autogenerate=True, rev_id="0001")
    produced = next((MIGRATIONS_DIR / "versions").glob("0001_*.py"))
    produced.rename(target)
    print(f"wrote {target}")


if __name__ == "__main__":
    main()
