"""The never-evicted rules the installed descheduler config and the configuration
reference list are the ones the code honours: every opt-out key named protects a pod,
and every opt-out key the code knows is named."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gangplace.engine import PodRecord, PodShape, membership

from descheduler.config import EvictionRules, render_defaults
from descheduler.planning import protect

ROOT = Path(__file__).resolve().parents[2]
NOW = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)
RULES = EvictionRules()


def pod(**kw: Any) -> PodRecord:
    base: dict[str, Any] = {
        "namespace": "ml",
        "name": "p",
        "shape": PodShape.of({"cpu": 1}, gpus=1),
        "node_name": "n0",
        "phase": "Running",
        "owner_kind": "ReplicaSet",
        "owner_name": "rs",
        "created": "2026-12-02T08:00:00Z",
    }
    return PodRecord(**{**base, **kw})


def opt_out_keys_the_code_knows() -> set[str]:
    """Every annotation key constant of the protection rules (the mirror-pod key, which
    marks a kind of pod rather than an opt-out, left aside)."""
    keys = {membership.ANNOTATION_EVICTABLE}
    for name in protect.__all__:
        value = getattr(protect, name)
        if isinstance(value, str) and "/" in value and value != protect.ANNOTATION_MIRROR:
            keys.add(value)
    return keys


def protects(key: str) -> bool:
    as_annotation = protect.pod_protection(pod(annotations={key: "false"}), RULES, NOW)
    return as_annotation is not None


def named(text: str) -> set[str]:
    return {k for k in re.findall(r"`+([\w.-]+(?:\.[\w-]+)+/[\w.-]+)", text)}


def eviction_comment(config_text: str) -> str:
    lines = config_text.splitlines()
    i = lines.index("eviction:")
    return lines[i - 1]


def test_the_code_protects_every_key_it_knows() -> None:
    keys = opt_out_keys_the_code_knows()
    assert protect.pod_protection(pod(), RULES, NOW) is None
    assert {k for k in keys if protects(k)} == keys


def test_the_installed_config_names_the_rules_of_the_code() -> None:
    keys = opt_out_keys_the_code_knows()
    for text in (render_defaults(), (ROOT / "manifests/base/descheduler.yaml").read_text()):
        comment = eviction_comment(text)
        assert named(comment) == keys, comment
        for phrase in ("DaemonSet pods", "mirror pods", "pods without a controller"):
            assert phrase in comment


def test_the_configuration_reference_names_them_too() -> None:
    doc = (ROOT / "docs/configuration.md").read_text()
    [row] = [ln for ln in doc.splitlines() if ln.startswith("| `eviction` |")]
    assert named(row) == opt_out_keys_the_code_knows(), row
