"""The PodGroup controller: the gangs' PodGroups, made off the request path (but for a
gang's first pod, bounded by ``podGroupWait``). One job per module:

* :mod:`~webhook.podgroups.serving` -- its place in the aiohttp app: typed key, start and
  stop, the request path's step after admission.
* :mod:`~webhook.podgroups.reconciler` -- the one object the server holds; its module
  docstring lists the behaviours, each a module of its own: on the request path
  :mod:`~webhook.podgroups.intake`, :mod:`~webhook.podgroups.hints` and
  :mod:`~webhook.podgroups.first_pod` (the request-path create); in the background
  :mod:`~webhook.podgroups.controller` (the workers) over
  :mod:`~webhook.podgroups.create`, :mod:`~webhook.podgroups.conflict`,
  :mod:`~webhook.podgroups.removal`, :mod:`~webhook.podgroups.unowned` and
  :mod:`~webhook.podgroups.missing`.
* What they share: :mod:`~webhook.podgroups.reconcile_context` (the calls, memory and queue),
  :mod:`~webhook.podgroups.work_queue` and :mod:`~webhook.podgroups.work_item` (the queue
  and its unit of work), :mod:`~webhook.podgroups.known` (what is remembered between
  admissions), :mod:`~webhook.podgroups.owner_lookup` (the owner's uid, from a hint or a
  read), :mod:`~webhook.podgroups.reconciler_port` (the calls' contracts, outcomes and
  retries).
* :mod:`~webhook.podgroups.calls` -- the calls to the API server (Volcano and
  scheduler-plugins PodGroups, owners read when no hint names them).
* :mod:`~webhook.podgroups.from_workload` -- the PodGroup of a gang whose pods come
  without one, read from the live workload.

What admission asks for -- the PodGroup it wants, its owner, and what a PodGroup
already there is to it -- is plain data in :mod:`webhook.podgroup_intent`, outside this
package: this package calls admission (``from_workload``), never the other way round.
"""
