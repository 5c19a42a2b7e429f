"""docs/ says what the code does: every config key with its real default, every metric,
every user key, every backend key, alerts on metrics that exist, links that resolve, and
kubectl corral's samples as it prints them."""

from __future__ import annotations

import io
import re
import shlex
import typing
from pathlib import Path
from typing import Annotated, Any

import pytest
import yaml
from gangplace.engine import membership
from pydantic import BaseModel, TypeAdapter

from descheduler.config import DeschedulerConfig
from descheduler.running.metrics import DeschedulerMetrics
from tests.kubeapi import ApiServer
from webhook.admission.validate import (
    check_duration,
    check_gang_name,
    check_queue,
    parse_min_available,
)
from webhook.config import DEFAULT_SCHEDULER, Backend, WebhookConfig
from webhook.metrics import WebhookMetrics

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def read(name: str) -> str:
    return (DOCS / name).read_text()


# --- configuration reference ------------------------------------------------------------


def _models_in(ann: Any) -> list[type[BaseModel]]:
    out: list[type[BaseModel]] = []
    for a in typing.get_args(ann):
        out += _models_in(a)
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        out.append(ann)
    return out


def config_keys(model: type[BaseModel], prefix: str = "") -> dict[str, tuple[type[BaseModel], str]]:
    """Every key path (as users write it) -> (the model that holds it, its field)."""
    out: dict[str, tuple[type[BaseModel], str]] = {}
    for name, f in model.model_fields.items():
        key = prefix + (f.alias or name)
        out[key] = (model, name)
        listed = typing.get_origin(f.annotation) in (tuple, list)
        for sub in _models_in(f.annotation):
            out.update(config_keys(sub, key + ("[]." if listed else ".")))
    return out


def doc_table(text: str, heading: str) -> dict[str, str]:
    """key -> default cell of the table under ``heading``."""
    section = text.split(heading, 1)[1].split("\n## ", 1)[0]
    rows: dict[str, str] = {}
    for line in section.splitlines():
        m = re.match(r"^\| `([^`]+)` \| ([^|]+) \|", line)
        if m:
            assert m[1] not in rows, f"{m[1]} listed twice under {heading}"
            rows[m[1]] = m[2].strip()
    return rows


@pytest.mark.parametrize(
    ("heading", "model"),
    [("## Webhook", WebhookConfig), ("## Descheduler", DeschedulerConfig)],
    ids=["webhook", "descheduler"],
)
def test_every_config_key_is_documented_with_its_default(
    heading: str, model: type[BaseModel]
) -> None:
    rows = doc_table(read("configuration.md"), heading)
    keys = config_keys(model)
    assert sorted(set(keys) - set(rows)) == [], "undocumented keys"
    assert sorted(set(rows) - set(keys)) == [], "documented keys that do not exist"
    for key, cell in rows.items():
        owner, name = keys[key]
        field = owner.model_fields[name]
        if field.is_required():
            assert cell == "required", key
            continue
        default = field.get_default(call_default_factory=True)
        if isinstance(default, BaseModel):
            assert cell == "section", key
            continue
        assert cell.startswith("`") and cell.endswith("`"), f"{key}: {cell}"
        written = yaml.safe_load(cell[1:-1])
        ann = Annotated[field.annotation, *field.metadata] if field.metadata else field.annotation
        assert TypeAdapter(ann).validate_python(written) == default, f"{key}: doc says {cell}"


def test_the_config_check_can_fail() -> None:
    text = read("configuration.md").replace(
        "| `eviction.cooldown` | `1h` |", "| `eviction.cooldown` | `2h` |"
    )
    rows = doc_table(text, "## Descheduler")
    field = DeschedulerConfig.model_fields["eviction"].annotation.model_fields["cooldown"]  # type: ignore[union-attr]
    ann = Annotated[field.annotation, *field.metadata]
    assert TypeAdapter(ann).validate_python(yaml.safe_load(rows["eviction.cooldown"][1:-1])) == 7200


# --- metrics and alerts -----------------------------------------------------------------


def exported() -> dict[str, tuple[str, list[str]]]:
    """Exported metric name -> (type, label names)."""
    out: dict[str, tuple[str, list[str]]] = {}
    for metrics in (WebhookMetrics(), DeschedulerMetrics()):
        for fam in metrics.registry.collect():
            name = fam.name + "_total" if fam.type == "counter" else fam.name
            labels = sorted(
                {k for s in fam.samples for k in s.labels} - {"le"}
            ) or _declared_labels(metrics, fam.name)
            out[name] = (fam.type, labels)
    return out


def _declared_labels(metrics: Any, name: str) -> list[str]:
    for v in vars(metrics).values():
        if getattr(v, "_name", None) == name:
            return sorted(getattr(v, "_labelnames", ()))
    return []


def test_every_metric_is_documented_with_its_type_and_labels() -> None:
    text = read("metrics.md")
    metrics = exported()
    assert len(metrics) >= 14
    for name, (kind, labels) in metrics.items():
        m = re.search(rf"^\| `{name}` \| (\w+) \|([^|]*)\|", text, re.M)
        assert m, f"{name} is not in docs/metrics.md"
        assert m[1] == kind, name
        assert sorted(re.findall(r"`(\w+)`", m[2])) == labels, name
    documented = set(re.findall(r"^\| `(corral_\w+)` \|", text, re.M))
    assert documented == set(metrics), "documented metrics that are not exported"


def _alerts() -> list[dict[str, Any]]:
    doc = yaml.safe_load(read("prometheus/corral-alerts.yaml"))
    assert doc["apiVersion"] == "monitoring.coreos.com/v1" and doc["kind"] == "PrometheusRule"
    return [r for g in doc["spec"]["groups"] for r in g["rules"]]


def test_alerts_use_metrics_that_exist_and_are_documented() -> None:
    metrics = exported()
    valid = set(metrics)
    for name, (kind, _) in metrics.items():
        if kind == "histogram":
            valid |= {f"{name}_bucket", f"{name}_sum", f"{name}_count"}
    text = read("metrics.md")
    alerts = _alerts()
    assert len({a["alert"] for a in alerts}) == len(alerts)
    for a in alerts:
        assert set(a) <= {"alert", "expr", "for", "labels", "annotations"}, a["alert"]
        assert a["labels"]["severity"] in ("critical", "warning", "info")
        assert a["annotations"]["summary"]
        if "for" in a:
            assert re.fullmatch(r"\d+[smh]", a["for"])
        assert a["expr"].count("(") == a["expr"].count(")"), a["alert"]
        for used in re.findall(r"\b(corral_\w+)", a["expr"]):
            assert used in valid, f"{a['alert']}: {used} is not exported"
        assert f"`{a['alert']}`" in text, f"{a['alert']} is not in docs/metrics.md"
        for match in re.findall(r"\{([^}]*)\}", a["expr"]):
            for label, _ in re.findall(r'(\w+)\s*[=!~]+\s*"([^"]*)"', match):
                assert label  # every matcher names a label


# --- user keys, backends ----------------------------------------------------------------

USER_KEYS = [
    getattr(membership, n) for n in membership.__all__ if n.startswith(("ANNOTATION_", "LABEL_"))
]


def test_every_user_key_is_documented() -> None:
    text = read("annotations.md")
    for key in USER_KEYS:
        assert f"`{key}`" in text, key


def test_annotate_examples_use_values_the_webhook_accepts() -> None:
    text = read("annotations.md").replace("\\\n", " ")
    checks = {
        membership.ANNOTATION_MIN_AVAILABLE: lambda v: parse_min_available("k", v, 16),
        membership.ANNOTATION_GANG_TIMEOUT: lambda v: check_duration("k", v),
        membership.ANNOTATION_QUEUE: lambda v: check_queue("k", v),
        membership.ANNOTATION_GANG: lambda v: check_gang_name("k", v),
        membership.ANNOTATION_SKIP: lambda v: v == "true" or pytest.fail(v),
        membership.ANNOTATION_EVICTABLE: lambda v: v == "false" or pytest.fail(v),
    }
    seen = set()
    for line in text.splitlines():
        if "kubectl annotate" not in line:
            continue
        words = shlex.split(line.split("|")[0])
        for w in words:
            key, eq, value = w.partition("=")
            if eq and key in checks:
                checks[key](value)
                seen.add(key)
    assert seen == set(checks)


def test_backends_doc_names_every_backend_key() -> None:
    text = read("backends.md")
    dialect_keys = [
        getattr(membership, n)
        for n in membership.__all__
        if n.startswith(("VOLCANO_", "COSCHED_", "YUNIKORN_", "KUEUE_"))
        and n not in ("YUNIKORN_APP_ID", "YUNIKORN_QUEUE")  # read-side aliases only
    ]
    for key in dialect_keys:
        assert f"`{key}`" in text, key
    for b in Backend:
        assert f"| `{b.value}`" in text
        name = DEFAULT_SCHEDULER[b]
        if name:
            assert f"`{name}`" in text


# --- failure modes, install, links ------------------------------------------------------


def test_failure_modes_cover_the_four_cases_with_real_names() -> None:
    text = read("failure-modes.md")
    for heading in (
        "## The webhook is down",
        "## The certificate expired or is not trusted",
        "## A PodGroup is missing",
        "## The descheduler was refused mid-gang",
    ):
        assert heading in text
    runner = (ROOT / "descheduler/running/runner.py").read_text()
    for reason in re.findall(r"`(Gang\w+)`", text):
        assert f'"{reason}"' in runner, f"{reason} is not an Event reason the runner writes"
    assert "failurePolicy" in text and "components/fail-open" in text


def test_install_doc_covers_every_overlay_and_component() -> None:
    text = read("install.md")
    assert "kubectl apply -k manifests/" in text
    assert "kubectl label namespace ml corral.dev/gang-scheduling=enabled" in text
    for p in sorted((ROOT / "manifests/overlays").iterdir()):
        assert f"manifests/overlays/{p.name}" in text, p.name
    for p in sorted((ROOT / "manifests/components").iterdir()):
        assert f"`{p.name}`" in text, p.name


def _slug(heading: str) -> str:
    s = heading.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def test_relative_links_resolve() -> None:
    files = [ROOT / "README.md", *DOCS.glob("*.md")]
    checked = 0
    for f in files:
        for target in re.findall(r"\]\(([^)\s]+)\)", f.read_text()):
            if re.match(r"^[a-z]+://", target):
                continue
            path, _, anchor = target.partition("#")
            dest = (f.parent / path).resolve() if path else f
            assert dest.exists(), f"{f.name}: {target}"
            if anchor:
                headings = re.findall(r"^#+ (.+)$", dest.read_text(), re.M)
                assert anchor in {_slug(h) for h in headings}, f"{f.name}: {target}"
            checked += 1
    assert checked >= 20


def test_readme_links_the_install_guide() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "## Install" in readme and "(docs/install.md)" in readme


def test_readme_fits_on_two_screens_and_links_every_doc() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 120
    linked = set(re.findall(r"\]\(docs/([\w-]+\.md)", readme))
    assert linked == {p.name for p in DOCS.glob("*.md")}


def test_webhook_doc_config_sample_uses_real_keys() -> None:
    sample = read("webhook.md").split("```yaml\n", 1)[1].split("```", 1)[0]
    keys = config_keys(WebhookConfig)
    written = yaml.safe_load(sample)
    assert sorted(set(written) - set(keys)) == []
    WebhookConfig.model_validate(written)


# --- kubectl corral's samples -----------------------------------------------------------


def _samples(text: str) -> dict[str, str]:
    """``$ kubectl corral ...`` -> the output shown under it."""
    out = {}
    for block in re.findall(r"```text\n(.*?)```", text, re.S):
        parts = re.split(r"^\$ (kubectl corral .*)$", block, flags=re.M)
        for cmd, body in zip(parts[1::2], parts[2::2], strict=True):
            out[cmd] = body.strip("\n") + "\n"
    return out


async def test_kubectl_corral_samples_are_what_it_prints(api: ApiServer, tmp_path: Path) -> None:
    from kubectl_corral.cli import run
    from tests.plugin.test_kubectl_corral import cluster_objects

    api.store.load(cluster_objects())
    api.accept("x")
    kc = tmp_path / "kc"
    kc.write_text(
        yaml.safe_dump(
            {
                "clusters": [{"name": "c", "cluster": {"server": api.url}}],
                "users": [{"name": "u", "user": {"token": "x"}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "c",
            }
        )
    )
    samples = _samples(read("kubectl-corral.md"))
    assert len(samples) == 4
    for cmd, want in samples.items():
        out, err = io.StringIO(), io.StringIO()
        argv = shlex.split(cmd)[2:]
        assert await run([*argv, "--kubeconfig", str(kc)], out, err, environ={}) == 0, err
        got = out.getvalue().replace(api.url, "https://10.0.0.1:6443")
        assert got == want, cmd
