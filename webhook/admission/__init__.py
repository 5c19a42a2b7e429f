"""The pure admission function, an AdmissionReview in, a response (and the PodGroups
wanted) out. No I/O and no clock; the only module state memoises pure functions. The
same review, cluster view and config always give the same answer, and a second pass
over the patched object finds nothing left to patch (``reinvocationPolicy: IfNeeded``).

Workloads (a table entry in :mod:`webhook.admission.roles`) become gangs at CREATE: the gang
size is the sum of the pods their templates make, every template gets the backend's
keys, and the pods inherit them. Pods that already carry those keys are made
consistent; a bare pod with ``corral.dev/gang`` joins that gang; other pods follow the
configured default. At UPDATE a workload is never patched: its PodGroup follows its
replica counts, and a suspended workload has none (made when it is resumed, removed
when a person suspends it; the descheduler removes its own).
docs/annotations.md lists the keys.

The package, by job: :mod:`.review` (the AdmissionReview read and the answer's shape),
:mod:`.pods` and :mod:`.workloads` (the decisions, each a :mod:`.decision` value:
unchanged, denied or patched), :mod:`.gang_decision` (values, shapes and feasibility,
shared by both), :mod:`.backends` (one class per scheduler, owning every way it differs,
and their registry), :mod:`.mutation` (the edits) and :mod:`.responses` (the one place a
decision becomes the answer); :mod:`.entry` holds :func:`admit`, the one function callers
use. This file imports nothing, so that a module of the package (or :mod:`webhook.config`,
which reads :mod:`.roles`, :mod:`.validate` and the backends' registry) imports on its own.
"""
