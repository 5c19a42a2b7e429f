"""An in-memory Kubernetes API server for tests: real HTTP on 127.0.0.1, spoken to by the
real kubernetes-asyncio client, calibrated on recordings of a real v1.28 control plane
(``tests/recordings``, replayed by ``tests/contract``; see :mod:`.recording`).

It plays one release of each component (:class:`Versions`: ``/version``, the kinds and
fields served; for Jobs, the defaults, feature gates and validation of that release,
:mod:`.job_validation`, :mod:`.gates`; Volcano's pod admission,
:mod:`.volcano_admission`; the native gang API of 1.35-1.37 when switched on,
:mod:`.native_gangs` and :mod:`.native_objects`; the gang schedulers' CRDs of each
release, Volcano's and KAI's, :mod:`.scheduler_crds`) and serves what kubectl needs:
discovery (:mod:`.discovery`), OpenAPI v3 (:mod:`.openapi`) and server-side field
validation (:mod:`.fields`), as ``python -m tests.kubeapi`` too (:mod:`.__main__`). Every
object of a built-in kind it stores is decoded by the OpenAPI schema of the release it
plays (:mod:`.released_schemas`: unknown fields at any depth by ``fieldValidation``, a
wrong type refused as the decoder refuses it) and its enums checked (:mod:`.enums`). It
starts with the system namespaces and a ``default`` ServiceAccount in every namespace
(and, with Volcano, Volcano's own Queues, opened by its queue controller:
:mod:`tests.controllers.volcano_queue`), serves CustomResourceDefinitions (their objects
pruned and checked by their structural schema: :mod:`.crds`, :mod:`.crd_validation`)
and the workload kinds (:mod:`.workloads`), drops the status a create sends where the
real strategy does, and runs mutating then validating admission.

It keeps typed objects with increasing resourceVersions; lists with label and field
selectors, paging and exact resourceVersions; watches with bookmarks and the 410 ERROR
event once a resourceVersion leaves its bounded history. It defaults new pods as the API
server and its admission plugins do, deletes a bound pod gracefully (deletionTimestamp;
gone when its kubelet deletes it again with grace 0), keeps an object with finalizers until
they are removed, serves the status, binding, eviction (DisruptionTarget, budgets, dry run)
and TokenRequest subresources, applies strategic merge patches, and authorises requests
made with a ServiceAccount token by the stored Roles and bindings. It computes
PodDisruptionBudget status from the pods itself. The rest of the control plane (kubelets,
schedulers, workload controllers) is played by the models in :mod:`.controllers`. Faults
(latency, error statuses, broken watches) are injected through :class:`Faults`; every
request is logged.

Deliberate simplifications: ``store.load`` keeps the status it is given (a bulk load is a
cluster's state, not a create: tests load running pods directly); strategic merge patches know the
merge keys of a fixed table, not the OpenAPI schema; a DELETE without propagationPolicy is
Background for every kind (for batch/v1 Jobs the real default is Orphan), and deleting a
namespace removes its contents at once; one change history serves every kind's watches
(the real server has a watch cache per kind); a pod's spec may be changed by an update
(the real server allows only images, activeDeadlineSeconds and added tolerations, and
binding only through the Binding subresource); PodDisruptionBudget status is computed at
once, and for maxUnavailable or a percentage over pods of a workload with a scale
(ReplicaSet, StatefulSet, ReplicationController) it counts the pods (and evicted ones not
yet replaced) where the real disruption controller reads that scale (over pods of other
owners -- Jobs, custom resources, bare pods -- it fails safe with disruptionsAllowed 0 and
SyncFailed, as the real one does); requests without a token are an admin's unless the
server is given static tokens (an unknown token is 401, as in a real cluster:
:meth:`ApiServer.accept` names an admin token), impersonation is not modelled, the
bootstrap RBAC policy is reduced to what every authenticated user may do; the two Event
APIs (core/v1 and events.k8s.io/v1) are stored separately; a patch whose result has a
wrong type is answered with the decoder's words for a create (the real patch handler words
it its own way), and a JSON patch's unknown fields are dropped without a Warning; only the
enums of :mod:`.enums` are checked and a schema's ``required`` only for custom resources.

Where things are: :mod:`.server` runs it and :mod:`.app` speaks the REST protocol;
:mod:`.auth` authenticates and authorises; :mod:`.admitted` and :mod:`.webhooks` are the
admission chain, :mod:`.volcano_admission` Volcano's pod admission in it (the stacks of
:mod:`.versions` that run it). The state is :class:`~.store.ApiStore` (:mod:`.store`: objects,
resourceVersions, create/update/patch), with one module per other part: :mod:`.listing`,
:mod:`.watches`, :mod:`.deletion`, :mod:`.disruption` (budgets, eviction),
:mod:`.subresources` (binding, tokens); the pieces they share are :mod:`.resources` (the
kinds served), :mod:`.status`, :mod:`.patches`, :mod:`.strategic`, :mod:`.validation`,
:mod:`.defaults` and :mod:`.quantity`. :mod:`.recording` replays real recordings.
"""

from tests.kubeapi.app import Settings, make_app
from tests.kubeapi.faults import Faults, RequestRecord
from tests.kubeapi.resources import ResourceType
from tests.kubeapi.server import CLIENT_HEADER, ApiServer
from tests.kubeapi.status import ApiStatusError
from tests.kubeapi.store import ApiStore
from tests.kubeapi.versions import KUBE_VERSIONS, VOLCANO_VERSIONS, Release, Versions

__all__ = [
    "CLIENT_HEADER",
    "KUBE_VERSIONS",
    "VOLCANO_VERSIONS",
    "ApiServer",
    "ApiStatusError",
    "ApiStore",
    "Faults",
    "Release",
    "RequestRecord",
    "ResourceType",
    "Settings",
    "Versions",
    "make_app",
]
