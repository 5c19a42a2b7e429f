"""kubectl corral for an admin's second day: explain on a gang blocked by scattered idle
GPUs (how many, where, what ``frag --plan`` would move for it, about the pod asked),
``gangs`` telling gangs that compete for the same room from those that can all start,
warnings as ``warning:`` lines, and tables that fit 100 columns on real GPU labels and
big dumps."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

import yaml

from kubectl_corral.cli import run
from tests.kubeapi import ApiServer
from tests.kubeapi import objects as o
from tests.plugin.scattered_cluster import scattered, waiting_gang, write_dump


def corral(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = asyncio.run(run(list(argv), out, err, {"KUBECONFIG": "/nonexistent/kubeconfig"}))
    return code, out.getvalue(), err.getvalue()


def test_explain_says_idle_gpus_are_scattered_and_what_the_plan_would_move(
    tmp_path: Path,
) -> None:
    dump = write_dump(tmp_path / "dump.json", scattered())
    code, out, err = corral("explain", "bert-ft-1", "-n", "ml", "--snapshot", str(dump))
    assert (code, err) == (0, ""), err
    # the pod asked about, not its first sibling
    assert "0/7 nodes can host pod bert-ft-1: 7 insufficient nvidia.com/gpu" in out
    assert "bert-ft-0" not in out
    text = " ".join(out.split())  # the new fields are wrapped at 100 columns
    assert (
        "Idle GPUs: 12 GPUs idle on 4 nodes its members may use, enough for the 8 GPUs it "
        "needs, but scattered: at most 3 on one node, where a member needs 4 GPUs "
        "gpu-0 3, gpu-1 3, gpu-2 3, gpu-3 3"
    ) in text
    # the plan frag --plan makes, for this gang: two 1-GPU Jobs suspended, then it starts
    _, plan_out, _ = corral("frag", "--plan", "--snapshot", str(dump), "-o", "json")
    moves = [m for m in json.loads(plan_out)["plan"]["moves"] if m["for_gang"] == "ml/bert-ft"]
    assert len(moves) == 2
    assert "Making room: kubectl corral frag --plan would move 2 unit(s) for it, 2 GPUs " in text
    assert "disrupted; then it starts:" in text
    for m in moves:
        pod = m["pods"][0]
        line = f"suspend {m['workloads'][0]}: {pod['name']} {pod['node']} -> {pod['target']}"
        assert line in out
    assert max(len(x) for x in out.splitlines() if not x.startswith("  Verdict:")) <= 100
    code, out, _ = corral("explain", "bert-ft-1", "-n", "ml", "--snapshot", str(dump), "-o", "json")
    doc = json.loads(out)
    assert doc["scattered"]["idle"] == 12 and doc["scattered"]["largest_piece"] == 3
    assert doc["room"]["starts_after"] is True and len(doc["room"]["moves"]) == 2


def test_explain_when_the_plan_cannot_help(tmp_path: Path) -> None:
    """Every running pod full-node: nothing is idle, nothing scattered, and the plan's
    own reason why it moves nothing for the gang."""
    dump = write_dump(tmp_path / "dump.json", scattered(partly_idle=0))
    code, out, _ = corral("explain", "bert-ft-0", "-n", "ml", "--snapshot", str(dump))
    assert code == 0
    assert "Idle GPUs:" not in out
    line = next(x for x in out.splitlines() if x.startswith("  Making room:"))
    assert line.startswith("  Making room:  kubectl corral frag --plan would move nothing for it: ")


def test_gangs_that_fit_alone_but_compete_for_the_same_room(tmp_path: Path) -> None:
    """Four nodes with 3 GPUs idle each and six 1-pod gangs of 3 GPUs: each fits alone,
    four can start together, the last two compete with them."""
    gangs = [x for i in range(6) for x in waiting_gang(f"g{i}", 1, 3)]
    dump = write_dump(tmp_path / "dump.json", scattered(gangs=gangs))
    code, out, _ = corral("gangs", "-n", "ml", "--snapshot", str(dump), "-o", "json")
    assert code == 0
    rows = {g["name"]: g for g in json.loads(out)["gangs"]}
    assert [rows[f"g{i}"]["status"] for i in range(6)] == ["can-start"] * 4 + ["competing"] * 2
    first = [f"ml/g{i}" for i in range(4)]
    assert rows["g4"]["competes_with"] == first
    assert rows["g0"]["competes_with"] == ["ml/g4", "ml/g5"]
    _, out, _ = corral("gangs", "-n", "ml", "--snapshot", str(dump))
    assert (
        "ml/g5: its 1 member(s) fit now alone, but not once ml/g0, ml/g1, ml/g2, ml/g3, served "
        "before it, start: they compete for gpu-0, gpu-1, gpu-2, gpu-3"
    ) in out
    assert "ml/g4, ml/g5, served after it, compete with it for the same room" in out
    # the blocked gang points at explain for its scattered GPUs
    assert (
        "bert-ft: 0/2 required members fit; 0/7 nodes can host pod bert-ft-0: 7 insufficient "
        "nvidia.com/gpu; 12 GPUs idle where its members may go, but scattered (at most 3 on one "
        "node): explain one of its pods for where, and what frag --plan would move\n"
    ) in out
    # gangs that fit together are all can-start, with nobody to compete with
    dump = write_dump(tmp_path / "dump2.json", scattered(gangs=gangs[:4]))
    _, out, _ = corral("gangs", "-n", "ml", "--snapshot", str(dump), "-o", "json")
    rows = {g["name"]: g for g in json.loads(out)["gangs"]}
    assert {(rows[f"g{i}"]["status"], len(rows[f"g{i}"]["competes_with"])) for i in range(2)} == {
        ("can-start", 0)
    }


def test_what_was_left_out_is_a_warning_line(tmp_path: Path) -> None:
    items = [*scattered(), o.pod("stray", "ml", node="gone-node", gpus=1)]
    dump = write_dump(tmp_path / "dump.json", items)
    for command in ("gangs", "frag"):
        code, _, err = corral(command, "--snapshot", str(dump))
        assert code == 0
        assert err, "the dump's pod on a missing node is left out, and said so"
        assert all(line.startswith("kubectl corral: warning: ") for line in err.splitlines())


def test_the_gpu_model_column_fits_real_labels(tmp_path: Path) -> None:
    model = "NVIDIA-A100-SXM4-80GB"
    dump = write_dump(tmp_path / "dump.json", scattered(model=model))
    code, out, _ = corral("frag", "--plan", "--snapshot", str(dump))
    assert code == 0
    lines = out.splitlines()
    head = next(x for x in lines if x.startswith("GPU model "))
    row = next(x for x in lines if x.startswith(model))
    # the figures sit under their headings: the label did not push them right
    assert len(row) == len(head) <= 100 and row.index(" 7 ") < head.index("GPUs")
    assert lines[lines.index(head) + 1] == "-" * len(head)
    compare = next(x for x in lines if x.startswith("GPU model") and "fragmented before" in x)
    after = lines[lines.index(compare) + 1]
    assert after.startswith(model + " ") and len(after) == len(compare) <= 100
    worst = next(x for x in lines if x.startswith("  gpu-0 "))
    assert worst.startswith(f"  gpu-0{' ' * 20}{model} 8 GPUs, idle 3") and len(worst) <= 100
    # a label longer than any table can hold keeps its start and end
    long = "NVIDIA-GeForce-RTX-4090-Laptop-GPU-with-a-very-long-product-label"
    dump = write_dump(tmp_path / "dump2.json", scattered(model=long))
    _, out, _ = corral("frag", "--snapshot", str(dump))
    row = next(x for x in out.splitlines() if x.startswith("NVIDIA-GeForce"))
    assert len(row) <= 100 and "~" in row and "-label " in row


def test_long_lists_of_waiting_gangs_are_cut_with_a_count(tmp_path: Path) -> None:
    gangs = [x for i in range(230) for x in waiting_gang(f"huge-{i:03d}", 1, 16)]
    dump = write_dump(tmp_path / "dump.json", scattered(gangs=gangs))
    code, out, _ = corral("frag", "--plan", "--snapshot", str(dump))
    assert code == 0
    lines = out.splitlines()
    waiting = [i for i, x in enumerate(lines) if x.startswith("Waiting gangs that cannot start")]
    block = lines[waiting[0] : waiting[1]]
    assert len(block) <= 6 and all(len(x) <= 100 for x in block)
    text = " ".join(" ".join(block).split())
    assert text.startswith("Waiting gangs that cannot start now: ml/bert-ft, ml/huge-000, ")
    assert text.endswith("ml/huge-018 and 211 more (231 in all; --output json lists all)")
    # the gangs the plan cannot help: one line per reason, the gangs cut with a count
    start = lines.index("Waiting gangs the plan cannot help (230):")
    end = lines.index("", start)
    assert end - start <= 13
    assert lines[start + 1].startswith("  ml/huge-000, ml/huge-001, ml/huge-002 and ")
    counted = [int(x.split(" and ")[1].split()[0]) + 3 for x in lines[start + 1 : end]]
    assert sum(counted) == 230
    code, out, _ = corral("frag", "--plan", "--snapshot", str(dump), "-o", "json")
    assert len(json.loads(out)["plan"]["waiting_gangs_before"]) == 231
    assert len(json.loads(out)["plan"]["unserved"]) == 230


def test_the_docs_samples_on_these_dumps_are_what_it_prints(tmp_path: Path) -> None:
    """docs/kubectl-corral.md's ``console`` samples run on the dumps built here."""
    import re
    import shlex

    gangs = [x for i in range(1, 6) for x in waiting_gang(f"g{i}", 1, 3)]
    dumps = {"scattered.json": scattered(), "competing.json": scattered(gangs=gangs)}
    doc = (Path(__file__).resolve().parents[2] / "docs" / "kubectl-corral.md").read_text()
    samples = re.findall(r"```console\n\$ (kubectl corral .*?)\n(.*?)```", doc, re.S)
    assert {shlex.split(cmd)[-1] for cmd, _ in samples} == set(dumps)
    for cmd, want in samples:
        argv = shlex.split(cmd)[2:]
        argv[-1] = str(write_dump(tmp_path / argv[-1], dumps[argv[-1]]))
        code, out, err = corral(*argv)
        assert (code, err) == (0, "")
        assert out == want, cmd


async def test_explain_on_a_live_cluster_says_what_it_says_on_its_dump(
    api: ApiServer, tmp_path: Path
) -> None:
    """The same objects served by the API server: explain reads the whole cluster, as
    frag --plan does, and answers as it does on the dump."""
    items = scattered()
    api.store.load(items)
    api.accept("t0ken")
    kc = tmp_path / "kubeconfig"
    kc.write_text(
        yaml.safe_dump(
            {
                "clusters": [{"name": "c", "cluster": {"server": api.url}}],
                "users": [{"name": "u", "user": {"token": "t0ken"}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "c",
            }
        )
    )
    out, err = io.StringIO(), io.StringIO()
    argv = ["explain", "bert-ft-1", "-n", "ml", "--kubeconfig", str(kc)]
    assert await run(argv, out, err, environ={}) == 0, err.getvalue()
    dump = write_dump(tmp_path / "dump.json", items)
    loop = asyncio.get_running_loop()
    _, want, _ = await loop.run_in_executor(
        None, lambda: corral("explain", "bert-ft-1", "-n", "ml", "--snapshot", str(dump))
    )
    assert "Making room:  kubectl corral frag --plan would move 2 unit(s)" in out.getvalue()
    assert out.getvalue() == want


def test_explain_names_the_pods_the_plan_evicts_for_the_gang() -> None:
    """On the bundled sample, room for research/llm-finetune is made by evicting pods of
    no gang: each is named with where it goes, as in the plan."""
    args = ("--snapshot", "sample:small")
    _, plan_out, _ = corral("frag", "--plan", *args, "-o", "json")
    moves = [
        m for m in json.loads(plan_out)["plan"]["moves"] if m["for_gang"] == "research/llm-finetune"
    ]
    assert moves and all(m["gang"] is None and m["method"] == "evict" for m in moves)
    code, out, _ = corral("explain", "llm-finetune-0", "-n", "research", *args)
    assert code == 0
    assert "scattered: at most 2 on one node, where a member needs 4 GPUs" in out
    for m in moves:
        p = m["pods"][0]
        assert f"evict pod research/{p['name']}: {p['node']} -> {p['target']}\n" in out


def test_scattered_gpus_with_room_for_some_members(tmp_path: Path) -> None:
    """One node with 4 GPUs idle, three with 3: 13 idle, room for one 4-GPU member of
    the two it needs."""
    items = [x for x in scattered() if "s-0" not in x["metadata"]["name"]]
    dump = write_dump(tmp_path / "dump.json", items)
    code, out, _ = corral("explain", "bert-ft-0", "-n", "ml", "--snapshot", str(dump))
    assert code == 0
    text = " ".join(out.split())
    assert (
        "Idle GPUs: 13 GPUs idle on 4 nodes its members may use, enough for the 8 GPUs it "
        "needs, but scattered: at most 4 on one node, where a member needs 4 GPUs: room for 1 "
        "of the 2 members it needs gpu-0 4, gpu-1 3, gpu-2 3, gpu-3 3"
    ) in text
