"""``corral-webhook demo``: the webhook, started locally over real HTTPS, answering the
AdmissionReviews a real API server sent, and what it does with each -- for a newcomer.

It runs without a cluster (``--no-cluster``) on a throw-away self-signed certificate
that only this process trusts. A last step gives a second server the bundled sample
cluster as a static snapshot, to show a feasibility warning.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

import aiohttp
from gangplace.thirdparty import ADMISSION_FIXTURES, locate

from webhook.admission import keys as K
from webhook.admission.cluster_fit import ClusterCapacity, SnapshotSource, StaticSource
from webhook.admission.entry import admit
from webhook.admission.review import AdmitResult, decode_patch
from webhook.config import WebhookConfig
from webhook.server import init_app, start
from webhook.tls.certificates import new_bundle
from webhook.tls.contexts import client_context, load_pair, server_context

__all__ = ["FixtureError", "find_fixtures", "read_reviews", "run_demo"]


class FixtureError(ValueError):
    """A fixture folder or file the demo cannot use; the message names it."""


_ORDER = (
    "job-create-mpi-train.json",
    "pod-create-from-job-mpi-train.json",
    "pod-create-llm-worker-0.json",
    "pod-create-plain-cpu.json",
    "pod-create-dry-gpu-dryrun.json",
)


def find_fixtures(explicit: Path | None = None) -> Path:
    """``explicit``, else the recorded reviews of the data folder (``$CORRAL_DATA``, or
    ``../shared`` beside the repository), else the copies bundled with the package."""
    if explicit is not None:
        return explicit
    here = Path(__file__).resolve().parent
    return locate(ADMISSION_FIXTURES, "*.json", here.parent) or here / "fixtures"


def _files(folder: Path) -> list[Path]:
    found = {p.name: p for p in folder.glob("*.json")}
    ordered = [found.pop(n) for n in _ORDER if n in found]
    return ordered + [found[n] for n in sorted(found)]


def _describe(review: Mapping[str, Any]) -> tuple[str, list[str]]:
    req = review.get("request") or {}
    obj = req.get("object") or {}
    meta = obj.get("metadata") or {}
    api = obj.get("apiVersion", "?")
    name = meta.get("name") or f"{meta.get('generateName', '')}<generated>"
    what = f"{api} {obj.get('kind', '?')} {req.get('namespace', '')}/{name}"
    owners = [
        f"{o.get('kind')}/{o.get('name')}"
        for o in meta.get("ownerReferences") or ()
        if isinstance(o, Mapping)
    ]
    if owners:
        what += f" (made by {', '.join(owners)})"
    if req.get("dryRun"):
        what += " [dry run]"
    keys: list[str] = []
    sources: list[tuple[str, Mapping[str, Any]]] = [("", meta)]
    template = (obj.get("spec") or {}).get("template")
    if isinstance(template, Mapping):
        sources.append((" (pod template)", template.get("metadata") or {}))
    for where, m in sources:
        for k in (*K.USER_KEYS, K.SKIP):
            v = K.user_value(m, k)
            if v is not None:
                keys.append(f"{k}={v}{where}")
    return what, keys


def _print_answer(
    out: TextIO, status: int, body: Mapping[str, Any], result: AdmitResult | None
) -> None:
    resp = body.get("response") or {}
    if status != 200:
        out.write(f"  answer     HTTP {status}: {body.get('message')}\n")
        return
    if not resp.get("allowed"):
        msg = (resp.get("status") or {}).get("message", "")
        out.write(f"  answer     refused (allowed: false): {msg}\n")
        return
    ops = decode_patch(resp)
    if not ops:
        out.write("  answer     allowed, unchanged\n")
    else:
        out.write(f"  answer     allowed, with a JSON patch of {len(ops)} operations:\n")
        for op in ops:
            value = json.dumps(op.get("value"), separators=(",", ":"))
            if len(value) > 70:
                value = value[:67] + "..."
            out.write(f"               {op['op']:<8} {op['path']}  {value}\n")
    for w in resp.get("warnings") or ():
        out.write(f"  warning    {w}\n")
    if result is not None:
        for intent in result.intents:
            spec = intent.body.get("spec") or {}
            parts = [f"minMember {spec.get('minMember')}"]
            if spec.get("queue"):
                parts.append(f"queue {spec['queue']}")
            if spec.get("minResources"):
                res = ", ".join(f"{k}={v}" for k, v in spec["minResources"].items())
                parts.append(f"minResources {res}")
            owner = f"; owned by {intent.owner.kind}/{intent.owner.name}" if intent.owner else ""
            out.write(
                f"  PodGroup   {intent.api_version} {intent.namespace}/{intent.name}: "
                f"{', '.join(parts)}{owner}\n"
                "             (with a cluster, the webhook creates it in the background)\n"
            )


class _Recorder:
    """Wraps admit() to keep the last result: the demo shows the PodGroup that a
    cluster-connected webhook would create, which HTTP does not carry."""

    def __init__(self) -> None:
        self.last: AdmitResult | None = None

    def __call__(
        self, review: Any, cluster: ClusterCapacity | None, config: WebhookConfig
    ) -> AdmitResult:
        self.last = admit(review, cluster, config)
        return self.last


async def _post_all(
    url: str,
    session: aiohttp.ClientSession,
    reviews: list[tuple[str, dict[str, Any]]],
    recorder: _Recorder,
    out: TextIO,
) -> None:
    for i, (label, review) in enumerate(reviews, 1):
        what, keys = _describe(review)
        out.write(f"\n{i}. {label}\n")
        out.write(f"  created    {what}\n")
        out.write(f"  user keys  {', '.join(keys) if keys else '(none)'}\n")
        recorder.last = None
        async with session.post(url, json=review) as r:
            body = await r.json(content_type=None)
            _print_answer(out, r.status, body, recorder.last)


async def _serve(
    source: SnapshotSource | None, config: WebhookConfig, ca: bytes, cert: bytes, key: bytes
) -> tuple[Any, int, _Recorder]:
    ctx = server_context()
    load_pair(ctx, cert, key)
    recorder = _Recorder()
    app = init_app(config, source=source, admit_fn=recorder)
    runner, port = await start(app, "127.0.0.1", 0, ctx, shutdown_timeout=5)
    return runner, port, recorder


def _infeasible_job() -> dict[str, Any]:
    def template(gpus: int) -> dict[str, Any]:
        res = {"cpu": "32", "memory": "256Gi", "nvidia.com/gpu": str(gpus)}
        return {
            "spec": {
                "containers": [
                    {
                        "name": "pytorch",
                        "image": "pytorch/pytorch:2.4.0",
                        "resources": {"requests": res, "limits": {"nvidia.com/gpu": str(gpus)}},
                    }
                ]
            }
        }

    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "3f1c2a9e-0000-4000-8000-000000000016",
            "kind": {"group": "kubeflow.org", "version": "v1", "kind": "PyTorchJob"},
            "resource": {"group": "kubeflow.org", "version": "v1", "resource": "pytorchjobs"},
            "namespace": "ml",
            "name": "llm-pretrain",
            "operation": "CREATE",
            "dryRun": False,
            "object": {
                "apiVersion": "kubeflow.org/v1",
                "kind": "PyTorchJob",
                "metadata": {"name": "llm-pretrain", "namespace": "ml"},
                "spec": {
                    "pytorchReplicaSpecs": {
                        "Master": {"replicas": 1, "template": template(8)},
                        "Worker": {"replicas": 15, "template": template(8)},
                    }
                },
            },
        },
    }


def read_reviews(folder: Path) -> list[tuple[str, dict[str, Any]]]:
    """Every AdmissionReview in ``folder``, checked before the webhook starts: a file
    that is not one is refused by name (FixtureError), none is posted half-read."""
    if not folder.is_dir():
        raise FixtureError(f"--fixtures {folder}: not a folder")
    files = _files(folder)
    if not files:
        raise FixtureError(f"--fixtures {folder}: no AdmissionReview *.json files in it")
    out: list[tuple[str, dict[str, Any]]] = []
    for p in files:
        try:
            review = json.loads(p.read_bytes())
        except OSError as e:
            raise FixtureError(f"{p}: {e.strerror or e}") from None
        except UnicodeDecodeError:
            raise FixtureError(f"{p}: not JSON (not UTF-8 text)") from None
        except json.JSONDecodeError as e:
            raise FixtureError(
                f"{p}: not JSON ({e.msg} at line {e.lineno}, column {e.colno})"
            ) from None
        if (
            not isinstance(review, dict)
            or review.get("kind") != "AdmissionReview"
            or not isinstance(review.get("request"), dict)
            or not isinstance(review["request"].get("object"), dict)
        ):
            raise FixtureError(
                f"{p}: not an AdmissionReview; expected an object with kind "
                '"AdmissionReview" and a request.object, as the API server sends'
            )
        out.append((p.name, review))
    return out


async def run_demo(fixtures: Path | None, out: TextIO) -> int:
    folder = find_fixtures(fixtures)
    reviews = read_reviews(folder)
    bundle = new_bundle(
        "corral-webhook", "corral-system", dt.datetime.now(dt.UTC), ips=["127.0.0.1"]
    )
    config = WebhookConfig()
    client_ssl = client_context(bundle.ca_cert)
    runner, port, recorder = await _serve(None, config, bundle.ca_cert, bundle.cert, bundle.key)
    url = f"https://127.0.0.1:{port}/mutate"
    out.write(
        f"corral-webhook demo: the webhook serves {url}\n"
        "  over TLS with a throw-away self-signed certificate, without a cluster (--no-cluster),\n"
        f"  with the default config: backend {config.backend.value}, "
        f"schedulerName {config.effective_scheduler_name}, queue "
        f"{config.effective_default_queue}, minAvailable = the whole gang.\n"
        f"Posting the AdmissionReviews in {folder}\n"
        "  (bodies a real kube-apiserver sent to a mutating webhook):\n"
    )
    connector = aiohttp.TCPConnector(ssl=client_ssl)
    try:
        async with aiohttp.ClientSession(connector=connector) as session:
            await _post_all(url, session, reviews, recorder, out)
    finally:
        await runner.cleanup()

    # Feasibility: the engine on a cluster snapshot (the bundled sample cluster).
    from gangplace.snapshot_io import load_snapshot

    snap = load_snapshot(None)
    gpus = int(snap.gpu_total.sum())
    runner, port, recorder = await _serve(
        StaticSource(ClusterCapacity.of(snap)), config, bundle.ca_cert, bundle.cert, bundle.key
    )
    out.write(
        f"\nWith a view of a cluster (here the bundled sample cluster: {snap.n_nodes} nodes, "
        f"{gpus} GPUs, given as --cluster-file),\nthe webhook asks the engine whether a gang "
        "can ever start and warns (or, with infeasible: deny, refuses):\n"
    )
    connector = aiohttp.TCPConnector(ssl=client_ssl)
    try:
        async with aiohttp.ClientSession(connector=connector) as session:
            await _post_all(
                f"https://127.0.0.1:{port}/mutate",
                session,
                [("a PyTorchJob of 16 pods x 8 GPUs (built by the demo)", _infeasible_job())],
                recorder,
                out,
            )
    finally:
        await runner.cleanup()
    out.write(
        "\nNext: `corral-webhook serve --help`; the keys users type are described in\n"
        "docs/annotations.md, beside the README.\n"
    )
    return 0
