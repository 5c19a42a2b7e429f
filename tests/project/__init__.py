"""The project around the code: docs, manifests, the Dockerfile, `make data`, the data
hooks of the test run."""
