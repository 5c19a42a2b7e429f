"""The gangs' PodGroups, made off the request path. One job per module:

What admission asks for -- the PodGroup it wants, its owner, and what a PodGroup
already there is to it -- is plain data in :mod:`webhook.podgroup_intent`, outside this
package: this package calls admission (``from_workload``), never the other way round.

* :mod:`~webhook.podgroups.reconciler` -- makes, updates and removes them in the
  background, with retries, owner hints and parking.
  Beside it: :mod:`~webhook.podgroups.reconciler_port` (the calls it is given, its
  outcomes and retries), :mod:`~webhook.podgroups.work_item` (one PodGroup's work in
  progress), :mod:`~webhook.podgroups.known` (what it remembers between admissions)
  and :mod:`~webhook.podgroups.owner_lookup` (the owner's uid, from a hint or a read).
* :mod:`~webhook.podgroups.calls` -- the reconciler's calls to the API server (Volcano and
  scheduler-plugins PodGroups, owners read when no hint names them).
* :mod:`~webhook.podgroups.from_workload` -- the PodGroup of a gang whose pods come
  without one, read from the live workload.
"""
