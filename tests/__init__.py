"""corral's tests, one folder per part (docs/development.md lists them); a package so that
``tests.builders``, ``tests.kubeapi`` and ``tests.controllers`` import by name."""
