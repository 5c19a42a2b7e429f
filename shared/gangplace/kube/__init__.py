"""The Kubernetes edge shared by the webhook and the descheduler.

Only this package talks to the API server: :class:`KubeClient` (every request, checked
against :data:`API_CALLS`), the informers behind :class:`ClusterCache`, the
:class:`Evictor` and the :class:`LeaderElector`. Everything else in corral works on the
plain records and snapshots these produce.
"""

from gangplace.engine.objects import (
    NamespaceRecord,
    PdbRecord,
    PodGroupRecord,
    PriorityClassRecord,
    QueueRecord,
    RecordError,
)
from gangplace.kube.backoff import Backoff
from gangplace.kube.cache import ClusterCache, SnapshotFeed, build_snapshot
from gangplace.kube.client import REQUEST_ERRORS, TRANSIENT_ERRORS, ApiError, KubeClient
from gangplace.kube.events import event_body, post_event
from gangplace.kube.evictor import (
    Budget,
    DisruptionCheck,
    EvictionResult,
    EvictionTarget,
    Evictor,
    Limits,
    Outcome,
    check_disruption,
)
from gangplace.kube.informer import Informer, InformerStats, object_key
from gangplace.kube.kubeconfig import (
    KubeConfigError,
    RotatingToken,
    client_for,
    in_cluster_configuration,
    load_configuration,
    new_client,
)
from gangplace.kube.leader import LeaderElector
from gangplace.kube.resources import API_CALLS, RESOURCES, ApiCall, Resource, UndeclaredApiCall

__all__ = [
    "API_CALLS",
    "REQUEST_ERRORS",
    "RESOURCES",
    "TRANSIENT_ERRORS",
    "ApiCall",
    "ApiError",
    "Backoff",
    "Budget",
    "ClusterCache",
    "DisruptionCheck",
    "EvictionResult",
    "EvictionTarget",
    "Evictor",
    "Informer",
    "InformerStats",
    "KubeClient",
    "KubeConfigError",
    "LeaderElector",
    "Limits",
    "NamespaceRecord",
    "Outcome",
    "PdbRecord",
    "PodGroupRecord",
    "PriorityClassRecord",
    "QueueRecord",
    "RecordError",
    "Resource",
    "RotatingToken",
    "SnapshotFeed",
    "UndeclaredApiCall",
    "build_snapshot",
    "check_disruption",
    "client_for",
    "event_body",
    "in_cluster_configuration",
    "load_configuration",
    "new_client",
    "object_key",
    "post_event",
]
