"""Where the data corral does not ship is found: the Alibaba GPU trace and the
CustomResourceDefinitions of other projects (and the admission reviews recorded from a
real API server).

None of it is in the repository. It lives in one folder laid out as the handout folder
is (``data/alibaba-gpu-v2023/``, ``crds/``, ``fixtures/admission/``): the folder
``$CORRAL_DATA`` names, else a ``shared/`` folder found upward from where we start (a
checkout sits beside ``../shared``). When ``$CORRAL_DATA`` is set it is the only place
looked in, so pointing it at an empty folder shows what runs without the data.
``make data`` (``python -m scripts.get_data``) fetches it from its public sources.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = [
    "ADMISSION_FIXTURES",
    "CRDS",
    "DATA_ENV",
    "GET_DATA_HINT",
    "TRACE",
    "TRACE_ENV",
    "TRACE_NODE_FILE",
    "crds_dir",
    "locate",
    "trace_dir",
]

DATA_ENV = "CORRAL_DATA"
TRACE_ENV = "CORRAL_TRACE_DIR"  # the trace folder itself; wins over $CORRAL_DATA
TRACE = "data/alibaba-gpu-v2023"
CRDS = "crds"
ADMISSION_FIXTURES = "fixtures/admission"
TRACE_NODE_FILE = "openb_node_list_gpu_node.csv"  # present in every copy of the trace
GET_DATA_HINT = "`make data` gets it"


def locate(relative: str, marker: str, start: Path | None = None) -> Path | None:
    """The folder ``relative`` (e.g. ``crds``) of the data folder, if it holds ``marker``
    (a file name or a glob such as ``*.yaml``); None when it is not there.

    With ``$CORRAL_DATA`` set, only ``$CORRAL_DATA/relative``; else ``shared/relative``
    in ``start`` (default: the working directory) or any folder above it."""
    env = os.environ.get(DATA_ENV)
    if env:
        candidates: list[Path] = [Path(env).expanduser() / relative]
    else:
        here = (start or Path.cwd()).resolve()
        candidates = [d / "shared" / relative for d in (here, *here.parents)]
    for cand in candidates:
        if any(cand.glob(marker)):
            return cand
    return None


def trace_dir(start: Path | None = None) -> Path | None:
    """The Alibaba trace's folder: ``$CORRAL_TRACE_DIR`` as given, else found by
    :func:`locate`."""
    env = os.environ.get(TRACE_ENV)
    if env:
        return Path(env)
    return locate(TRACE, TRACE_NODE_FILE, start)


def crds_dir(start: Path | None = None) -> Path | None:
    """The folder of other projects' CRDs (Volcano, scheduler-plugins, Kueue, the
    workload operators), found by :func:`locate`."""
    return locate(CRDS, "*.yaml", start)
