"""``kubectl corral``: the cluster admin's read-only view of corral's gangs.

Installed as the console script ``kubectl-corral``, which kubectl finds on the PATH and
runs as ``kubectl corral``. It reads the cluster with the user's own credentials and
only lists objects (see :data:`gangplace.kube.rbac.ATTRIBUTION`).
"""
