"""The docs send a newcomer to files and modules that exist: every repository path that
README.md, docs/ and the folders' READMEs name in backticks (inline or in a code block),
every module a ``python -m`` runs, every dotted module of ours they name, and, in
docs/architecture.md, every file named bare (``gang.py``) in the folder its paragraph
names. (Links are checked by test_docs.py::test_relative_links_resolve.)"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
# Not part of the repository: made by `make`, git and the tools.
LOCAL = {".git", ".venv", "build", "dist"}
# Where a repository path starts: every top-level entry, those the docs must not lose
# included (a doc naming `bench/x.py` after bench/ is gone is caught), and `gangplace/`,
# which the docs must spell `shared/gangplace/` to be found from the checkout.
TOPS = {
    p.name
    for p in ROOT.iterdir()
    if p.name not in LOCAL and not p.name.endswith(("_cache", ".egg-info", ".hypothesis"))
} | {"bench", "descheduler", "docs", "kubectl_corral", "scripts", "shared", "tests", "webhook"}
NOT_A_PATH = {"gangplace"} - TOPS
OUR_PACKAGES = (
    "gangplace",
    "webhook",
    "descheduler",
    "kubectl_corral",
    "tests",
    "bench",
    "scripts",
)
FILE_SUFFIXES = {"py", "md", "yaml", "yml", "json", "toml", "txt", "csv", "gz", "png", "cfg"}
# Placeholders in a named path or module: NAME, <choice>.
PLACEHOLDER = re.compile(r"<[^>]+>|\b[A-Z][A-Z_]{2,}\b")


def doc_files() -> list[Path]:
    """README.md, docs/, and the READMEs of folders (webhook/fixtures/...)."""
    inner = [p for top in sorted(TOPS) if (ROOT / top).is_dir() for p in (ROOT / top).rglob("*.md")]
    return [
        ROOT / "README.md",
        *sorted(DOCS.glob("*.md")),
        *sorted(set(inner) - set(DOCS.glob("*.md"))),
    ]


def code_spans(text: str) -> list[str]:
    """What the text shows as code: each inline span and each line of a fenced block."""
    fenced = re.findall(r"^```[^\n]*\n(.*?)^```", text, re.S | re.M)
    prose = re.sub(r"^```[^\n]*\n.*?^```", "", text, flags=re.S | re.M)
    spans = re.findall(r"(?<!`)`([^`\n]+)`(?!`)", prose)
    return spans + [line for block in fenced for line in block.splitlines()]


def words(span: str) -> list[str]:
    return [w.strip("\"'()[],;:") for w in span.split()]


def repo_paths(span: str) -> list[str]:
    """The repository paths in one code span: words whose first part is a top-level entry."""
    out = []
    for w in words(span):
        w = re.sub(r"(#|:\d).*$", "", w)  # an anchor or a line number
        first = w.split("/", 1)[0]
        if "/" in w and (first in TOPS or first in NOT_A_PATH):
            out.append(w)
    return out


def missing_paths(text: str, doc_dir: Path) -> list[str]:
    """The paths ``text`` names that are not in the checkout (a glob must match one)."""
    missing = []
    for span in code_spans(text):
        # `prometheus/corral-alerts.yaml` in docs/metrics.md: beside the doc.
        beside = [
            w
            for w in words(span)
            if re.match(r"[\w-]+/", w)
            and (doc_dir / w.split("/", 1)[0]).is_dir()
            and doc_dir != ROOT
        ]
        for base, paths in ((ROOT, repo_paths(span)), (doc_dir, beside)):
            for path in paths:
                pattern = PLACEHOLDER.sub("*", path)
                if any(c in pattern for c in "*?["):
                    found = any(base.glob(pattern.rstrip("/")))
                else:
                    found = (base / pattern).exists()
                if not found:
                    missing.append(path)
    return missing


def _imports(name: str) -> bool:
    """``name`` is a module that imports, or an attribute of one (``a.b.func``)."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def run_modules(text: str) -> list[str]:
    """The modules ``python -m`` runs in ``text`` (a placeholder stands for any of them)."""
    out = []
    for span in code_spans(text):
        out += re.findall(r"python[\d.]*\s+-m\s+([\w.<>]+)", span)
    return out


def dotted_names(text: str, ours_only: bool) -> list[str]:
    names = []
    for span in code_spans(text):
        m = re.fullmatch(r"[a-z_][a-z0-9_]*(?:\.[a-z_][a-z0-9_]*)+", span.strip())
        if not m or span.rsplit(".", 1)[1] in FILE_SUFFIXES:
            continue
        if ours_only and not span.startswith(tuple(p + "." for p in OUR_PACKAGES)):
            continue
        names.append(span.strip())
    return names


def unimportable(names: list[str]) -> list[str]:
    bad = []
    for name in names:
        if PLACEHOLDER.search(name):
            package = PLACEHOLDER.split(name)[0].rstrip(".")
            if not _imports(package):
                bad.append(name)
        elif not _imports(name):
            bad.append(name)
    return bad


def misplaced_bare_files(text: str) -> list[str]:
    """In each paragraph or list item, a file named bare (`gang.py`, `policies/`) must be
    in a folder the same paragraph names before it, by its path (`shared/gangplace/engine/`)
    or bare in turn (`policies/`, then `fgd.py`)."""
    bad = []
    for chunk in re.split(r"\n\s*\n|\n(?=- |\d+\. )", text):
        folders: list[Path] = []
        for span in code_spans(chunk):
            for path in repo_paths(span):
                p = ROOT / path
                folders.append(p if path.endswith("/") or p.is_dir() else p.parent)
            for w in words(span):
                if not re.fullmatch(r"\w+\.py|\w+/", w) or w[:-1] in TOPS:
                    continue
                found = [f / w for f in folders if (f / w).exists()]
                if not found:
                    bad.append(w)
                elif w.endswith("/"):
                    folders += found
    return bad


# --- the docs as they are ---------------------------------------------------------------


def test_every_repository_path_the_docs_name_exists() -> None:
    named = 0
    for doc in doc_files():
        text = doc.read_text()
        named += sum(len(repo_paths(s)) for s in code_spans(text))
        missing = missing_paths(text, doc.parent)
        assert missing == [], f"{doc.relative_to(ROOT)} names {missing}, not in the checkout"
    assert named >= 100


def test_every_module_the_docs_run_with_python_m_imports() -> None:
    run = [m for doc in doc_files() for m in run_modules(doc.read_text())]
    assert len(run) >= 8
    assert unimportable(run) == []


def test_every_module_of_ours_the_docs_name_imports() -> None:
    named = [n for doc in doc_files() for n in dotted_names(doc.read_text(), ours_only=True)]
    assert len(named) >= 15
    assert unimportable(named) == []


def test_every_dotted_module_of_the_architecture_imports() -> None:
    named = dotted_names((DOCS / "architecture.md").read_text(), ours_only=False)
    assert {"gangplace.sim", "descheduler.api", "webhook.admission"} <= set(named)
    assert unimportable(named) == []


def test_the_architecture_names_each_file_in_its_folder() -> None:
    text = (DOCS / "architecture.md").read_text()
    assert len(re.findall(r"`\w+\.py`", text)) >= 30
    assert misplaced_bare_files(text) == []


# --- the checks can fail ----------------------------------------------------------------


def test_the_checks_name_what_is_gone() -> None:
    text = (
        "The server is `webhook/server.py`, certificates in `webhook/tls.py`; see\n"
        "`shared/gangplace/sim/` and `docs/nope.md`, `tests/builders/*.py` and\n"
        "`tests/test_*.py`, and the files in `gangplace/thirdparty.py`.\n\n"
        "```sh\n.venv/bin/python -m bench.nope --json\npython -m bench.NAME\n```\n"
    )
    assert missing_paths(text, DOCS) == [
        "webhook/tls.py",
        "docs/nope.md",
        "tests/test_*.py",
        "gangplace/thirdparty.py",
    ]
    assert unimportable(run_modules(text)) == ["bench.nope"]
    names = ["gangplace.sim", "gangplace.trace", "gangplace.mover.search_moves.fit_with_moves"]
    names += ["gangplace.mover.search_moves.no_such_function"]
    assert unimportable(names) == [
        "gangplace.trace",
        "gangplace.mover.search_moves.no_such_function",
    ]
    assert misplaced_bare_files(
        "- The edge (`shared/gangplace/kube/`): `client.py`, `evictor.py`, `gang.py`.\n"
        "- The engine (`shared/gangplace/engine/`): `gang.py`, `policies/`: `fgd.py`.\n"
        "- The harness: `replay.py`.\n"
    ) == ["gang.py", "replay.py"]
