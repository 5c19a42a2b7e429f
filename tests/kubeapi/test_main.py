"""``python -m tests.kubeapi``: bad options are one line and exit 2; the server it runs
writes a kubeconfig a client can use, answers as the release asked for, and stops on
SIGTERM."""

from __future__ import annotations

import base64
import json
import os
import signal
import ssl
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
import yaml

from tests.kubeapi.__main__ import main

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--kube-version", "1.27"],
            "--kube-version '1.27': not a supported release; supported: 1.28 to 1.37",
        ),
        (
            ["--kube-version", "latest"],
            "--kube-version 'latest': expected MAJOR.MINOR, one of 1.28 to 1.37",
        ),
        (
            ["--volcano", "1.20"],
            "--volcano '1.20': not a supported release; supported: 1.7 to 1.15",
        ),
        (["--port", "70000"], "--port 70000: must be 0 (any free port) to 65535"),
        (
            ["--kube-version", "1.34", "--native-gangs"],
            "--native-gangs: Kubernetes 1.34 has no native gang API; it starts with 1.35",
        ),
        (
            ["--kube-version", "1.37", "--native-gangs", "--native-apis", "v1alpha2"],
            "--native-apis v1alpha2: native_apis ['v1alpha2']: Kubernetes 1.37 has the native "
            "gang API at v1alpha3, v1beta1",
        ),
        (
            ["--kube-version", "1.37", "--native-apis", "v1beta1"],
            "--native-apis v1beta1: needs --native-gangs",
        ),
    ],
)
def test_bad_options_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    kubeconfig = tmp_path / "kc"
    assert main([*args, "--kubeconfig", str(kubeconfig)]) == 2
    err = capsys.readouterr().err
    assert err == f"python -m tests.kubeapi: {message}\n"
    assert not kubeconfig.exists()


@pytest.mark.slow
def test_it_serves_until_sigterm(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kc"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.kubeapi",
            "--kube-version",
            "1.30",
            "--volcano",
            "none",
            "--kubeconfig",
            str(kubeconfig),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("serving Kubernetes 1.30, no Volcano at https://127.0.0.1:"), line
        config = yaml.safe_load(kubeconfig.read_text())
        cluster = config["clusters"][0]["cluster"]
        ca = base64.b64decode(cluster["certificate-authority-data"]).decode()
        ctx = ssl.create_default_context(cadata=ca)
        token = config["users"][0]["user"]["token"]
        req = urllib.request.Request(
            cluster["server"] + "/version", headers={"Authorization": f"Bearer {token}"}
        )
        with urllib.request.urlopen(req, context=ctx, timeout=10) as r:
            assert json.load(r)["gitVersion"] == "v1.30.0"
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode == 0
