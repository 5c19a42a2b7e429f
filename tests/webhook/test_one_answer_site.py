"""Admission decides, then answers in one place: the pod and workload rules return a
decision value, only admit() turns it into the AdmissionReview's response, and every way
a backend differs lives in its class under webhook/admission/backends/."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.builders.reviews import fixture
from webhook.admission.decision import Denied, Patched, Unchanged
from webhook.admission.entry import admit
from webhook.admission.gang_decision import controller
from webhook.admission.pods import admit_pod
from webhook.admission.review import parse_request
from webhook.config import WebhookConfig

ADMISSION = Path(__file__).resolve().parents[2] / "webhook" / "admission"


def _imports(path: Path) -> set[str]:
    """The modules ``path`` imports when it runs (not those under TYPE_CHECKING)."""
    tree = ast.parse(path.read_text())
    typing_only = {
        id(n)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"
        for n in ast.walk(node)
    }
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and id(node) not in typing_only:
            out.add(node.module)
    return out


def test_only_entry_makes_the_answer() -> None:
    users = sorted(
        p.relative_to(ADMISSION).as_posix()
        for p in ADMISSION.rglob("*.py")
        if "webhook.admission.responses" in _imports(p)
    )
    assert users == ["entry.py"]


def test_admission_names_the_config_only_for_typing() -> None:
    users = sorted(
        p.relative_to(ADMISSION).as_posix()
        for p in ADMISSION.rglob("*.py")
        if "webhook.config" in _imports(p)
    )
    assert users == []


@pytest.mark.parametrize("name", ["pods.py", "workloads.py", "gang_decision.py", "entry.py"])
def test_no_rule_asks_which_backend_is_configured(name: str) -> None:
    text = (ADMISSION / name).read_text()
    assert "Backend." not in text and "config.backend is" not in text


def test_a_pod_rule_returns_a_decision_that_admit_answers() -> None:
    config = WebhookConfig()
    review = fixture("pod-create-plain-cpu.json")
    req = parse_request(review)
    assert req.obj is not None
    meta = req.obj["metadata"]
    decision = admit_pod(req, req.obj, meta, {}, controller(meta), None, config)
    # A single-pod gang: edits and its PodGroup, not yet an answer.
    assert isinstance(decision, Patched) and decision.edits is not None
    assert [i.name for i in decision.intents] == [
        i.name for i in admit(review, None, config).intents
    ]
    assert not isinstance(decision, (Unchanged, Denied))
