"""corral's maintenance scripts, run from the checkout as ``python -m scripts.NAME``: the
bundled samples (``make_*``), the generated manifests and docs (``gen_manifests``, by
``make manifests``), the third-party data (``get_data``, by ``make data``) and the
outputs a refactor must keep (``record_outputs``). A package, so that the scripts import
``tests.builders`` and the tests import the scripts by name, with no ``sys.path`` edits."""
