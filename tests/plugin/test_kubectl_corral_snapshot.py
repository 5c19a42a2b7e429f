"""kubectl corral on a dump file (``--snapshot``), no cluster: the same reader and state
as ``corral-descheduler plan --snapshot``, so the two agree on the same file (issue 26:
before, the plugin read only a live cluster)."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

import pytest
from gangplace.snapshot_io import load_list

from descheduler.cli import main as descheduler_main
from kubectl_corral.cli import run


def corral(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    env = {"KUBECONFIG": "/nonexistent/kubeconfig"}  # nothing to connect to
    code = asyncio.run(run(list(argv), out, err, env))
    return code, out.getvalue(), err.getvalue()


def test_frag_plan_on_a_dump_is_the_descheduler_plan(capsys: pytest.CaptureFixture[str]) -> None:
    assert descheduler_main(["plan", "--snapshot", "sample:small", "--output", "json"]) == 0
    expected = json.loads(capsys.readouterr().out)
    code, out, err = corral("frag", "--plan", "--snapshot", "sample:small", "-o", "json")
    assert (code, err) == (0, "")
    assert json.loads(out)["plan"] == expected


def test_gangs_on_a_dump(tmp_path: Path) -> None:
    code, out, _ = corral("gangs", "-A", "--snapshot", "sample:small", "-o", "json")
    assert code == 0
    gangs = {(g["namespace"], g["name"]): g for g in json.loads(out)["gangs"]}
    assert gangs[("research", "llm-finetune")]["status"] == "blocked"
    code, out, _ = corral("gangs", "-n", "training", "--snapshot", "sample:small")
    assert code == 0 and "NAMESPACE" not in out and "pretrain" in out and "mpi-stale" not in out


def test_explain_on_a_dump_says_what_the_dump_lacks() -> None:
    code, out, _ = corral(
        "explain", "llm-finetune-0", "-n", "research", "--snapshot", "sample:small"
    )
    assert code == 0
    assert "Pod research/llm-finetune-0 (Pending)" in out
    assert "namespace research is not in the dump; add namespaces to the dump" in out
    code, _, err = corral("explain", "nope", "-n", "research", "--snapshot", "sample:small")
    assert code == 1
    assert err == 'kubectl corral: pod "nope" not found in namespace research in the dump\n'


def test_explain_reads_the_namespace_label_from_the_dump(tmp_path: Path) -> None:
    doc = load_list(None)
    doc["items"].append(
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": "ml", "labels": {"corral.dev/gang-scheduling": "enabled"}},
        }
    )
    pod = next(x for x in doc["items"] if x["kind"] == "Pod")
    pod["metadata"]["namespace"] = "ml"
    f = tmp_path / "dump.json"
    f.write_text(json.dumps(doc))
    code, out, _ = corral("explain", pod["metadata"]["name"], "-n", "ml", "--snapshot", str(f))
    assert code == 0 and "Namespace:    opted in" in out


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ("", "not JSON"),
        ("apiVersion: v1\nkind: List\nitems: []\n", "not JSON (it looks like YAML)"),
        ('{"kind": "List", "items": []}', "the List is empty"),
    ],
)
def test_a_dump_that_cannot_be_used_is_exit_2(tmp_path: Path, content: str, says: str) -> None:
    f = tmp_path / "dump.json"
    f.write_text(content)
    for command in ("gangs", "frag"):
        code, out, err = corral(command, "--snapshot", str(f))
        assert (code, out) == (2, "")
        assert err.startswith(f"kubectl corral: {f}: ") and says in err and err.count("\n") == 1
