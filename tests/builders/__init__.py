"""What the tests, the sample scripts and the benchmarks build their inputs with, one
module per kind of thing built:

- ``objects``: Kubernetes objects as the API server returns them (standard library only);
- ``engine_json``: minimal Node and Pod JSON for the engine's tests;
- ``records``: small clusters of engine records for the measure and policy tests;
- ``descheduler_cluster``: GPU nodes, gangs, PodGroups, Queues and PDBs of a descheduler test;
- ``reviews``: AdmissionReviews (captured and hand-built) and a checked ``admit()``;
- ``manifests``: manifests/ rendered with kustomize as an admin renders them;
- ``kubeconfig``: a kubeconfig that finds the in-memory API server;
- ``capture_webhook``: a mutating webhook that records what the admission chain sends;
- ``demo_cluster``: the cluster ``kubectl corral demo --local`` runs on.
"""
