"""A port flag out of range ends in one line and exit 2, in every command that listens,
before it starts anything: the socket layer would wrap 99999 to 34463, take 65536 as
"any port" and end -1 in a traceback."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # a process per case, each importing the CLI

COMMANDS = {
    "corral-webhook": (
        [sys.executable, "-m", "webhook.cli", "serve", "--self-signed", "--no-cluster"],
        "--port",
    ),
    "corral-descheduler": (
        [sys.executable, "-m", "descheduler.cli", "run", "--interval", "1m"],
        "--metrics-port",
    ),
}


@pytest.mark.parametrize("value", ["99999", "65536", "-1"])
@pytest.mark.parametrize("prog", list(COMMANDS))
def test_a_port_out_of_range_is_refused(prog: str, value: str) -> None:
    argv, flag = COMMANDS[prog]
    try:
        proc = subprocess.run(
            [*argv, "--host", "127.0.0.1", f"{flag}={value}"]
            if prog == "corral-webhook"
            else [*argv, f"{flag}={value}"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except subprocess.TimeoutExpired as e:  # it served instead: the bug
        pytest.fail(f"{prog} {flag}={value} was not refused; it ran: {e.stderr!r}")
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    assert proc.stderr == (
        f"{prog}: {flag}: {value} is not a port; allowed: 0 (any free port) to 65535\n"
    )
