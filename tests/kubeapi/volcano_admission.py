"""Volcano's pod admission (``/pods/validate``, webhook ``validatepod.volcano.sh``), as a
validating step of the in-memory API server.

Read from volcano-sh/volcano at v1.7.0, v1.9.0, v1.10.0, v1.11.0 and v1.12.0:
``pkg/webhooks/admission/pods/validate/admit_pod.go`` (the checks and their messages),
``installer/helm/chart/volcano/templates/webhooks.yaml`` (its registration: CREATE of
v1 pods, ``failurePolicy: Fail``, every namespace but Volcano's own and kube-system,
``timeoutSeconds: 10``), ``installer/helm/chart/volcano/values.yaml``
(``custom.enabled_admissions`` names ``/pods/validate`` through v1.11; v1.12 dropped it
and the PodGroup checks with it) and ``vendor/volcano.sh/apis/pkg/apis/helpers/
helpers.go`` (``GeneratePodgroupName``). It runs when
``store.versions.validates_volcano_pods`` (:mod:`tests.kubeapi.versions`).

On a pod CREATE whose schedulerName is one of Volcano's (``--scheduler-name``,
``volcano`` by default):

1. a pod with ``scheduling.k8s.io/group-name``: the PodGroup must exist (else
   ``failed to get PodGroup for pod <NS/NAME>: podgroups.scheduling.volcano.sh "PG"
   not found``), and its queue, when it names one, must exist and be ``Open`` (else
   ``failed :  unable to find job queue: ...;`` or ``failed :  can only submit job to
   queue with state `Open`, queue `Q` status is `S`;`` -- the trailing ``;`` of the
   wrapper is gone from v1.10.0 on); nothing else is checked;
2. otherwise a pod with ``scheduling.volcano.sh/queue-name``: that queue, the same way
   (without the ``failed :`` wrapper);
3. then the PodGroup Volcano's controller would make for it (``podgroup-<controller
   uid>`` or ``podgroup-<pod uid>``) is read, and only an error other than NotFound
   refuses (none in memory);
4. and the budget annotations ``scheduling.volcano.sh/jdb-min-available`` and
   ``jdb-max-unavailable``: a positive integer or a percentage of 1 to 99, not both.

The answer carries only a message (no code, no reason): the API server refuses with
400 and ``admission webhook "validatepod.volcano.sh" denied the request: MESSAGE``.
The message is trimmed of spaces (``strings.TrimSpace``).
"""

from __future__ import annotations

import re
from typing import Any

from tests.kubeapi.status import ApiStatusError
from tests.kubeapi.store import ApiStore
from tests.kubeapi.webhooks import Attributes, _denied

__all__ = ["NAME", "VolcanoPodValidation"]

Json = dict[str, Any]

NAME = "validatepod.volcano.sh"
GROUP_NAME = "scheduling.k8s.io/group-name"
QUEUE_NAME = "scheduling.volcano.sh/queue-name"
_BUDGET = (
    "scheduling.volcano.sh/jdb-min-available",
    "scheduling.volcano.sh/jdb-max-unavailable",
)
_INT = re.compile(r"^-?\d+$")


class VolcanoPodValidation:
    """A validator for :attr:`AdmittedWrites.validators`:
    ``await check(attrs, admitted)`` raises the API server's refusal, or returns."""

    def __init__(
        self,
        store: ApiStore,
        *,
        scheduler_names: tuple[str, ...] = ("volcano",),
        namespace: str = "volcano-system",
    ) -> None:
        self.store = store
        self.scheduler_names = scheduler_names
        # The chart's namespaceSelector: neither Volcano's own namespace nor kube-system.
        self.skipped_namespaces = frozenset({namespace, "kube-system"})
        self.denied: list[tuple[str, str, str]] = []  # (namespace, pod, message)

    async def __call__(self, a: Attributes, obj: Json) -> None:
        if not self.store.versions.validates_volcano_pods:
            return
        if a.operation != "CREATE" or a.subresource or (a.rt.group, a.rt.plural) != ("", "pods"):
            return
        if a.namespace in self.skipped_namespaces:
            return
        msg = self.message(a.namespace, obj)
        if msg:
            name = str((obj.get("metadata") or {}).get("name") or a.name)
            self.denied.append((a.namespace, name, msg))
            raise _denied(NAME, {"message": msg})

    # --- validatePod ----------------------------------------------------------------

    def message(self, namespace: str, pod: Json) -> str:
        """What ``validatePod`` answers for ``pod``: "" when it is allowed."""
        spec = _mapping(pod.get("spec"))
        if spec.get("schedulerName") not in self.scheduler_names:
            return ""
        meta = _mapping(pod.get("metadata"))
        ann = _mapping(meta.get("annotations"))
        name = str(meta.get("name") or "")
        pg_name = str(ann.get(GROUP_NAME) or "")
        if pg_name:
            pg = self._podgroup(namespace, pg_name)
            if isinstance(pg, str):
                return f"failed to get PodGroup for pod <{namespace}/{name}>: {pg}".strip()
            queue = str((pg.get("spec") or {}).get("queue") or "")
            err = self._queue_state(queue)
            if err:
                tail = ";" if self._release_before("1.10") else ""
                return f"failed : {err}{tail}".strip()
            return ""
        queue = str(ann.get(QUEUE_NAME) or "")
        if queue:
            err = self._queue_state(queue)
            if err:
                return err.strip()
        # checkPG(pod, GeneratePodgroupName(pod), false): only an error other than
        # NotFound refuses, and the store has none. Then the budget annotations.
        return (_budget_error(ann) or "").strip()

    def _release_before(self, text: str) -> bool:
        volcano = self.store.versions.volcano
        return volcano is not None and not volcano.at_least(text)

    def _podgroup(self, namespace: str, name: str) -> Json | str:
        rt = self.store.resource("podgroups", "scheduling.volcano.sh")
        try:
            return self.store.get(rt, namespace, name)
        except ApiStatusError as e:
            return e.message

    def _queue_state(self, queue: str) -> str:
        """``checkQueueState``: "" for no queue or an Open one."""
        if not queue:
            return ""
        rt = self.store.resource("queues", "scheduling.volcano.sh")
        try:
            q = self.store.get(rt, "", queue)
        except ApiStatusError as e:
            return f" unable to find job queue: {e.message};"
        state = str((q.get("status") or {}).get("state") or "")
        if state != "Open":
            return (
                " can only submit job to queue with state `Open`, "
                f"queue `{queue}` status is `{state}`;"
            )
        return ""


def _mapping(value: Any) -> Json:
    return value if isinstance(value, dict) else {}


def _budget_error(ann: dict[str, Any]) -> str | None:
    """``validateAnnotation``: the disruption budget annotations."""
    found = 0
    for key in _BUDGET:
        if key not in ann:
            continue
        found += 1
        err = _int_or_percentage(key, str(ann[key]))
        if err:
            return err
    if found > 1:
        return f"not allow configure multiple annotations <[{' '.join(_BUDGET)}]> at same time"
    return None


def _int_or_percentage(key: str, value: str) -> str | None:
    """``validateIntPercentageStr`` over ``intstr.Parse``: an integer, else a string."""
    if _INT.match(value):
        return (
            None
            if int(value) > 0
            else f'invalid value <"{value}"> for {key}, it must be a positive integer'
        )
    digits = value.replace("%", "")
    if not _INT.match(digits):
        return f'invalid value strconv.Atoi: parsing "{digits}": invalid syntax for {key}'
    v = int(digits)
    if v <= 0 or v >= 100:
        return (
            f'invalid value <"{value}"> for {key}, it must be a valid percentage which '
            "between 1% ~ 99%"
        )
    return None
