"""Issue 26, the descheduler's part: a replay with no trace, warnings on a dump, and
config messages in the user's keys. Each case failed before the fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from gangplace.snapshot_io import load_list

from descheduler.cli import main

SAMPLE = load_list(None)


def test_simulate_with_no_trace_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("CORRAL_TRACE_DIR", raising=False)
    monkeypatch.setenv("CORRAL_DATA", str(tmp_path))  # a data folder without the trace
    assert main(["simulate", "--policy", "fgd", "--compare"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (
        "corral-descheduler simulate: pod list 'default': no trace folder to look in (use a "
        "path, or set $CORRAL_DATA; `make data` gets it)\n"
    )


def test_plan_warns_of_pods_on_nodes_missing_from_the_dump(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = json.loads(json.dumps(SAMPLE))
    pod = next(x for x in doc["items"] if x["kind"] == "Pod" and x["spec"].get("nodeName"))
    pod["spec"]["nodeName"] = "ghost-node"
    f = tmp_path / "dump.json"
    f.write_text(json.dumps(doc))
    assert main(["plan", "--snapshot", str(f)]) == 0
    err = capsys.readouterr().err
    name = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
    assert err == (
        f"corral-descheduler: warning: {f}: 1 pod(s) bound to a node that is not in the dump, "
        f"left out of the figures: {name} on ghost-node (dump nodes and pods together: "
        "kubectl get nodes,pods -A -o json)\n"
    )


def test_plan_refuses_an_empty_list(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "dump.json"
    f.write_text('{"apiVersion": "v1", "kind": "List", "items": []}')
    assert main(["plan", "--snapshot", str(f)]) == 2
    assert "the List is empty: nothing to measure or place on" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "eviction: {excluded_namespaces: kube-system}\n",
            'eviction.excluded_namespaces: "kube-system" is not a list; allowed: a list, such '
            "as [kube-system]",
        ),
        (
            "limits: {max_evictions_per_run: -1}\n",
            "limits.max_evictions_per_run: -1 is too small; allowed: a number >= 0",
        ),
        (
            "scheduling: {policy: fdg}\n",
            'scheduling.policy: "fdg" is not a placement policy; allowed: dotprod, '
            "gpuclustering, gpupacking, bestfit, fgd, binpack, spread, corral",
        ),
        (
            "scheduling: {policy: random}\n",
            'scheduling.policy: "random" draws from a trace replay\'s random stream, which '
            "this placement has not; allowed: dotprod, gpuclustering, gpupacking, bestfit, "
            "fgd, binpack, spread, corral",
        ),
        (
            "limits: {max_evictions_per_run: 3, max_evictions_per_node: x}\n",
            'limits.max_evictions_per_node: "x" is not a whole number; allowed: a whole '
            "number, such as 4",
        ),
    ],
)
def test_config_messages_are_one_line_in_the_users_keys(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, message: str
) -> None:
    f = tmp_path / "c.yaml"
    f.write_text(text)
    assert main(["plan", "--config", str(f)]) == 2
    assert capsys.readouterr().err == f"corral-descheduler: config {f}: {message}\n"
