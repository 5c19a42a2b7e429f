"""The dump command in the docs (docs/descheduler.md, docs/kubectl-corral.md) names
every kind the planner reads: exactly what the descheduler's role may list (derived
from the code's API calls), the namespaces the plugin reads, and the CRDs that say
whether a suspend takes effect. A kind added to the planner without the docs fails here."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from gangplace.kube import resources as R
from gangplace.kube.rbac import allowed

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "docs" / "descheduler.md", ROOT / "docs" / "kubectl-corral.md"]


def _named(doc: Path) -> set[str]:
    text = doc.read_text()
    m = re.search(r"grep -xE '([^']+)'", text)
    assert m, f"{doc.name}: no dump command"
    return {n.replace("\\.", ".") for n in m.group(1).split("|")}


def _planner_reads() -> set[str]:
    out: set[str] = set()
    for name in dir(R):
        value = getattr(R, name)
        for r in value if isinstance(value, tuple) else (value,):
            if isinstance(r, R.Resource) and allowed("descheduler", "list", r):
                out.add(f"{r.plural}.{r.group}" if r.group else r.plural)
    return out


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_the_dump_command_names_every_kind_the_planner_reads(doc: Path) -> None:
    reads = _planner_reads()
    assert {"nodes", "pods", "jobs.batch", "pytorchjobs.kubeflow.org"} <= reads
    extra = {"namespaces", "customresourcedefinitions.apiextensions.k8s.io"}
    assert _named(doc) == reads | extra


def test_the_filter_keeps_what_api_resources_prints() -> None:
    """The filter, run as the docs write it, on names as `kubectl api-resources -o name`
    prints them: served kinds kept, others dropped."""
    pattern = re.search(r"grep -xE '([^']+)'", DOCS[0].read_text())
    assert pattern
    served = "pods\njobs.batch\ndeployments.apps\nrayjobs.ray.io\nleases.coordination.k8s.io\n"
    kept = subprocess.run(
        ["grep", "-xE", pattern.group(1)], input=served, capture_output=True, text=True, check=False
    ).stdout.split()
    assert kept == ["pods", "jobs.batch", "rayjobs.ray.io"]
