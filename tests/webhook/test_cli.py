"""``corral-webhook``: the demo a newcomer runs, ``serve`` as a process (JSON logs,
real TLS, SIGTERM), and usage errors that say what to change."""

from __future__ import annotations

import datetime as dt
import http.client
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509

from tests.builders.reviews import fixture
from webhook.admission.review import decode_patch
from webhook.cli import main
from webhook.review_demo import find_fixtures
from webhook.tls.certificates import new_bundle
from webhook.tls.contexts import client_context

CLI = [sys.executable, "-m", "webhook.cli"]


def test_demo(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "https://127.0.0.1:" in out
    for name in (
        "job-create-mpi-train.json",
        "pod-create-from-job-mpi-train.json",
        "pod-create-llm-worker-0.json",
        "pod-create-plain-cpu.json",
        "pod-create-dry-gpu-dryrun.json",
    ):
        assert name in out
    assert "replace  /spec/template/spec/schedulerName" in out
    assert "/spec/template/metadata/annotations/scheduling.k8s.io~1group-name" in out
    assert "PodGroup   scheduling.volcano.sh/v1beta1 ml/job-mpi-train: minMember 3" in out
    assert 'refused (allowed: false): corral.dev/min-available: "abc"' in out
    assert "can never start on this cluster" in out


def test_demo_falls_back_to_the_bundled_fixtures(tmp_path: Path) -> None:
    assert find_fixtures(tmp_path) == tmp_path
    bundled = Path(__file__).resolve().parents[2] / "webhook" / "fixtures"
    assert sorted(p.name for p in bundled.glob("*.json")) == sorted(
        p.name for p in find_fixtures().glob("*.json")
    )
    for p in bundled.glob("*.json"):  # the copies are exact
        assert json.loads(p.read_text()) == fixture(p.name)


def test_demo_with_an_empty_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--fixtures", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (
        f"corral-webhook: --fixtures {tmp_path}: no AdmissionReview *.json files in it\n"
    )


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["serve", "--no-cluster"], "give --tls-cert-file and --tls-key-file, or --self-signed"),
        (["serve", "--self-signed", "--kubeconfig", "/nope"], "--kubeconfig /nope: no such file"),
        (["serve", "--no-cluster", "--tls-cert-file", "x"], "go together"),
        (
            [
                "serve",
                "--no-cluster",
                "--self-signed",
                "--tls-cert-file",
                "a",
                "--tls-key-file",
                "b",
            ],
            "exclude each other",
        ),
        (
            [
                "serve",
                "--no-cluster",
                "--tls-cert-file",
                "/nope.crt",
                "--tls-key-file",
                "/nope.key",
            ],
            "--tls-cert-file/--tls-key-file",
        ),
        (["serve", "--self-signed", "--cluster-file", "/nope.json"], "/nope.json"),
    ],
)
def test_usage_errors(argv: list[str], fragment: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    assert fragment in capsys.readouterr().err


def test_config_errors_name_the_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("backend: volcano\ninfeasible: maybe\n")
    assert main(["serve", "--no-cluster", "--self-signed", "--config", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert str(cfg) in err and "infeasible" in err


def _start(args: list[str]) -> tuple[subprocess.Popen[str], int, list[dict[str, Any]]]:
    proc = subprocess.Popen(
        [*CLI, "serve", "--host", "127.0.0.1", "--port", "0", "--shutdown-delay", "0", *args],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert proc.stderr is not None
    logs: list[dict[str, Any]] = []
    # Generous: on a loaded 2-core machine the start alone has taken over 20 s.
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        entry = json.loads(line)  # every log line is one JSON object
        logs.append(entry)
        if entry["msg"] == "serving":
            return proc, int(entry["address"].rsplit(":", 1)[1]), logs
    code = proc.poll()
    proc.kill()
    raise AssertionError(f"server did not start (exit code {code}): {logs}")


def _stop(proc: subprocess.Popen[str], logs: list[dict[str, Any]]) -> None:
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(20) == 0
    assert proc.stderr is not None
    logs.extend(json.loads(line) for line in proc.stderr.read().splitlines() if line)
    assert [e["msg"] for e in logs][-2:] == ["signal received; shutting down", "stopped"]


def _post(port: int, ctx: ssl.SSLContext, body: dict[str, Any]) -> tuple[int, Any]:
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=10)
    try:
        conn.request("POST", "/mutate", json.dumps(body), {"Content-Type": "application/json"})
        r = conn.getresponse()
        return r.status, json.loads(r.read())
    finally:
        conn.close()


@pytest.mark.slow
def test_serve_with_certificate_files(tmp_path: Path) -> None:
    b = new_bundle("corral-webhook", "corral-system", dt.datetime.now(dt.UTC), ips=["127.0.0.1"])
    (tmp_path / "tls.crt").write_bytes(b.cert)
    (tmp_path / "tls.key").write_bytes(b.key)
    proc, port, logs = _start(
        [
            "--no-cluster",
            "--tls-cert-file",
            str(tmp_path / "tls.crt"),
            "--tls-key-file",
            str(tmp_path / "tls.key"),
        ]
    )
    try:
        assert logs[-1]["backend"] == "volcano" and logs[-1]["cluster"] == "NoCluster"
        status, doc = _post(port, client_context(b.ca_cert), fixture("job-create-mpi-train.json"))
        assert status == 200 and decode_patch(doc["response"])
    finally:
        _stop(proc, logs)


@pytest.mark.slow
def test_serve_self_signed_with_a_cluster_file(tmp_path: Path) -> None:
    from gangplace.snapshot_io import load_list

    dump = tmp_path / "cluster.json"
    dump.write_text(json.dumps(load_list(None)))
    proc, port, logs = _start(
        ["--self-signed", "--cluster-file", str(dump), "--namespace", "gangs"]
    )
    try:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE  # the CA exists only inside the server process
        rev = fixture("pod-create-llm-worker-0.json")
        rev["request"]["object"]["metadata"]["annotations"]["corral.dev/min-available"] = "40"
        status, doc = _post(port, ctx, rev)
        assert status == 200
        assert "can never start" in doc["response"]["warnings"][0]
        # the certificate names the Service in the namespace given
        with ctx.wrap_socket(
            socket.create_connection(("127.0.0.1", port)), server_hostname="x"
        ) as s:
            der = s.getpeercert(binary_form=True)
        assert der is not None
        san = x509.load_der_x509_certificate(der).extensions.get_extension_for_class(
            x509.SubjectAlternativeName
        )
        assert "corral-webhook.gangs.svc" in san.value.get_values_for_type(x509.DNSName)
        # and the webhook's own namespace is the one given: left alone at admission
        job = fixture("job-create-mpi-train.json")
        status, doc = _post(port, ctx, job)
        assert status == 200 and decode_patch(doc["response"])
        for ns in ("gangs", "corral-system"):  # the flag's, and the config's ownNamespace
            job["request"]["namespace"] = job["request"]["object"]["metadata"]["namespace"] = ns
            status, doc = _post(port, ctx, job)
            assert status == 200 and doc["response"]["allowed"]
            assert not decode_patch(doc["response"])
    finally:
        _stop(proc, logs)
