"""Every product module imports on its own, first, in an interpreter that has loaded no
other product module: an import loop between two modules shows only in the order where
the loop's second module is imported first, so importing the package as a whole (as the
other tests do) hides it.

One child process is forked per module (as many at once as there are cores) from a
parent that has imported only third-party libraries, so each child starts with no product
module in ``sys.modules`` and the run costs seconds, not a fresh interpreter per module.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = {
    "gangplace": ROOT / "shared" / "gangplace",
    "webhook": ROOT / "webhook",
    "descheduler": ROOT / "descheduler",
    "kubectl_corral": ROOT / "kubectl_corral",
}

_CHILD = r"""
import importlib, json, os, sys, traceback
# Third-party libraries the product uses, loaded once in the parent: not product modules.
for lib in ("numpy", "scipy.optimize", "pydantic", "aiohttp", "kubernetes_asyncio.client",
            "yaml", "orjson", "prometheus_client", "jsonpatch", "cryptography.x509"):
    importlib.import_module(lib)
assert not any(m.split(".")[0] in {"gangplace", "webhook", "descheduler", "kubectl_corral"}
               for m in sys.modules), "a product module was loaded before the forks"
failed = {}
running = {}  # pid -> (module, read end)
names = json.loads(sys.argv[1])


def reap():
    pid, _ = os.wait()
    name, r = running.pop(pid)
    out = b""
    while chunk := os.read(r, 65536):
        out += chunk
    os.close(r)
    if out:
        failed[name] = out.decode()


for name in names:
    while len(running) >= (os.cpu_count() or 1):
        reap()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            importlib.import_module(name)
            msg = b""
        except BaseException:
            msg = traceback.format_exc().strip().splitlines()[-1].encode()
        os.write(w, msg)
        os._exit(0)
    os.close(w)
    running[pid] = (name, r)
while running:
    reap()
print(json.dumps(failed))
"""


def _modules() -> list[str]:
    names: list[str] = []
    for package, folder in PACKAGES.items():
        for path in sorted(folder.rglob("*.py")):
            parts = path.relative_to(folder).with_suffix("").parts
            if parts[-1] == "__main__":
                continue
            if parts[-1] == "__init__":
                parts = parts[:-1]
            names.append(".".join((package, *parts)))
    return names


def test_every_product_module_imports_alone() -> None:
    modules = _modules()
    assert "webhook.config" in modules and "descheduler.planning.planner" in modules
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, json.dumps(modules)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    failed = json.loads(proc.stdout.strip().splitlines()[-1])
    assert failed == {}, "\n".join(f"{m}: {e}" for m, e in sorted(failed.items()))
