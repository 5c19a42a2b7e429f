"""What `pip install .` ships never reaches into the tests: the tests are not installed,
so an import of ``tests`` (or a ``sys.path`` edit to find them) works in a checkout and
fails for every user. ``make lint`` checks the imports too (contract
``no-tests-in-product``); this also catches the string and ``sys.path`` forms."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def product_files() -> list[Path]:
    """The modules of the packages pyproject.toml lists: what a wheel holds (the tests
    kept beside the code, in unlisted ``tests`` subpackages, are not in it)."""
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(setuptools["packages"])
    out = []
    for name, folder in setuptools["package-dir"].items():
        base = ROOT / folder
        for f in base.rglob("*.py"):
            package = ".".join((name, *f.parent.relative_to(base).parts))
            if "__pycache__" not in f.parts and package in listed:
                out.append(f)
    return sorted(out)


def _names_tests(module: str) -> bool:
    return module == "tests" or module.startswith("tests.")


def reaches_into_tests(source: str) -> list[str]:
    """Each line of ``source`` that imports ``tests`` or edits ``sys.path``, as ``LINE: what``."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [f"{node.lineno}: import {a.name}" for a in node.names if _names_tests(a.name)]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if _names_tests(node.module):
                found.append(f"{node.lineno}: from {node.module} import")
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and _names_tests(node.value)
            and "." in node.value
        ):
            found.append(f"{node.lineno}: names the module {node.value!r}")
        elif (
            isinstance(node, ast.Attribute)
            and node.attr == "path"
            and isinstance(node.value, ast.Name)
            and node.value.id == "sys"
        ):
            found.append(f"{node.lineno}: sys.path")
    return sorted(found, key=lambda f: int(f.split(":")[0]))


def test_the_check_sees_each_way_of_reaching_into_tests() -> None:
    source = (
        "import sys, importlib\n"
        "import tests.builders\n"
        "from tests.kubeapi import ApiServer\n"
        "sys.path.insert(0, '/checkout')\n"
        "importlib.import_module('tests.builders.demo_cluster')\n"
        "from . import tests\n"  # a module of the product's own named tests
    )
    assert [f.split(":")[0] for f in reaches_into_tests(source)] == ["2", "3", "4", "5"]


def test_no_shipped_module_imports_tests_or_edits_sys_path() -> None:
    files = product_files()
    assert len(files) > 50  # the product was found
    found = [
        f"{f.relative_to(ROOT)}:{line}" for f in files for line in reaches_into_tests(f.read_text())
    ]
    assert found == []
