"""The Dockerfile cannot be built here; these checks keep it consistent with pyproject,
constraints.txt and the manifests."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from tests.builders.manifests import MANIFESTS, pod_templates, render

ROOT = Path(__file__).resolve().parents[2]


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuations joined and comments dropped."""
    out: list[tuple[str, str]] = []
    buf = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not buf and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        full = buf + line
        buf = ""
        op, _, args = full.partition(" ")
        out.append((op.upper(), args.strip()))
    return out


DOCKERFILE = instructions((ROOT / "Dockerfile").read_text())
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def stages() -> list[list[tuple[str, str]]]:
    out: list[list[tuple[str, str]]] = []
    for op, args in DOCKERFILE:
        if op == "FROM":
            out.append([])
        out[-1].append((op, args))
    return out


def test_base_images_are_pinned_pythons_that_pyproject_accepts() -> None:
    need = re.fullmatch(r">=(\d+)\.(\d+)", PYPROJECT["project"]["requires-python"])
    assert need
    for st in stages():
        image = st[0][1].split()[0]
        m = re.fullmatch(r"python:(\d+)\.(\d+)-slim-\w+", image)
        assert m, f"{image}: a python slim image with a pinned minor version and Debian release"
        assert (int(m[1]), int(m[2])) >= (int(need[1]), int(need[2]))


def test_installs_the_project_with_pinned_runtime_dependencies_only() -> None:
    runs = [a for op, a in DOCKERFILE if op == "RUN" and "pip install" in a]
    assert len(runs) == 1
    cmd = runs[0]
    assert "-c constraints.txt" in cmd
    assert re.search(r"\s\.(\s|$)", cmd), "installs the project itself, without extras"
    assert "[dev]" not in cmd and "-e " not in cmd
    for dep in PYPROJECT["project"]["optional-dependencies"]["dev"]:
        name = re.split(r"[<>=\[ ]", dep)[0]
        assert name not in cmd


def test_copies_every_package_and_what_the_build_reads() -> None:
    copied = {
        a.split()[0].rstrip("/") for op, a in DOCKERFILE if op == "COPY" and "--from" not in a
    }
    copied |= {w for op, a in DOCKERFILE if op == "COPY" for w in a.split()[:-1]}
    dirs = {d.split("/")[0] for d in PYPROJECT["tool"]["setuptools"]["package-dir"].values()}
    for d in dirs:
        assert d in copied or f"{d}/" in copied, f"{d} is a package directory but is not copied"
    for f in ("pyproject.toml", "constraints.txt", PYPROJECT["project"]["readme"]):
        assert f in copied
    ignored = (ROOT / ".dockerignore").read_text().split()
    for d in [*dirs, "pyproject.toml", "constraints.txt"]:
        assert d not in ignored


@pytest.mark.kubectl  # renders manifests/ with kubectl kustomize
def test_runs_as_the_non_root_user_the_manifests_expect() -> None:
    final = stages()[-1]
    users = [a for op, a in final if op == "USER"]
    assert users, "the final stage sets USER"
    uid, _, gid = users[-1].partition(":")
    assert uid.isdigit() and int(uid) != 0 and gid.isdigit() and int(gid) != 0
    for _, tpl in pod_templates(render(MANIFESTS)):
        sc = tpl["spec"]["securityContext"]
        assert (sc["runAsUser"], sc["runAsGroup"]) == (int(uid), int(gid))
    env = " ".join(a for op, a in final if op == "ENV")
    assert "PYTHONDONTWRITEBYTECODE=1" in env  # read-only root filesystem


@pytest.mark.kubectl  # renders manifests/ with kubectl kustomize
def test_the_commands_the_manifests_run_are_console_scripts() -> None:
    scripts = PYPROJECT["project"]["scripts"]
    for _, tpl in pod_templates(render(MANIFESTS)):
        for c in tpl["spec"]["containers"]:
            assert c["command"][0] in scripts
    assert "kubectl-corral" in scripts
    final = " ".join(a for op, a in stages()[-1] if op == "ENV")
    assert "PATH=/opt/corral/bin" in final
