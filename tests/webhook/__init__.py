"""The admission webhook: admit() and its patches, the server, TLS, PodGroups, the live
cluster view, the CLI."""
