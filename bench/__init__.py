"""corral's benchmarks, each run from the checkout as ``python -m bench.NAME`` (see
docs/benchmarks.md): every script prints its figures beside a baseline measured in the
same run, and ``--json``. The modules starting with ``_`` are what they share."""
