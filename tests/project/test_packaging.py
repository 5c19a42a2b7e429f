"""What `pip install .` ships: every package of the source tree, no more, no less.

setuptools installs only the packages pyproject.toml lists; a new subpackage missing
there works in the editable install of `make test` and is absent from a wheel.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def source_packages(setuptools: dict) -> set[str]:
    found: set[str] = set()
    for name, folder in setuptools["package-dir"].items():
        base = ROOT / folder
        for init in base.rglob("__init__.py"):
            parts = init.parent.relative_to(base).parts
            if "__pycache__" not in parts:
                found.add(".".join((name, *parts)))
    return found


def test_every_package_is_listed_for_the_wheel() -> None:
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(setuptools["packages"])
    found = source_packages(setuptools)
    assert found - listed == set(), "packages pyproject.toml does not list (a wheel lacks them)"
    assert listed - found == set(), "packages pyproject.toml lists that are not in the tree"
