"""Fetch the third-party data corral's tests and benchmarks use from its public sources
(`make data`): the Alibaba GPU cluster trace v2023 and the CRDs of the schedulers and
workload operators corral speaks to.

None of it is in the repository. It goes where the tests look for it: the folder
$CORRAL_DATA names, else ../shared beside the checkout (see shared/gangplace/thirdparty.py),
laid out as data/alibaba-gpu-v2023/*.csv and crds/*.yaml. Files already there are kept.
Each file is checked against the SHA-256 of the copy corral was tested with; a file that
differs is kept and named (upstream may have changed it).

Standard library only: it runs before anything is installed.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

ROOT = Path(__file__).resolve().parents[1]
DATA_ENV = "CORRAL_DATA"  # as gangplace.thirdparty reads it
RAW = "https://raw.githubusercontent.com"

# The trace at the commit that published its CSVs (alibaba/clusterdata, "upload GPU trace
# data released by ATC'23 FGD paper"); the same files are in
# hkust-adsl/kubernetes-scheduler-simulator under data/csv/.
TRACE_REPO, TRACE_REF = "alibaba/clusterdata", "50a91c7c74abe3b658188dc78ac1dd302970d40c"
TRACE_PATH = "cluster-trace-gpu-v2023/csv"
TRACE_SHA256 = """
5a85c2af79c66a1efff8bbcbda430400aae56d8431370d738480967e1a9c6b15  openb_node_list_all_node.csv
2beca64b4d3dfa342036a34b56a495c6cef9225db836c81f541282cb1df320b5  openb_node_list_gpu_node.csv
1bc3fd9ee5c1468ccd018f624d9222746e08d59f963f66b925804734271c0eaa  openb_pod_list_cpu0.csv
8ed554026d041b15ff21ddc104d9a21dbd9a93c496262fa23ef7b5be27e220dc  openb_pod_list_cpu037.csv
747f43247bffc2b0bb081d7f61f0705ca8d390dafc0b647e642c92f3baf3ba1e  openb_pod_list_cpu050.csv
f8a2b031461b54d7b9f06d55473c2371eb3357b78a255c646bdca5e0833a8a2f  openb_pod_list_cpu072.csv
bec1c33fbdde61fd463877534ec79b393aec73e1cbb22d55fab9f166ac480982  openb_pod_list_cpu100.csv
b7e9d8a1a601da84d6e0b4110b19ef5001be5e4796d33e7b82f166ba95161f87  openb_pod_list_cpu200.csv
87bebd4d012faa8305ce1fd82737f51cf03361aac28b75d42e34aa656d7f4ee0  openb_pod_list_cpu235.csv
134c21ff96d57533df8a37b67632972884fec9396e77cd0898ddc370cc8e607d  openb_pod_list_cpu250.csv
76528825f40ee662cb098b3b6e683c1efd9f87a0c8af7e628df1f32c639636d1  openb_pod_list_cpu300.csv
1ee7ed79c27a3b0861cda8ddba86a004c6aba904caafa329a76ae93ca63834a8  openb_pod_list_default.csv
12dbc07d6a49bf8641e2275a2ff5bf7be74b5df7d148d531e135b140b95f9a3d  openb_pod_list_gpushare100.csv
9be2d0efb52e242c32e23dd184cc5fcc1983478c6c9c02cbb6b4b62925c0ffcd  openb_pod_list_gpushare20.csv
d83ce79a4eb6987524bedbb0c65e41aed3a36bf6c1b78b86234c3687a07e1d40  openb_pod_list_gpushare40.csv
d31809628128a1f24491086eda4af3e23882b9213d3ef57a56ee2d1af69492fe  openb_pod_list_gpushare60.csv
88b6649369ced40d0fde287d2498ea61ff4b05fccba8bdc95daf6042f2f8431e  openb_pod_list_gpushare80.csv
8f1c0ef7e4e511e982bd2818898ba22ee6d273bf5fce124b7ace285b5928cf4e  openb_pod_list_gpuspec05.csv
2dc7e4cb9480484f08539720b433a9ec9ab5d76b396f3f7557c53a2ff78a7611  openb_pod_list_gpuspec10.csv
6b9b89ab8913c1c074e994e98f548cf1a872fc5f76f2442ca8cd514a478b00a9  openb_pod_list_gpuspec20.csv
9d030679a2ccd7e27a7ec9ff15baff34480d22a0012515691fc187e3f35ee68c  openb_pod_list_gpuspec25.csv
eca4f746db1e5b25864ad021b55ece3943e101a3ebd4574d09dcb95c46117652  openb_pod_list_gpuspec33.csv
d9ec6f6c74fb980cc0b81239470c6353fceea077ea9abd610003b604c7cc2b01  openb_pod_list_multigpu20.csv
a5e479c6444b1d83eef848159cf00c3cfa13441b2d1e2c113c391b91f1cc5b11  openb_pod_list_multigpu30.csv
32c9e8731ca07ef96108aa65f2a289bb9aacb47f642ed9e3789f99b242df60eb  openb_pod_list_multigpu40.csv
206f2f5959db30ecb7c44e7f13197c8ec50b7a35558ad3777cc3662ef0fe5373  openb_pod_list_multigpu50.csv
"""

# Each CRD: its project, the release corral was tested with, the file there, its SHA-256.
# Volcano's PodGroup and Queue and scheduler-plugins' PodGroup come from their default branch.
CRD_SOURCES = [
    (
        "argoproj/argo-workflows",
        "v4.1.2",
        "manifests/base/crds/minimal/argoproj.io_workflows.yaml",
        "358d5f18eefbef7fca670b13ab0948cfd35deee6a1d0ed62260f5abf810bc3bb",
    ),
    (
        "volcano-sh/volcano",
        "v1.7.0",
        "config/crd/bases/batch.volcano.sh_jobs.yaml",
        "29781ac6c3df7f3091f2d7a8e07e5a45e5ef6e68025264a19002debf42c6f9b6",
    ),
    (
        "kubernetes-sigs/jobset",
        "v0.10.1",
        "config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml",
        "dd2d5dbb3186ea36f6815b19d9bc18c0f59ce50e28348d11d2a0888e0b5d0f16",
    ),
    (
        "kubeflow/mpi-operator",
        "v0.8.0",
        "manifests/base/kubeflow.org_mpijobs.yaml",
        "78b0131f931fcc8d99f6ce0407281f41b62527e443ec691d26d9634b390ad3bb",
    ),
    (
        "kubeflow/training-operator",
        "v1.9.0",
        "manifests/base/crds/kubeflow.org_pytorchjobs.yaml",
        "eb80e57a984cdc7ceefaaf3fc561e21b673c30cbb58589f2389528d2b2760d22",
    ),
    (
        "kubernetes-sigs/kueue",
        "v0.17.8",
        "config/components/crd/bases/kueue.x-k8s.io_clusterqueues.yaml",
        "666f5466bf85ace8c494a9a790ba87c4c18ddf3ab3eb9f18c878927d396869f3",
    ),
    (
        "kubernetes-sigs/kueue",
        "v0.17.8",
        "config/components/crd/bases/kueue.x-k8s.io_localqueues.yaml",
        "dd10ef8d3578e7212fa52763549e7b6be0949793a5b924495fcd293330109fed",
    ),
    (
        "kubernetes-sigs/kueue",
        "v0.17.8",
        "config/components/crd/bases/kueue.x-k8s.io_resourceflavors.yaml",
        "19e339c47e9ca3fa2c9eeddd27715a512f765c4794ed859733408a9715720173",
    ),
    (
        "kubernetes-sigs/kueue",
        "v0.17.8",
        "config/components/crd/bases/kueue.x-k8s.io_workloads.yaml",
        "75ea8518856e1518b5554aa3f1414191c6fa0c8db7a99df48a1408c7796ef162",
    ),
    (
        "kubernetes-sigs/lws",
        "v0.10.0",
        "config/crd/bases/leaderworkerset.x-k8s.io_leaderworkersets.yaml",
        "c5dcad8ed943e495490241f00b9a1b45d51203b6d484020db3636d5bf553568e",
    ),
    (
        "ray-project/kuberay",
        "v1.7.0",
        "ray-operator/config/crd/bases/ray.io_rayclusters.yaml",
        "c44704442eef0c6721ad40c1d66782c8bd3fdab9d3344306a5820910a679baa1",
    ),
    (
        "ray-project/kuberay",
        "v1.7.0",
        "ray-operator/config/crd/bases/ray.io_rayjobs.yaml",
        "01a5cf3b17c1769fda44af7e82debcd98722f0c27b9ab84d084681c6649121f5",
    ),
    (
        "volcano-sh/volcano",
        "master",
        "config/crd/volcano/bases/scheduling.volcano.sh_podgroups.yaml",
        "d9077185bab4c34ec5d6ab5b12272898238d72b532e633fbbc7c06de3ee42478",
    ),
    (
        "volcano-sh/volcano",
        "master",
        "config/crd/volcano/bases/scheduling.volcano.sh_queues.yaml",
        "86d5e50008a693c707ba4db919ed534b5aa5980889a275bfec24b1386e724cde",
    ),
    (
        "kubernetes-sigs/scheduler-plugins",
        "master",
        "config/crd/bases/scheduling.x-k8s.io_podgroups.yaml",
        "e87980a29866bbf8a4df5452e03d876b6ae952c80b5443abdfaacee3b9adf60c",
    ),
    (
        "kubeflow/spark-operator",
        "v2.5.2",
        "config/crd/bases/sparkoperator.k8s.io_scheduledsparkapplications.yaml",
        "5dc6654b2ad9157421ddf177737795420088fbe70338e45602bacf22ce25cc99",
    ),
    (
        "kubeflow/spark-operator",
        "v2.5.2",
        "config/crd/bases/sparkoperator.k8s.io_sparkapplications.yaml",
        "ecd9c14fcadb9d5f8ced4c4ee31920548ea53a892e0a69c3e43aa758bfca6d94",
    ),
]


@dataclass(frozen=True)
class Item:
    """One file: where it goes under the data folder, where it comes from, its SHA-256."""

    path: str
    url: str
    sha256: str


def items(only: Sequence[str]) -> list[Item]:
    """The files of the parts in ``only`` (``trace``, ``crds``)."""
    out: list[Item] = []
    if "trace" in only:
        for sha, name in (ln.split() for ln in TRACE_SHA256.strip().splitlines()):
            url = f"{RAW}/{TRACE_REPO}/{TRACE_REF}/{TRACE_PATH}/{name}"
            out.append(Item(f"data/alibaba-gpu-v2023/{name}", url, sha))
    if "crds" in only:
        for repo, ref, path, sha in CRD_SOURCES:
            out.append(Item(f"crds/{Path(path).name}", f"{RAW}/{repo}/{ref}/{path}", sha))
    return out


def default_dest() -> Path:
    """$CORRAL_DATA, else ../shared beside the checkout: where the tests look."""
    env = os.environ.get(DATA_ENV)
    return Path(env).expanduser() if env else ROOT.parent / "shared"


class FetchError(Exception):
    """A file that could not be fetched or written; the message says which and what to do."""


class OfflineError(FetchError):
    """The source could not be reached: every file still missing will fail the same way."""


Opener = Callable[..., Any]


def fetch(item: Item, dest: Path, timeout: float, opener: Opener) -> str:
    """Fetch ``item`` into ``dest``; the status word it ends with (``fetched``, or
    ``differs`` when its SHA-256 is not the tested copy's)."""
    target = dest / item.path
    part = target.with_name(target.name + ".part")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        digest = hashlib.sha256()
        with opener(item.url, timeout=timeout) as resp, part.open("wb") as out:
            _copy(resp, out, digest)
        part.replace(target)
    except (urllib.error.URLError, TimeoutError, ConnectionError) as e:
        part.unlink(missing_ok=True)
        reason = getattr(e, "reason", None) or e
        raise OfflineError(f"could not fetch {item.url}: {reason}") from None
    except OSError as e:
        part.unlink(missing_ok=True)
        raise FetchError(f"cannot write {target}: {e.strerror or e}") from None
    return "fetched" if digest.hexdigest() == item.sha256 else "differs"


def _copy(src: BinaryIO, dst: BinaryIO, digest: Any) -> None:
    while chunk := src.read(1 << 16):
        digest.update(chunk)
        dst.write(chunk)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="get_data.py", description=__doc__.split("\n\n")[0].replace("\n", " ")
    )
    p.add_argument(
        "--dest",
        help=f"the data folder (default: ${DATA_ENV}, else ../shared beside the checkout)",
    )
    p.add_argument(
        "--only",
        action="append",
        choices=("trace", "crds"),
        help="fetch only this part (repeatable; default: both)",
    )
    p.add_argument(
        "--list", action="store_true", help="print each file and its source; fetch nothing"
    )
    p.add_argument("--timeout", type=float, default=60.0, help="seconds per request (default: 60)")
    return p


def main(argv: Sequence[str] | None = None, opener: Opener = urllib.request.urlopen) -> int:
    p = build_parser()
    args = p.parse_args(argv)
    if args.timeout <= 0:
        p.error(f"--timeout {args.timeout:g}: must be more than 0")
    dest = Path(args.dest).expanduser() if args.dest else default_dest()
    if dest.exists() and not dest.is_dir():
        p.error(f"--dest {dest}: not a folder")
    todo = items(args.only or ("trace", "crds"))
    if args.list:
        for it in todo:
            print(f"{it.path}  {it.url}")
        return 0
    missing = [it for it in todo if not (dest / it.path).is_file()]
    print(f"{dest}: {len(todo) - len(missing)} of {len(todo)} files present")
    differs: list[str] = []
    for i, it in enumerate(missing, 1):
        try:
            status = fetch(it, dest, args.timeout, opener)
        except OfflineError as e:
            left = missing[i - 1 :]
            only = "".join(f" --only {o}" for o in args.only or ())
            print(
                f"get_data.py: {e}\n"
                f"  (no internet access here?) {len(left)} file(s) are missing, the first "
                f"{dest / it.path}. `python -m scripts.get_data --list{only}` names each "
                f"file and its public source: fetch them where you have access and put "
                f"them under {dest}, or point ${DATA_ENV} at a folder that has data/ and "
                "crds/ laid out so.",
                file=sys.stderr,
            )
            return 1
        except FetchError as e:
            print(f"get_data.py: {e}", file=sys.stderr)
            return 1
        print(f"[{i}/{len(missing)}] {status} {it.path}")
        if status == "differs":
            differs.append(it.path)
    if differs:
        print(
            f"{len(differs)} file(s) differ from the copies corral was tested with (kept): "
            + ", ".join(differs),
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
