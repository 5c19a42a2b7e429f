"""Junk fed to every command that reads a file (issue 26): truncated dumps, configs and
fixtures, wrong types, huge and negative numbers, YAML where JSON is expected, binary
bytes. Whatever the input, a command returns (no traceback), never says "internal
error", writes each problem on one line naming the command, and ends with a documented
exit code; input that cannot be used ends with 2, never 0.

The commands run in process (``main([...])``), so hundreds of inputs take seconds;
tests/engine/test_new_user.py runs a few as processes for ``| head``.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import io
import json
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from gangplace.cli import main as gangplace_main
from gangplace.snapshot_io import load_list
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from descheduler.cli import main as descheduler_main
from kubectl_corral.cli import run as kubectl_run
from tests.builders.reviews import fixture
from webhook.cli import main as webhook_main

SAMPLE: dict[str, Any] = load_list(None)
SAMPLE_TEXT = json.dumps(SAMPLE, indent=1)
REVIEW_TEXT = json.dumps(fixture("pod-create-plain-cpu.json"), indent=1)
WEBHOOK_CONFIG = 'backend: volcano\ndefaultMinAvailable: {"*": "80%"}\ngangTimeout: 30m\n'
DESCHEDULER_CONFIG = "limits: {max_evictions_per_run: 4}\neviction: {cooldown: 1h}\n"
NODES_CSV = "sn,cpu_milli,memory_mib,gpu,model\nn1,96000,786432,8,A100\nn2,64000,262144,2,T4\n"
PODS_CSV = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,creation_time,deletion_time\n"
    "p1,8000,32768,1,1000,,0,100\np2,4000,16384,1,500,,10,50\n"
)
SETTINGS = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@dataclass(frozen=True)
class Outcome:
    code: int
    out: str
    err: str


def _call(main: Callable[[list[str]], int], argv: list[str]) -> Outcome:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)  # an exception here fails the test: that is the traceback
    return Outcome(code, out.getvalue(), err.getvalue())


def _kubectl(argv: list[str]) -> int:
    return asyncio.run(
        kubectl_run(argv, environ={"KUBECONFIG": "/nonexistent"}, out=io.StringIO(), err=_ERR[0])
    )


_ERR: list[io.StringIO] = [io.StringIO()]


def _kubectl_call(argv: list[str]) -> Outcome:
    _ERR[0] = io.StringIO()
    out = _call(_kubectl, argv)
    return Outcome(out.code, out.out, out.err + _ERR[0].getvalue())


# Each command that reads a file: (name, prog, how to run it on FILE, what FILE is).
Runner = Callable[[Path], Outcome]


def _commands() -> dict[str, dict[str, Runner]]:
    g, d, w = gangplace_main, descheduler_main, webhook_main
    serve = ["serve", "--tls-cert-file", "/nonexistent.crt", "--tls-key-file", "/nonexistent"]
    return {
        "dump": {
            "gangplace report": lambda f: _call(g, ["report", "--snapshot", str(f)]),
            "gangplace place": lambda f: _call(g, ["place", "--pods", "2", "--snapshot", str(f)]),
            "corral-descheduler plan": lambda f: _call(d, ["plan", "--snapshot", str(f)]),
            "corral-webhook serve --cluster-file": lambda f: _call(
                w, [*serve, "--cluster-file", str(f)]
            ),
            "kubectl corral gangs": lambda f: _kubectl_call(["gangs", "-A", "--snapshot", str(f)]),
            "kubectl corral frag": lambda f: _kubectl_call(
                ["frag", "--plan", "--snapshot", str(f)]
            ),
            "kubectl corral explain": lambda f: _kubectl_call(
                ["explain", "x", "--snapshot", str(f)]
            ),
        },
        "webhook config": {
            "corral-webhook serve --config": lambda f: _call(w, [*serve, "--config", str(f)]),
        },
        "descheduler config": {
            "corral-descheduler plan --config": lambda f: _call(
                d, ["plan", "--snapshot", "sample:small", "--config", str(f)]
            ),
            "kubectl corral frag --config": lambda f: _kubectl_call(
                ["frag", "--snapshot", "sample:small", "--config", str(f)]
            ),
        },
        "fixture": {
            "corral-webhook demo": lambda f: _call(w, ["demo", "--fixtures", str(f.parent)]),
        },
        "nodes csv": {
            "gangplace simulate --nodes": lambda f: _call(
                g, ["simulate", "--nodes", str(f), "--pods", str(f.parent / "pods.csv")]
            ),
        },
        "pods csv": {
            "gangplace simulate --pods": lambda f: _call(
                g, ["simulate", "--nodes", str(f.parent / "nodes.csv"), "--pods", str(f)]
            ),
        },
    }


COMMANDS = _commands()
PROGS = ("gangplace", "corral-descheduler", "corral-webhook", "kubectl corral")


def _check(outcome: Outcome, unusable: bool, what: str) -> None:
    assert "internal error" not in outcome.err, f"{what}: {outcome.err}"
    assert "Traceback" not in outcome.err, f"{what}: {outcome.err}"
    assert outcome.code in (0, 1, 2), f"{what}: exit {outcome.code}"
    for line in outcome.err.splitlines():
        assert line.startswith(PROGS), f"{what}: {line!r}"
    if unusable:
        assert outcome.code == 2, f"{what}: exit {outcome.code}, stderr {outcome.err!r}"
        problems = [x for x in outcome.err.splitlines() if "warning:" not in x]
        assert len(problems) == 1, f"{what}: {outcome.err!r}"


def _run_all(kind: str, content: bytes, unusable: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "nodes.csv").write_text(NODES_CSV)
        (folder / "pods.csv").write_text(PODS_CSV)
        name = {"nodes csv": "nodes.csv", "pods csv": "pods.csv", "fixture": "review.json"}
        f = folder / name.get(kind, "input")
        f.write_bytes(content)
        for what, runner in COMMANDS[kind].items():
            _check(runner(f), unusable, f"{what} on {content[:80]!r}")


# --- junk -------------------------------------------------------------------------

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=False)
    | st.text(max_size=12)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
numbers = st.one_of(
    st.integers(min_value=-(10**40), max_value=10**40).map(str),
    st.sampled_from(["-1", "1e400", "9" * 400, "1.5", "-0.5Gi", "NaN", "", "0x10", "1Ei"]),
)


def _truncated(text: str) -> st.SearchStrategy[bytes]:
    return st.integers(min_value=0, max_value=len(text) - 2).map(lambda n: text[:n].encode())


def _mutated_dump(draw: st.DrawFn) -> bytes:
    """The sample dump with one field of one object replaced by junk."""
    doc = copy.deepcopy(SAMPLE)
    item = draw(st.sampled_from(doc["items"]))
    where = draw(st.sampled_from(["metadata", "spec", "status", "quantity", "labels", "item"]))
    junk = draw(json_values)
    if where == "quantity" and item["kind"] == "Node":
        alloc = item["status"].setdefault("allocatable", {})
        alloc[draw(st.sampled_from(["cpu", "memory", "pods", "nvidia.com/gpu"]))] = draw(numbers)
    elif where == "quantity" and item["kind"] == "Pod":
        c = item["spec"]["containers"][0].setdefault("resources", {}).setdefault("requests", {})
        c[draw(st.sampled_from(["cpu", "memory", "nvidia.com/gpu"]))] = draw(numbers)
    elif where == "labels":
        item["metadata"]["labels"] = junk
    elif where == "item":
        doc["items"][doc["items"].index(item)] = junk
    else:
        item[where] = junk
    return json.dumps(doc).encode()


@st.composite
def mutated_dumps(draw: st.DrawFn) -> bytes:
    return _mutated_dump(draw)


unusable_dumps = st.one_of(
    _truncated(SAMPLE_TEXT),
    st.binary(min_size=1, max_size=64).filter(lambda b: b.strip() != b""),
    st.just(yaml.safe_dump(SAMPLE).encode()),
    json_values.filter(lambda v: not isinstance(v, dict)).map(lambda v: json.dumps(v).encode()),
    json_values.filter(lambda v: not isinstance(v, list)).map(
        lambda v: json.dumps({"apiVersion": "v1", "kind": "List", "items": v}).encode()
    ),
    st.lists(json_values.filter(lambda v: not isinstance(v, dict)), max_size=3).map(
        lambda v: json.dumps({"apiVersion": "v1", "kind": "List", "items": v}).encode()
    ),
)


@given(unusable_dumps)
@SETTINGS
def test_unusable_dumps_are_refused_by_every_command(content: bytes) -> None:
    _run_all("dump", content, unusable=True)


@given(mutated_dumps())
@SETTINGS
def test_odd_fields_in_a_dump_never_crash_a_command(content: bytes) -> None:
    _run_all("dump", content, unusable=False)


def _config_junk(valid: str) -> st.SearchStrategy[bytes]:
    keys = [line.split(":")[0] for line in valid.splitlines()]
    return st.one_of(
        _truncated(valid).filter(lambda b: b.strip() != b"" and b"\n" not in b[-1:]),
        st.builds(lambda k, v: yaml.safe_dump({k: v}).encode(), st.sampled_from(keys), json_values),
        st.binary(min_size=1, max_size=64),
        json_values.filter(lambda v: not isinstance(v, dict) and v is not None).map(
            lambda v: yaml.safe_dump(v).encode()
        ),
        st.builds(
            lambda k: yaml.safe_dump({k: 1}).encode(), st.text(min_size=1, max_size=10)
        ).filter(lambda b: b.split(b":")[0] not in {k.encode() for k in keys}),
    )


@given(_config_junk(WEBHOOK_CONFIG))
@SETTINGS
def test_webhook_config_junk(content: bytes) -> None:
    # Usable or not, serve ends with 2 here (its certificate files do not exist), on
    # one line; a config that cannot be used is the line's subject.
    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / "webhook.yaml"
        f.write_bytes(content)
        for what, runner in COMMANDS["webhook config"].items():
            _check(runner(f), True, f"{what} on {content[:80]!r}")


@given(_config_junk(DESCHEDULER_CONFIG))
@SETTINGS
def test_descheduler_config_junk(content: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / "descheduler.yaml"
        f.write_bytes(content)
        for what, runner in COMMANDS["descheduler config"].items():
            outcome = runner(f)
            _check(outcome, False, f"{what} on {content[:80]!r}")
            if outcome.code == 0:  # it was a usable config after all: it loads alone
                from descheduler.config import load_config

                load_config(f)


@given(
    st.one_of(
        _truncated(REVIEW_TEXT),
        st.binary(min_size=1, max_size=64),
        json_values.map(lambda v: json.dumps(v).encode()),
    )
)
@SETTINGS
def test_demo_fixture_junk(content: bytes) -> None:
    _run_all("fixture", content, unusable=True)


def _csv_junk(valid: str) -> st.SearchStrategy[bytes]:
    """Rows of huge, negative, fractional and non-numbers under the right header, or
    the file cut anywhere: some of these are usable (a row with small numbers)."""
    header = valid.splitlines()[0]
    width = len(header.split(","))
    return st.one_of(
        _truncated(valid),
        st.lists(numbers, min_size=width, max_size=width).map(
            lambda cells: f"{header}\n{','.join(c.replace(',', '') for c in cells)}\n".encode()
        ),
    )


csv_unusable = st.one_of(
    st.binary(min_size=1, max_size=64),
    st.just(b"a,b,c\n1,2,3\n"),
    st.just(b""),
)


@given(_csv_junk(NODES_CSV))
@SETTINGS
def test_node_list_junk(content: bytes) -> None:
    _run_all("nodes csv", content, unusable=False)


@given(_csv_junk(PODS_CSV))
@SETTINGS
def test_pod_list_junk(content: bytes) -> None:
    _run_all("pods csv", content, unusable=False)


@given(csv_unusable, st.sampled_from(["nodes csv", "pods csv"]))
@SETTINGS
def test_trace_files_that_are_no_csv_are_refused(content: bytes, kind: str) -> None:
    _run_all(kind, content, unusable=True)
