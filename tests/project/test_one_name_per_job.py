"""One name, one job: no two modules, public classes or public top-level functions of
the product share a name while doing different things, and every logger is named for
its module.

A newcomer who reads ``Plan``, ``gangs.py`` or ``make_room`` should not have to ask which
one. Each component has its own command line, config and metrics (``cli.py``,
``config.py``, ``metrics.py``, and their entry points ``main``, ``build_parser``,
``load_config``, ``parse_config``, ``cmd_demo``): those names are allowed once per
component and nowhere else twice. These tests fail when a clash appears, and the last
one shows that they can."""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# What pip installs: the packages of pyproject.toml's [tool.setuptools].
PRODUCT = ("shared/gangplace", "webhook", "descheduler", "kubectl_corral")
# One per component, each the component's own.
PER_COMPONENT = frozenset({"__init__.py", "cli.py", "config.py", "metrics.py"})
# The entry points of those modules, one per component likewise.
PER_COMPONENT_FUNCTIONS = frozenset(
    {"main", "build_parser", "load_config", "parse_config", "cmd_demo"}
)


def product_files(root: Path = ROOT, tops: Iterable[str] = PRODUCT) -> list[Path]:
    """The product's modules; not the tests kept beside the code (a ``tests`` folder, as a
    strategy's), which pip does not install."""
    return sorted(
        p
        for top in tops
        for p in (root / top).rglob("*.py")
        if ".venv" not in p.parts and "tests" not in p.relative_to(root / top).parts
    )


def module_name_clashes(files: Iterable[Path], root: Path = ROOT) -> list[str]:
    """``name: path, path`` for each file name held by two modules, beyond the names a
    component may have once (:data:`PER_COMPONENT`)."""
    by_name: dict[str, list[Path]] = defaultdict(list)
    for f in files:
        by_name[f.name].append(f)
    clashes = []
    for name, paths in sorted(by_name.items()):
        if name == "__init__.py":
            continue
        if name in PER_COMPONENT:
            tops = [p.relative_to(root).parts[0] for p in paths]
            if len(tops) == len(set(tops)):
                continue
        if len(paths) > 1:
            clashes.append(f"{name}: " + ", ".join(str(p.relative_to(root)) for p in paths))
    return clashes


def class_name_clashes(files: Iterable[Path], root: Path = ROOT) -> list[str]:
    """``Name: path, path`` for each public class name defined in two modules."""
    where: dict[str, list[str]] = defaultdict(list)
    for f in files:
        for node in ast.parse(f.read_text(), str(f)).body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                where[node.name].append(str(f.relative_to(root)))
    return [f"{n}: " + ", ".join(ps) for n, ps in sorted(where.items()) if len(ps) > 1]


def function_name_clashes(files: Iterable[Path], root: Path = ROOT) -> list[str]:
    """``name: path, path`` for each public top-level function name defined in two
    modules, beyond the entry points a component may have once
    (:data:`PER_COMPONENT_FUNCTIONS`). A module counts once per name: an ``@overload``
    and its implementation are one function."""
    where: dict[str, list[Path]] = defaultdict(list)
    for f in files:
        names = {
            node.name
            for node in ast.parse(f.read_text(), str(f)).body
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and not node.name.startswith("_")
        }
        for name in names:
            where[name].append(f)
    clashes = []
    for name, paths in sorted(where.items()):
        if len(paths) < 2:
            continue
        if name in PER_COMPONENT_FUNCTIONS:
            tops = [p.relative_to(root).parts[0] for p in paths]
            if len(tops) == len(set(tops)):
                continue
        clashes.append(f"{name}: " + ", ".join(sorted(str(p.relative_to(root)) for p in paths)))
    return clashes


def loggers_not_named_for_their_module(files: Iterable[Path], root: Path = ROOT) -> list[str]:
    """``path:line`` of each ``logging.getLogger(...)`` given a name other than
    ``__name__`` (the root logger, called with nothing, is the log setup's own)."""
    found = []
    for f in files:
        for node in ast.walk(ast.parse(f.read_text(), str(f))):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "getLogger"
                and node.args
            ):
                continue
            arg = node.args[0]
            if not (isinstance(arg, ast.Name) and arg.id == "__name__"):
                found.append(f"{f.relative_to(root)}:{node.lineno}")
    return found


def test_no_two_modules_share_a_name() -> None:
    assert module_name_clashes(product_files()) == []


def test_no_two_public_classes_share_a_name() -> None:
    assert class_name_clashes(product_files()) == []


def test_no_two_public_functions_share_a_name() -> None:
    assert function_name_clashes(product_files()) == []


def test_every_logger_is_named_for_its_module() -> None:
    assert loggers_not_named_for_their_module(product_files()) == []


def test_the_checks_see_a_clash(tmp_path: Path) -> None:
    """A product tree with each kind of clash: every check names it."""
    overloaded = (
        "from typing import overload\n"
        "@overload\ndef merge(a: int) -> int: ...\n"
        "@overload\ndef merge(a: str) -> str: ...\n"
        "def merge(a): return a\n"
    )
    files = {
        "webhook/gangs.py": "class Plan: ...\nimport logging\nlog = logging.getLogger('webhook')\n"
        "def shortlist(): ...\ndef _helper(): ...\n",
        "descheduler/gangs.py": "class Plan: ...\nclass _Private: ...\n" + overloaded,
        "descheduler/cli.py": "def main(): ...\ndef build_parser(): ...\n",
        "descheduler/running/cli.py": "def main(): ...\n",
        "webhook/cli.py": "class _Private: ...\ndef main(): ...\ndef build_parser(): ...\n",
        "webhook/room.py": "async def shortlist(): ...\ndef _helper(): ...\n"
        "class Holder:\n    def merge(self): ...\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    tree = product_files(tmp_path, ("webhook", "descheduler"))

    assert module_name_clashes(tree, tmp_path) == [
        "cli.py: descheduler/cli.py, descheduler/running/cli.py, webhook/cli.py",
        "gangs.py: descheduler/gangs.py, webhook/gangs.py",
    ]
    assert class_name_clashes(tree, tmp_path) == ["Plan: descheduler/gangs.py, webhook/gangs.py"]
    # Two public functions of one name; an entry point twice in one component; not the
    # overloads of one function, private helpers, methods, or one entry point per component.
    assert function_name_clashes(tree, tmp_path) == [
        "main: descheduler/cli.py, descheduler/running/cli.py, webhook/cli.py",
        "shortlist: webhook/gangs.py, webhook/room.py",
    ]
    assert loggers_not_named_for_their_module(tree, tmp_path) == ["webhook/gangs.py:3"]
