"""When KubeRay refuses to suspend a RayJob (the RayJob entry's ``suspend_refusal``).

KubeRay v1.1-v1.4 ``rayjob_controller.go``: ``validateRayJobSpec`` refuses a suspend
without ``shutdownAfterJobFinishes`` or with a ``clusterSelector`` (the RayJob is then
not reconciled at all), and ``updateStatusToSuspendingIfNeeded`` moves a RayJob to
Suspending only from the jobDeploymentStatus values in :data:`RAYJOB_SUSPENDABLE`.
Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

__all__ = ["RAYJOB_SUSPENDABLE", "rayjob_suspend_refusal"]

# KubeRay v1.1+ moves a RayJob to Suspending only from these jobDeploymentStatus values
# (rayjob_controller.go, updateStatusToSuspendingIfNeeded).
RAYJOB_SUSPENDABLE: Final = frozenset({"Running", "Initializing"})


def rayjob_suspend_refusal(obj: Mapping[str, Any], what: str) -> str:
    """Why KubeRay would not act on a suspend of the RayJob ``obj`` (``what`` names it
    in the message), or '' when it would."""
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    if spec.get("shutdownAfterJobFinishes") is not True:
        return f"{what} has shutdownAfterJobFinishes unset: KubeRay refuses to suspend it"
    if spec.get("clusterSelector"):
        return f"{what} runs on an existing RayCluster (clusterSelector): KubeRay cannot suspend it"
    phase = str(status.get("jobDeploymentStatus") or "") if isinstance(status, Mapping) else ""
    if phase not in RAYJOB_SUSPENDABLE:
        return (
            f"{what} has jobDeploymentStatus {phase or 'unset'}: KubeRay suspends only from "
            "Running or Initializing"
        )
    return ""
