"""gangplace.kube, the Kubernetes edge: client config, informers, evictor, leader election,
resources, selectors, RBAC."""
