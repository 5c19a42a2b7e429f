"""kubectl corral's viewer role is a file in manifests/ an admin applies as the page says,
generated with the other manifests, and the page lists every permission it grants."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import yaml
from gangplace.kube import rbac

from scripts import gen_manifests

ROOT = Path(__file__).resolve().parents[2]
FILE = ROOT / "manifests/kubectl-corral/corral-viewer.yaml"
DOC = ROOT / "docs/kubectl-corral.md"


def permissions() -> str:
    return DOC.read_text().split("## Permissions", 1)[1].split("\n## ", 1)[0]


def test_the_role_is_a_generated_file() -> None:
    assert yaml.safe_load(FILE.read_text()) == rbac.viewer_role()
    assert gen_manifests.generated()[FILE] == FILE.read_text()


def test_the_page_applies_that_file_and_binds_that_role() -> None:
    blocks = re.findall(r"```sh\n(.*?)```", permissions(), flags=re.S)
    cmds = [shlex.split(ln) for b in blocks for ln in b.splitlines() if ln.strip()]
    applied = [c[c.index("-f") + 1] for c in cmds if c[:2] == ["kubectl", "apply"]]
    assert applied == [str(FILE.relative_to(ROOT))]
    [bind] = [c for c in cmds if c[:3] == ["kubectl", "create", "clusterrolebinding"]]
    assert f"--clusterrole={rbac.viewer_role()['metadata']['name']}" in bind


def test_the_page_lists_every_permission_the_role_grants() -> None:
    listed: set[tuple[str, str, str]] = set()
    for row in re.findall(r"^\| (.+?) \| (.+?) \| (.+?) \|$", permissions(), flags=re.M):
        groups, resources, verbs = row
        if groups in ("API group", "---"):
            continue
        for g in groups.split(", "):
            group = "" if g == "core" else g.strip("`")
            for r in resources.split(", "):
                for v in verbs.split(", "):
                    listed.add((group, r.strip("`"), v))
    granted = {
        (g, r, v)
        for rule in rbac.viewer_role()["rules"]
        for g in rule["apiGroups"]
        for r in rule["resources"]
        for v in rule["verbs"]
    }
    assert listed == granted
