"""The move ledger on the cluster: a ConfigMap in the descheduler's namespace.

It remembers what a PodGroup annotation cannot carry (see
:class:`~descheduler.planning.state.MoveLedger`): the cool-down and room-made times of units
without a PodGroup, and the record of the run in progress. Each change is written with
the resourceVersion it was read at, so two writers never lose each other's entries.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from gangplace.kube import ApiError, KubeClient
from gangplace.kube.resources import CONFIGMAPS

from descheduler.planning.state import MOVE_LEDGER, MoveLedger, ledger_from_json

__all__ = ["LedgerStore"]

Json = dict[str, Any]


class LedgerStore:
    """The move ledger ConfigMap: read each run, updated with the resourceVersion it was
    read at (a conflict is read again and retried)."""

    def __init__(self, client: KubeClient, namespace: str, name: str = MOVE_LEDGER) -> None:
        self.client = client
        self.namespace = namespace
        self.name = name

    async def read(self) -> Json | None:
        try:
            return await self.client.get(CONFIGMAPS, self.name, self.namespace)
        except ApiError as e:
            if e.status == 404:
                return None
            raise

    async def record(
        self, field: str, key: str, when: datetime, keep_seconds: float, attempts: int = 4
    ) -> None:
        """Set ``field`` (``last_moved`` or ``room_made``) of ``key`` to ``when``,
        forgetting entries older than ``keep_seconds``."""

        def change(ledger: MoveLedger) -> None:
            getattr(ledger, field)[key] = when
            ledger.prune(when, max(keep_seconds, 1.0))

        await self.update(change, attempts)

    async def update(self, change: Callable[[MoveLedger], bool | None], attempts: int = 4) -> None:
        """Read the ledger, ``change`` it, write it back (read again on a conflict);
        nothing is written when ``change`` returns False."""
        for attempt in range(attempts):
            obj = await self.read()
            ledger = ledger_from_json(obj) if obj is not None else MoveLedger()
            if change(ledger) is False:
                return
            body: Json = {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": self.name,
                    "namespace": self.namespace,
                    "labels": {"app.kubernetes.io/part-of": "corral"},
                },
                "data": ledger.to_data(),
            }
            try:
                if obj is None:
                    await self.client.create(CONFIGMAPS, body, namespace=self.namespace)
                else:
                    body["metadata"]["resourceVersion"] = obj["metadata"]["resourceVersion"]
                    await self.client.replace(CONFIGMAPS, self.name, body, namespace=self.namespace)
                return
            except ApiError as e:
                if e.status != 409 or attempt == attempts - 1:
                    raise
