"""An in-memory Kubernetes API server for tests: real HTTP on 127.0.0.1, spoken to by the
real kubernetes-asyncio client.

It keeps typed objects with increasing resourceVersions, lists with label and field
selectors and paging, watches with bookmarks and 410 Gone once a resourceVersion leaves
its bounded history, computes PodDisruptionBudget status from the pods, and evicts as
the API server does. Faults (latency, error statuses, broken watches) are injected
through :class:`Faults`; every request is logged.

Deliberate simplifications: deletion is immediate (no grace period or finalizers),
strategic-merge patches are applied as JSON merge patches, status given on create is
kept (so tests can create running pods directly), and the two Event APIs (core/v1 and
events.k8s.io/v1) are stored separately.
"""

from .app import Settings, make_app
from .faults import Faults, RequestRecord
from .server import CLIENT_HEADER, ApiServer
from .store import ApiStatusError, ApiStore, ResourceType

__all__ = [
    "CLIENT_HEADER",
    "ApiServer",
    "ApiStatusError",
    "ApiStore",
    "Faults",
    "RequestRecord",
    "ResourceType",
    "Settings",
    "make_app",
]
