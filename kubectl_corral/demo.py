"""``kubectl corral demo``: the story corral tells, run on a cluster with short narration
and tables.

1. A pod-by-pod scheduler (kube-scheduler) leaves a gang half placed: 3 of 4 workers
   of 8 GPUs hold every GPU of three 8-GPU nodes, the fourth can never start.
2. The same Job in a namespace opted in to corral: the webhook makes it a gang for
   Volcano, which binds none of it rather than part of it.
3. A gang that fits (4 workers of 2 GPUs) is bound whole.
4. Fragmentation (nodes with 7, 6 and 7 GPUs used by 1-GPU Jobs): a 4-GPU gang waits
   although 4 GPUs are free; corral's descheduler moves the small Jobs of one node so
   that it fits.

Everything happens in two namespaces of its own (``corral-demo-<id>`` and
``corral-demo-<id>-plain``), deleted at the end, as are the taints it puts on nodes
for a moment to place the small Jobs, and the pretend GPUs ``--add-gpus`` advertises.
It needs corral (the webhook's MutatingWebhookConfiguration) and Volcano (its Queue
API and the ``default`` queue), and three schedulable nodes with 8 ``nvidia.com/gpu``
each (``--add-gpus`` gives three nodes of a GPU-less cluster such as kind 8 pretend
ones: extended resources in the node status, as Kubernetes documents). The same code
runs on the in-memory cluster with ``--local`` (see :mod:`kubectl_corral.local`).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import secrets
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TextIO

from gangplace.kube import ApiError, KubeClient
from gangplace.kube.resources import (
    JOBS,
    MUTATING_WEBHOOKS,
    NAMESPACES,
    NODES,
    PODS,
    VOLCANO_PODGROUPS,
    VOLCANO_QUEUES,
)

from descheduler.api import DeschedulerConfig, EvictionRules
from kubectl_corral.demo_objects import (
    GPU,
    GROUP,
    OPT_IN,
    TAINT,
    WEBHOOK_CONFIGURATION,
    Json,
    allocatable_gpus,
    bound_pods,
    gpus_of,
    is_control_plane,
    job_manifest,
    job_of,
    moved_pods,
    podgroup_phase,
    running_pods,
    unschedulable_why,
)

__all__ = ["GPU", "Demo", "DemoError", "job_manifest"]


class DemoError(RuntimeError):
    """The demo cannot run here, or a step did not come out as it must; the message
    says what and what to do."""


@dataclass(frozen=True, slots=True)
class Step:
    title: str
    narration: str


def table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    grid = [list(head), *[list(r) for r in rows]]
    widths = [max(len(r[i]) for r in grid) for i in range(len(head))]
    return "\n".join(
        "   ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in grid
    )


class Demo:
    """One run of the story through ``client``. ``where`` names the cluster on screen;
    ``timeout`` bounds each wait."""

    def __init__(
        self,
        client: KubeClient,
        out: TextIO,
        *,
        where: str,
        add_gpus: bool = False,
        timeout: float = 120.0,
        poll: float = 0.5,
        run_id: str | None = None,
        descheduler: Callable[[KubeClient, DeschedulerConfig, str], Awaitable[Json]] | None = None,
    ) -> None:
        self.client = client
        self.out = out
        self.where = where
        self.add_gpus = add_gpus
        self.timeout = timeout
        self.poll = poll
        rid = run_id or secrets.token_hex(3)
        self.gang_ns = f"corral-demo-{rid}"
        self.plain_ns = f"corral-demo-{rid}-plain"
        self.nodes: list[str] = []
        self.gpus_added: list[str] = []
        self.tainted: list[str] = []
        self.descheduler = descheduler or run_descheduler_once

    # --- output -------------------------------------------------------------------------

    def say(self, text: str = "") -> None:
        self.out.write(text + "\n")
        self.out.flush()

    def step(self, n: int, title: str, narration: str) -> None:
        self.say()
        self.say(f"== {n}. {title}")
        self.say(narration)

    # --- preflight ----------------------------------------------------------------------

    async def preflight(self) -> None:
        try:
            await self.client.get(MUTATING_WEBHOOKS, WEBHOOK_CONFIGURATION)
        except ApiError as e:
            if e.status == 404:
                raise DemoError(
                    "corral is not installed on this cluster (no MutatingWebhookConfiguration "
                    f"{WEBHOOK_CONFIGURATION}): apply it first with `kubectl apply -k "
                    "manifests/` (docs/install.md)"
                ) from None
            raise
        try:
            queues = await self.client.list(VOLCANO_QUEUES)
        except ApiError as e:
            if e.status == 404:
                raise DemoError(
                    "Volcano is not installed on this cluster (the scheduling.volcano.sh/v1beta1 "
                    "Queue API is not served): install Volcano first (docs/install.md)"
                ) from None
            raise
        names = [q["metadata"]["name"] for q in queues.get("items") or ()]
        if "default" not in names:
            raise DemoError(
                "Volcano has no `default` queue here (its scheduler makes one when it "
                "starts): is vc-scheduler running?"
            )
        nodes = (await self.client.list(NODES)).get("items") or []
        usable = [n for n in nodes if not (n.get("spec") or {}).get("unschedulable")]
        usable = [n for n in usable if not is_control_plane(n)] or usable
        with_gpus = [n for n in usable if allocatable_gpus(n) >= 8]
        if len(with_gpus) >= 3:
            self.nodes = sorted(n["metadata"]["name"] for n in with_gpus)[:3]
        elif self.add_gpus and len(usable) >= 3:
            self.nodes = sorted(n["metadata"]["name"] for n in usable)[:3]
            for name in self.nodes:
                await self._advertise_gpus(name, 8)
        else:
            raise DemoError(
                f"the story needs three schedulable nodes with 8 {GPU} each; this cluster "
                f"has {len(with_gpus)} such node(s) among {len(usable)} schedulable. On a "
                "cluster without GPUs (kind), `--add-gpus` advertises 8 pretend GPUs on three "
                "nodes for the length of the demo"
                + ("" if len(usable) >= 3 else " (it needs three schedulable nodes)")
            )
        busy = [
            p
            for p in (await self.client.list(PODS)).get("items") or ()
            if (p.get("spec") or {}).get("nodeName") in self.nodes
            and gpus_of(p)
            and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
        ]
        if busy:
            raise DemoError(
                f"{len(busy)} pod(s) already use GPUs on {', '.join(self.nodes)}: the story "
                "needs those nodes' GPUs free"
            )

    async def _advertise_gpus(self, node: str, count: int) -> None:
        await self.client.patch(
            NODES,
            node,
            {"status": {"capacity": {GPU: str(count)}}},
            content_type="application/merge-patch+json",
            subresource="status",
        )
        self.gpus_added.append(node)

    # --- the story ----------------------------------------------------------------------

    async def run(self) -> int:
        self.say(f"corral demo on {self.where}")
        await self.preflight()
        self.say(
            f"Nodes {', '.join(self.nodes)}: 8 GPUs each. Namespaces {self.plain_ns} "
            f"(not opted in) and {self.gang_ns} ({OPT_IN}=enabled)."
        )
        try:
            await self._namespaces()
            await self.partial_gang()
            await self.gang_waits()
            await self.fitting_gang()
            await self.make_room()
        finally:
            await self.cleanup()
        self.say()
        self.say("Done: every object the demo made is deleted.")
        return 0

    async def _namespaces(self) -> None:
        for ns, labels in ((self.plain_ns, {}), (self.gang_ns, {OPT_IN: "enabled"})):
            await self.client.create(
                NAMESPACES,
                {
                    "apiVersion": "v1",
                    "kind": "Namespace",
                    "metadata": {"name": ns, "labels": {"corral.dev/demo": "1", **labels}},
                },
            )

    async def partial_gang(self) -> None:
        self.step(
            1,
            "A pod-by-pod scheduler leaves a partial gang",
            "A training Job of 4 workers x 8 GPUs, in a namespace corral leaves alone: the "
            "default scheduler places each pod on its own.",
        )
        await self._create(job_manifest("train", self.plain_ns, 8, workers=4))
        pods = await self._wait(
            self.plain_ns,
            "train",
            lambda ps: len(ps) == 4 and len(bound_pods(ps)) == 3 and len(running_pods(ps)) == 3,
            "3 of the 4 workers bound and running",
        )
        self.say(self._pod_table(pods))
        self.say(
            "3 workers hold all 24 GPUs and wait for the 4th, which can never start: the "
            "partial gang corral exists to prevent."
        )
        await self._delete_job(self.plain_ns, "train")

    async def gang_waits(self) -> None:
        self.step(
            2,
            "Through corral's webhook and a gang scheduler, the gang waits whole",
            "The same Job in the opted-in namespace: corral's webhook gives it to Volcano "
            "as one gang (a PodGroup of minMember 4).",
        )
        job = await self._create(job_manifest("train", self.gang_ns, 8, workers=4))
        tmpl = job["spec"]["template"]
        self.say(
            f"Admitted as: schedulerName {tmpl['spec'].get('schedulerName')}, group "
            f"{(tmpl['metadata'].get('annotations') or {}).get(GROUP, '-')}"
        )
        pods = await self._wait(
            self.gang_ns, "train", lambda ps: len(ps) == 4, "the 4 workers created"
        )
        await self._podgroup_of(job, lambda pg: podgroup_phase(pg) in ("Pending", "Inqueue"))
        await asyncio.sleep(self.poll * 4)  # give a scheduler every chance to bind one
        pg = await self._podgroup_of(job, lambda pg: True)
        pods = await self._pods(self.gang_ns, "train")
        if bound_pods(pods):
            raise DemoError(f"{len(bound_pods(pods))} worker(s) of the gang were bound: not a gang")
        self.say(self._pod_table(pods))
        self.say(self._podgroup_table([pg]))
        self.say("No worker holds a GPU while the gang cannot start: the GPUs stay free.")
        await self._delete_job(self.gang_ns, "train")

    async def fitting_gang(self) -> None:
        self.step(
            3,
            "A gang that fits binds whole",
            "4 workers x 2 GPUs: Volcano binds them together.",
        )
        job = await self._create(job_manifest("pairs", self.gang_ns, 2, workers=4))
        pods = await self._wait(
            self.gang_ns,
            "pairs",
            lambda ps: len(running_pods(ps)) == 4,
            "the 4 workers running",
        )
        pg = await self._podgroup_of(job, lambda pg: podgroup_phase(pg) == "Running")
        self.say(self._pod_table(pods))
        self.say(self._podgroup_table([pg]))
        await self._delete_job(self.gang_ns, "pairs")

    async def make_room(self) -> None:
        self.step(
            4,
            "The descheduler makes room (7/6/7)",
            "1-GPU Jobs and three 4-GPU ones fill the nodes to 7, 6 and 7 GPUs: 4 GPUs are "
            "free, but no node has 4. A gang of 1 x 4 GPUs waits.",
        )
        n1, n2, n3 = self.nodes
        layout = [
            ("big-1", n1, 4), ("a1", n1, 1), ("a2", n1, 1), ("a3", n1, 1),
            ("big-2", n2, 4), ("b1", n2, 1), ("b2", n2, 1),
            ("big-3", n3, 4), ("c1", n3, 1), ("c2", n3, 1), ("c3", n3, 1),
        ]  # fmt: skip
        for name, node, gpus in layout:
            await self._place(job_manifest(name, self.gang_ns, gpus), node)
        self.say(self._node_table(await self._pods(self.gang_ns)))
        job = await self._create(job_manifest("wide", self.gang_ns, 4))
        await self._podgroup_of(job, lambda pg: podgroup_phase(pg) in ("Pending", "Inqueue"))
        await asyncio.sleep(self.poll * 2)
        if bound_pods(await self._pods(self.gang_ns, "wide")):
            raise DemoError("the 4-GPU gang was bound before any move: the layout is not 7/6/7")
        self.say("The 4-GPU gang `wide` waits. corral's descheduler, once:")
        # Every Job of the demo has the same priority (none): the defaults move equals
        # for the waiting gang as a consolidation, each placed again at once. The Jobs
        # are suspended, not evicted, and resumed once `wide` is bound.
        config = DeschedulerConfig(eviction=EvictionRules(included_namespaces=[self.gang_ns]))
        report = await self.descheduler(self.client, config, self.gang_ns)
        moved = moved_pods(report)
        self.say(
            f"  moved {len(moved)} pod(s): {', '.join(moved) or 'none'}"
            if moved
            else "  it moved nothing"
        )
        pods = await self._wait(
            self.gang_ns,
            "wide",
            lambda ps: len(running_pods(ps)) == 1,
            "the 4-GPU gang running",
        )
        await self._wait(
            self.gang_ns,
            None,
            lambda ps: len(running_pods(ps)) == len(layout) + 1,
            "every Job running again",
        )
        pods = await self._pods(self.gang_ns)
        self.say(self._node_table(pods))
        wide = [p for p in pods if job_of(p) == "wide"]
        self.say(
            f"`wide` runs on {(wide[0]['spec'] or {}).get('nodeName')}; the moved Jobs run "
            "again elsewhere."
        )

    # --- helpers ------------------------------------------------------------------------

    async def _create(self, job: Json) -> Json:
        return await self.client.create(JOBS, job, namespace=job["metadata"]["namespace"])

    async def _place(self, job: Json, node: str) -> None:
        """Create a 1-pod Job and wait until it runs on ``node``: the other nodes are
        tainted NoSchedule meanwhile (running pods are not touched by that)."""
        others = [n for n in self.nodes if n != node]
        for n in others:
            await self._taint(n, True)
        try:
            await self._create(job)
            await self._wait(
                self.gang_ns,
                job["metadata"]["name"],
                lambda ps: len(running_pods(ps)) == 1,
                f"{job['metadata']['name']} running on {node}",
            )
        finally:
            for n in others:
                await self._taint(n, False)

    async def _taint(self, node: str, on: bool) -> None:
        obj = await self.client.get(NODES, node)
        taints = [t for t in (obj.get("spec") or {}).get("taints") or () if t.get("key") != TAINT]
        if on:
            taints.append({"key": TAINT, "value": "true", "effect": "NoSchedule"})
            if node not in self.tainted:
                self.tainted.append(node)
        elif node in self.tainted:
            self.tainted.remove(node)
        await self.client.patch(
            NODES,
            node,
            {"spec": {"taints": taints or None}},
            content_type="application/merge-patch+json",
        )

    async def _pods(self, namespace: str, job: str | None = None) -> list[Json]:
        sel = f"job-name={job}" if job else None
        items = (await self.client.list(PODS, namespace=namespace, label_selector=sel)).get(
            "items"
        ) or []
        live = [p for p in items if not (p.get("metadata") or {}).get("deletionTimestamp")]
        return sorted(live, key=lambda p: p["metadata"]["name"])

    async def _wait(
        self,
        namespace: str,
        job: str | None,
        done: Callable[[list[Json]], bool],
        what: str,
    ) -> list[Json]:
        loop = asyncio.get_running_loop()
        end = loop.time() + self.timeout
        while True:
            pods = await self._pods(namespace, job)
            if done(pods):
                return pods
            if loop.time() > end:
                raise DemoError(
                    f"waited {self.timeout:.0f}s for {what}; pods now:\n{self._pod_table(pods)}"
                )
            await asyncio.sleep(self.poll)

    async def _podgroup_of(self, job: Json, done: Callable[[Json], bool]) -> Json:
        ns = job["metadata"]["namespace"]
        loop = asyncio.get_running_loop()
        end = loop.time() + self.timeout
        last: list[Json] = []
        while True:
            groups = (await self.client.list(VOLCANO_PODGROUPS, namespace=ns)).get("items") or []
            last = [
                g
                for g in groups
                if any(
                    r.get("uid") == job["metadata"]["uid"]
                    for r in g["metadata"].get("ownerReferences") or ()
                )
            ]
            if last and done(last[0]):
                return last[0]
            if loop.time() > end:
                raise DemoError(
                    f"waited {self.timeout:.0f}s for the PodGroup of Job "
                    f"{job['metadata']['name']}: {[podgroup_phase(g) for g in last] or 'none made'}"
                )
            await asyncio.sleep(self.poll)

    async def _delete_job(self, namespace: str, name: str) -> None:
        await self.client.delete(JOBS, name, namespace=namespace, propagation="Foreground")
        await self._wait(namespace, name, lambda ps: not ps, f"the pods of {name} gone")

    async def cleanup(self) -> None:
        """Everything the demo made or changed, undone (also after a failure)."""
        for n in list(self.tainted):
            with contextlib.suppress(ApiError):
                await self._taint(n, False)
        for ns in (self.gang_ns, self.plain_ns):
            with contextlib.suppress(ApiError):
                await self.client.delete(NAMESPACES, ns, propagation="Background")
        for n in self.gpus_added:
            with contextlib.suppress(ApiError):
                await self.client.patch(
                    NODES,
                    n,
                    {"status": {"capacity": {GPU: None}}},
                    content_type="application/merge-patch+json",
                    subresource="status",
                )
        self.gpus_added.clear()

    # --- tables -------------------------------------------------------------------------

    def _pod_table(self, pods: Sequence[Json]) -> str:
        rows = [
            [
                p["metadata"]["name"],
                str(gpus_of(p)),
                (p.get("spec") or {}).get("nodeName") or "-",
                (p.get("status") or {}).get("phase") or "-",
            ]
            for p in pods
        ]
        return table(["POD", "GPUS", "NODE", "PHASE"], rows)

    def _podgroup_table(self, groups: Sequence[Json]) -> str:
        rows = [
            [
                g["metadata"]["name"],
                str((g.get("spec") or {}).get("minMember", "-")),
                podgroup_phase(g) or "-",
                unschedulable_why(g),
            ]
            for g in groups
        ]
        return table(["PODGROUP", "MINMEMBER", "PHASE", "WHY"], rows)

    def _node_table(self, pods: Sequence[Json]) -> str:
        rows = []
        for node in self.nodes:
            here = [p for p in running_pods(list(pods)) if p["spec"].get("nodeName") == node]
            used = sum(gpus_of(p) for p in here)
            jobs = ", ".join(f"{job_of(p)}({gpus_of(p)})" for p in here)
            rows.append([node, f"{used}/8", str(8 - used), jobs or "-"])
        return table(["NODE", "GPUS USED", "FREE", "JOBS"], rows)


async def run_descheduler_once(
    client: KubeClient, config: DeschedulerConfig, namespace: str
) -> Json:
    """``corral-descheduler run --once`` in this process, with the user's credentials,
    evicting only in the demo's namespace."""
    from descheduler.api import RunOptions, run_descheduler

    out = io.StringIO()
    opts = RunOptions(once=True, output="json", lease_namespace=namespace, sync_timeout=60.0)
    code = await run_descheduler(opts, config, client=client, out=out, install_signals=False)
    text = out.getvalue().strip()
    doc: Json = json.loads(text) if text else {}
    if code != 0:
        raise DemoError(f"the descheduler exited with {code}: {text or 'no report'}")
    return doc
