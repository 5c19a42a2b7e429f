"""admit() answers exactly as recorded: every fixture review (the captured ones, the
workload kinds of tests/webhook/fixtures/workloads, one hand-built review of every table kind),
each also with corral.dev values added, broken, skipped, and as the API server sends it
again after the patch (reinvocation), under every backend and a few configs (a node
pool, another scheduler name, non-gang pods ignored, a cluster with deny on
infeasible). The answer compared is everything a caller sees: the AdmissionReview
sent back (the patch's exact bytes included), the outcome, kind, reason, warnings,
the PodGroups wanted (their bodies rendered) and the owner hints.

tests/webhook/golden/admit.json.gz holds the inputs and the answers of the code as it was when
it was recorded; after a change meant to alter answers, record it again with
``python -m tests.webhook.test_admit_golden --record`` and review the diff."""

from __future__ import annotations

import copy
import gzip
import json
import sys
from functools import cache
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
from gangplace.engine import Snapshot

from tests.builders.reviews import node, running
from webhook.admission import keys as K
from webhook.admission.cluster_fit import ClusterCapacity
from webhook.admission.entry import admit
from webhook.admission.review import AdmitResult, ReviewError, decode_patch
from webhook.config import WebhookConfig, parse_config

GOLDEN = Path(__file__).parent / "golden" / "admit.json.gz"

CONFIGS: dict[str, dict[str, Any]] = {
    "volcano": {},
    "coscheduling": {"backend": "coscheduling"},
    "yunikorn": {"backend": "yunikorn"},
    "kueue": {"backend": "kueue"},
    "volcano-pool": {
        "nodePool": {"key": "pool", "value": "gpu"},
        "schedulerName": "corral-sched",
        "nonGangPods": "ignore",
        "gangTimeout": "10m",
        "namespaceQueues": {"ml": "research"},
    },
    "volcano-cluster-deny": {"infeasible": "deny", "warnWhenFull": True},
    "yunikorn-cluster": {"backend": "yunikorn", "warnWhenFull": True},
}
_WITH_CLUSTER = frozenset({"volcano-cluster-deny", "yunikorn-cluster"})


@cache
def _cluster() -> ClusterCapacity:
    """Four 4-GPU nodes, two of them full, and a CPU node."""
    nodes = [node(f"g{i}", 4, pool="gpu") for i in range(4)] + [node("c0", 0, pool="cpu")]
    pods = [running(f"busy-{i}", f"g{i}", 4) for i in range(2)]
    return ClusterCapacity.of(Snapshot.from_objects(nodes, pods))


@cache
def _config(name: str) -> WebhookConfig:
    return parse_config(copy.deepcopy(CONFIGS[name]), name)


def _jsonable(v: Any) -> Any:
    return json.loads(json.dumps(v, sort_keys=True, default=repr))


def answer(result: AdmitResult) -> dict[str, Any]:
    """Everything a caller of admit() sees, as plain JSON."""
    assert decode_patch(result.review["response"]) == result.patch
    return _jsonable(
        {
            "review": result.review,
            "uid": result.uid,
            "operation": result.operation,
            "kind": result.kind,
            "outcome": result.outcome,
            "warnings": list(result.warnings),
            "dry_run": result.dry_run,
            "reason": result.reason,
            "intents": [
                {
                    "api_version": i.api_version,
                    "plural": i.plural,
                    "namespace": i.namespace,
                    "name": i.name,
                    "owner": None if i.owner is None else list(i.owner),
                    "update": i.update,
                    "rendered": i.render(i.owner),
                }
                for i in result.intents
            ],
            "hints": [
                {
                    "api_version": h.api_version,
                    "namespace": h.namespace,
                    "name": h.name,
                    "owner": list(h.owner),
                }
                for h in result.hints
            ],
        }
    )


def run(review: dict[str, Any], config: str) -> dict[str, Any]:
    cluster = _cluster() if config in _WITH_CLUSTER else None
    before = copy.deepcopy(review)
    try:
        out = answer(admit(review, cluster, _config(config)))
    except ReviewError as e:
        out = {"review_error": str(e)}
    assert review == before, "admit() changed its input"
    return out


# --- the inputs -------------------------------------------------------------------------


def _variants(review: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The review and the same with corral.dev values set on the object's metadata."""
    out = {"as-is": review}
    values = {
        "gang": {K.GANG: "team-a"},
        "min-half": {K.MIN_AVAILABLE: "50%", K.QUEUE: "q1", K.GANG_TIMEOUT: "90s"},
        "min-2": {K.MIN_AVAILABLE: "2"},
        "bad": {K.MIN_AVAILABLE: "lots", K.GANG: "Not A Name", K.GANG_TIMEOUT: "soon"},
        "skip": {K.SKIP: "true"},
    }
    for label, ann in values.items():
        rev = copy.deepcopy(review)
        obj = rev["request"].get("object")
        if not isinstance(obj, dict):
            continue
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            continue
        meta.setdefault("annotations", {}).update(ann)
        out[label] = rev
    rev = copy.deepcopy(review)
    obj = rev["request"].get("object")
    if isinstance(obj, dict) and isinstance(obj.get("metadata"), dict):
        name = obj["metadata"].pop("name", None)
        if name:
            obj["metadata"]["generateName"] = f"{name}-"
            out["generate-name"] = rev
    rev = copy.deepcopy(review)
    rev["request"]["dryRun"] = True
    out["dry-run"] = rev
    return out


def _inputs() -> dict[str, dict[str, Any]]:
    """Every fixture review by name (recorded into the golden file with its answers)."""
    from tests.builders.reviews import FIXTURE_NAMES, fixture
    from tests.webhook.test_junk import _workload_reviews

    reviews: dict[str, dict[str, Any]] = {}
    for name in FIXTURE_NAMES:
        reviews[f"admission/{name}"] = fixture(name)
    for p in sorted((Path(__file__).parent / "fixtures" / "workloads").glob("*.json")):
        reviews[f"workloads/{p.name}"] = json.loads(p.read_text())
    for i, rev in enumerate(_workload_reviews()):
        kind = rev["request"]["kind"]["kind"]
        reviews[f"table/{i:02d}-{kind}"] = rev
    out = {}
    for name, rev in reviews.items():
        for label, variant in _variants(rev).items():
            out[f"{name}#{label}"] = variant
    # Outside the table, and not an answerable review.
    pod = fixture("pod-create-plain-cpu.json")
    other = copy.deepcopy(pod)
    other["request"]["kind"] = {"group": "", "version": "v1", "kind": "ConfigMap"}
    out["extra/configmap"] = other
    other = copy.deepcopy(pod)
    other["request"]["operation"] = "DELETE"
    out["extra/delete"] = other
    other = copy.deepcopy(pod)
    del other["request"]["object"]
    out["extra/no-object"] = other
    other = copy.deepcopy(pod)
    other["apiVersion"] = "admission.k8s.io/v1beta1"
    out["extra/v1beta1"] = other
    return out


def _again(review: dict[str, Any], result: dict[str, Any]) -> dict[str, Any] | None:
    """The review as the API server sends it after the patch (reinvocation)."""
    raw = result.get("review", {}).get("response", {})
    patch = decode_patch(raw)
    if not patch:
        return None
    rev = copy.deepcopy(review)
    rev["request"]["object"] = jsonpatch.apply_patch(rev["request"]["object"], patch)
    return rev


def record() -> None:
    reviews: dict[str, dict[str, Any]] = {}
    answers: dict[str, dict[str, Any]] = {c: {} for c in CONFIGS}
    for name, rev in _inputs().items():
        reviews[name] = rev
        for config in CONFIGS:
            expected = answers[config][name] = run(rev, config)
            again = _again(rev, expected)
            if again is None:
                continue
            # The same patched object under several configs is kept once.
            key = next(
                (k for k, r in reviews.items() if k.startswith(f"{name}#again") and r == again),
                None,
            )
            if key is None:
                key = f"{name}#again{sum(k.startswith(f'{name}#again') for k in reviews)}"
                reviews[key] = again
            answers[config][key] = run(again, config)
    GOLDEN.parent.mkdir(exist_ok=True)
    doc = {"configs": CONFIGS, "reviews": reviews, "answers": answers}
    text = json.dumps(doc, sort_keys=True, indent=0) + "\n"
    GOLDEN.write_bytes(gzip.compress(text.encode(), mtime=0))
    print(
        f"{sum(map(len, answers.values()))} answers to {len(reviews)} reviews written to {GOLDEN}"
    )


# --- the test ---------------------------------------------------------------------------


@cache
def _golden() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(gzip.decompress(GOLDEN.read_bytes()))
    return doc


def test_the_golden_file_covers_every_config_and_outcome() -> None:
    doc = _golden()
    assert doc["configs"] == CONFIGS
    got = [a for per in doc["answers"].values() for a in per.values()]
    outcomes = {a.get("outcome", "review_error") for a in got}
    assert outcomes >= {"patched", "unchanged", "skipped", "denied", "unhandled", "review_error"}
    assert any("#again" in name for name in doc["reviews"])
    assert any(a.get("intents") for a in got) and any(a.get("hints") for a in got)


@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_admit_answers_as_recorded(config: str) -> None:
    doc = _golden()
    expected = doc["answers"][config]
    assert expected
    wrong = []
    for name, want in expected.items():
        got = run(doc["reviews"][name], config)
        if got != want:
            wrong.append((name, got, want))
    assert not wrong, (
        f"{len(wrong)} of {len(expected)} answers differ; first: {wrong[0][0]}\n"
        f"got      {json.dumps(wrong[0][1], sort_keys=True)}\n"
        f"expected {json.dumps(wrong[0][2], sort_keys=True)}"
    )


if __name__ == "__main__":
    if sys.argv[1:] != ["--record"]:
        sys.exit("usage: python -m tests.webhook.test_admit_golden --record")
    record()
