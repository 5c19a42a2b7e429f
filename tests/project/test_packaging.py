"""What `pip install .` ships: every package of the source tree, no more, no less.

setuptools installs only the packages pyproject.toml lists; a new subpackage missing
there works in the editable install of `make test` and is absent from a wheel. The tests
kept beside the code (a package's `tests` subpackage, e.g. a strategy's) are the one
exception: they are left out on purpose, and must stay out.
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


def is_tests(package: str) -> bool:
    """A package's tests kept beside it, or a package within them."""
    return "tests" in package.split(".")


def test_every_package_is_listed_for_the_wheel() -> None:
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(setuptools["packages"])
    found = source_packages(setuptools)
    product = {p for p in found if not is_tests(p)}
    assert product - listed == set(), "packages pyproject.toml does not list (a wheel lacks them)"
    assert listed - product == set(), "packages pyproject.toml lists that are not in the tree"


def test_the_tests_beside_the_code_are_found_and_not_shipped() -> None:
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    beside = {p for p in source_packages(setuptools) if is_tests(p)}
    assert "descheduler.planning.strategies.make_room.tests" in beside
    assert beside & set(setuptools["packages"]) == set()
