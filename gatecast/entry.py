"""The ``gatecast`` console script: answers ``gatecast --version`` before building the CLI.

Building the Typer app (:mod:`gatecast.cli`) imports Typer, Rich and every command
module; the version needs none of them, so it is printed here (the CLI's own
``--version`` option, e.g. ``gatecast --version --help``, prints the same line through
:func:`version_text`; docs/architecture.md, decision 38).
"""

from __future__ import annotations

import sys


def version_text() -> str:
    """``gatecast --version``: the installed version and the database schema it needs."""
    from importlib.metadata import version

    from storage.revision import HEAD_REVISION

    return f"gatecast {version('gatecast')} (database schema {HEAD_REVISION})"


def main() -> None:
    """Console-script entry point: the version at once, anything else to :mod:`gatecast.cli`."""
    if sys.argv[1:] == ["--version"]:
        print(version_text())
        return
    from gatecast.cli import main as run_cli

    run_cli()
