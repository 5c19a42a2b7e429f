"""One name, one job: no two modules or public classes of the product share a name
while doing different things, and every logger is named for its module.

A newcomer who reads ``Plan`` or ``gangs.py`` should not have to ask which one. Each
component has its own command line, config and metrics (``cli.py``, ``config.py``,
``metrics.py``): those names are allowed once per component and nowhere else twice.
These tests fail when a clash appears, and the last one shows that they can."""

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


def product_files(root: Path = ROOT, tops: Iterable[str] = PRODUCT) -> list[Path]:
    return sorted(p for top in tops for p in (root / top).rglob("*.py") if ".venv" not in p.parts)


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


def test_every_logger_is_named_for_its_module() -> None:
    assert loggers_not_named_for_their_module(product_files()) == []


def test_the_checks_see_a_clash(tmp_path: Path) -> None:
    """A product tree with each kind of clash: every check names it."""
    files = {
        "webhook/gangs.py": "class Plan: ...\nimport logging\nlog = logging.getLogger('webhook')\n",
        "descheduler/gangs.py": "class Plan: ...\nclass _Private: ...\n",
        "descheduler/cli.py": "",
        "descheduler/running/cli.py": "",
        "webhook/cli.py": "class _Private: ...\n",
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
    assert loggers_not_named_for_their_module(tree, tmp_path) == ["webhook/gangs.py:3"]
