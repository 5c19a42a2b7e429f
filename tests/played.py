"""What the test suite plays: the Kubernetes and Volcano releases, together and apart, and
the controller releases it runs corral against.

One place, so that what the docs promise cannot drift from what runs: the support matrix
(``docs/support-matrix.md``) is generated from this module by
``scripts/gen_support_matrix.py``, and the tests that play a stack take it from here
(``tests/scenarios/test_volcano_admission.py`` its stacks, the kind guide's pair is one
of them). A pair this module does not name is "untested" in the matrix.
"""

from __future__ import annotations

from dataclasses import dataclass

from tests.kubeapi.versions import KUBE_VERSIONS, VOLCANO_VERSIONS, Release, Versions

__all__ = [
    "CONTROLLERS",
    "KIND_STACK",
    "KUBE_RELEASES",
    "RECORDED",
    "VOLCANO_NEWEST_KUBE",
    "VOLCANO_RELEASES",
    "VOLCANO_STORY",
    "Controller",
    "in_volcano_table",
]

KUBE_RELEASES: tuple[Release, ...] = KUBE_VERSIONS
VOLCANO_RELEASES: tuple[Release, ...] = VOLCANO_VERSIONS

# The stack of the recordings (tests/recordings/README.md): kube-apiserver and
# kube-controller-manager v1.28.7 with Volcano v1.7.
RECORDED = Versions.of(kube="1.28", volcano="1.7")

# The Volcano story (tests/scenarios/test_volcano_admission.py plays each): corral's
# webhook served over HTTPS in the API server's admission chain, Volcano's pod admission
# after it where the release's chart turns it on, the Job controller and Volcano's gang
# scheduler models: every gang binds whole and no pod corral admits is refused. Each pair
# is one Volcano's own table lists (VOLCANO_NEWEST_KUBE).
VOLCANO_STORY: tuple[Versions, ...] = (
    Versions.of(kube="1.28", volcano="1.7"),
    Versions.of(kube="1.29", volcano="1.9"),
    Versions.of(kube="1.31", volcano="1.11"),
    Versions.of(kube="1.32", volcano="1.12"),
    Versions.of(kube="1.35", volcano="1.15"),
)

# The pair of the kind guide (docs/install.md, examples/kind-cluster.yaml): the newest of
# the story, so a new user tries corral on a stack the tests play.
KIND_STACK: Versions = VOLCANO_STORY[-1]

# Volcano's compatibility table: the newest Kubernetes minor each Volcano minor is
# "exactly compatible" with (volcano-sh/volcano README.md, "Kubernetes compatibility",
# for v1.10-v1.15; docs/user-guide/version-compatibility-archive.md for v1.7-v1.9; read
# at master of 2026-08-20). Every one of them goes back past Kubernetes 1.28.
VOLCANO_NEWEST_KUBE: dict[Release, Release] = {
    Release(1, 7): Release(1, 28),
    Release(1, 8): Release(1, 28),
    Release(1, 9): Release(1, 29),
    Release(1, 10): Release(1, 30),
    Release(1, 11): Release(1, 31),
    Release(1, 12): Release(1, 32),
    Release(1, 13): Release(1, 33),
    Release(1, 14): Release(1, 34),
    Release(1, 15): Release(1, 35),
}


def in_volcano_table(kube: Release, volcano: Release) -> bool:
    """Whether Volcano's own table lists ``kube`` for ``volcano``."""
    newest = VOLCANO_NEWEST_KUBE.get(volcano)
    return newest is not None and kube <= newest


@dataclass(frozen=True, slots=True)
class Controller:
    """A workload controller the descheduler suspends or leaves alone, as the tests
    model it: ``model`` is the module, whose docstring names ``version`` (the tag it was
    read from); ``recorded``: a recording of the real one is replayed against it;
    ``also_read``: later tags whose source the model was checked against."""

    name: str
    releases: str
    what: str
    model: str
    version: str
    recorded: str = ""
    also_read: str = ""  # later tags whose source was read and found the same


CONTROLLERS: tuple[Controller, ...] = (
    Controller(
        "Job controller (batch/v1)",
        "Kubernetes 1.28-1.37",
        "suspends and resumes; evicts where the Job ignores disruptions",
        "tests/controllers/job.py",
        "v1.28",
        recorded="kube-controller-manager v1.28.7",
    ),
    Controller(
        "Kubeflow training operator (PyTorchJob, TFJob, MPIJob)",
        "v1.7 and later",
        "suspends and resumes (`runPolicy.suspend`)",
        "tests/controllers/training_operator.py",
        "v1.7.0",
    ),
    Controller(
        "Kubeflow training operator",
        "before v1.7 (its CRD has no `runPolicy.suspend`)",
        "never suspends; the plan says why",
        "tests/controllers/training_operator.py",
        "v1.6.0",
    ),
    Controller(
        "JobSet",
        "v0.5 and later",
        "suspends and resumes",
        "tests/controllers/jobset.py",
        "v0.5.0",
    ),
    Controller(
        "KubeRay RayJob",
        "v1.1 and later",
        "suspends only with `shutdownAfterJobFinishes: true`, no `clusterSelector`, "
        "while Running or Initializing; else never",
        "tests/controllers/kuberay.py",
        "v1.1.0",
        also_read="v1.2.0-v1.4.0",
    ),
    Controller(
        "Kueue",
        "v0.8 and later",
        "never moves a workload Kueue manages (it would start it again at once)",
        "tests/controllers/kueue.py",
        "v0.8.0",
    ),
)
