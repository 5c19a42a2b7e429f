"""``make demo``: ``kubectl corral demo --local`` on the in-memory cluster of the tests.

The cluster is test code (tests/builders/demo_cluster.py), present in a checkout and not
installed with the plugin; this script, run from the checkout (``python -m
scripts.demo_local [--timeout S]``), registers it with the plugin and runs the demo.
"""

from __future__ import annotations

import sys

from kubectl_corral import local
from kubectl_corral.cli import main as kubectl_corral
from tests.builders.demo_cluster import LocalCluster


def main(argv: list[str] | None = None) -> int:
    local.provide(LocalCluster)
    return kubectl_corral(["demo", "--local", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
