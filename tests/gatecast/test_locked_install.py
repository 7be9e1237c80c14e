"""The install is reproducible: `make install` puts exactly requirements.lock's versions in place.

These read the environment the suite runs in, which `make install` (and so CI) built from the
lock; a package upgraded by hand, or a dependency added to pyproject.toml without `make lock`,
fails here with its name.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from storage.models import HEAD_REVISION

ROOT = Path(__file__).resolve().parents[2]


def _locked() -> list[Requirement]:
    lines = (ROOT / "requirements.lock").read_text(encoding="utf-8").splitlines()
    return [
        Requirement(line) for line in lines if line.strip() and not line.lstrip().startswith("#")
    ]


def test_every_locked_package_is_installed_at_its_locked_version() -> None:
    wrong = []
    for req in _locked():
        if req.marker is not None and not req.marker.evaluate():
            continue
        (pinned,) = [spec.version for spec in req.specifier if spec.operator == "=="]
        try:
            installed = version(req.name)
        except PackageNotFoundError:
            installed = "not installed"
        if installed != pinned:
            wrong.append(f"{req.name}: locked {pinned}, {installed}")
    assert not wrong, (
        "run `make install` (or `make lock` after changing pyproject.toml): " + "; ".join(wrong)
    )


def test_every_dependency_of_pyproject_is_in_the_lock() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    wanted = [*project["dependencies"], *project["optional-dependencies"]["dev"]]
    locked = {canonicalize_name(req.name) for req in _locked()}
    missing = [
        name
        for name in (canonicalize_name(Requirement(w).name) for w in wanted)
        if name not in locked
    ]
    assert not missing, f"not in requirements.lock (run `make lock`): {missing}"


def test_version_names_the_installed_release_and_its_schema() -> None:
    gatecast = Path(sys.executable).with_name("gatecast")
    out = subprocess.run(
        [str(gatecast), "--version"], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == f"gatecast {version('gatecast')} (database schema {HEAD_REVISION})"
