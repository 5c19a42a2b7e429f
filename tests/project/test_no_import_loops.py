"""No two files of the product import each other in a circle, however long the circle.

The import contracts check loops between sibling packages; this checks the files
themselves, the way a reader meets them: follow the imports from any module and you
never come back to it. Imports made only for type checking are left out, as the
contracts leave them out: they never run."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import grimp

PRODUCT = ("gangplace", "webhook", "descheduler", "kubectl_corral")


def import_loops(
    modules: Iterable[str], imports_of: Callable[[str], Iterable[str]]
) -> list[list[str]]:
    """Each set of modules that import each other in a circle (a strongly connected
    part of the import graph with more than one module, or a module importing itself),
    sorted. Tarjan's algorithm, without recursion."""
    known = set(modules)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    loops: list[list[str]] = []
    work: list[tuple[str, list[str]]] = []

    def enter(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        work.append((v, sorted(w for w in imports_of(v) if w in known)))

    for root in sorted(known):
        if root in index:
            continue
        enter(root)
        while work:
            v, todo = work[-1]
            if todo:
                w = todo.pop()
                if w not in index:
                    enter(w)
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[v])
            if low[v] == index[v]:
                part = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    part.append(w)
                    if w == v:
                        break
                if len(part) > 1 or v in imports_of(v):
                    loops.append(sorted(part))
    return sorted(loops)


def test_no_file_of_the_product_imports_itself_round_a_circle() -> None:
    graph = grimp.build_graph(*PRODUCT, exclude_type_checking_imports=True)
    loops = import_loops(graph.modules, graph.find_modules_directly_imported_by)
    assert loops == [], "modules that import each other in a circle: " + "; ".join(
        " <-> ".join(part) for part in loops
    )


def test_the_check_finds_a_long_circle_and_nothing_else() -> None:
    edges = {
        "a": {"b"},
        "b": {"c"},
        "c": {"a", "d"},  # a -> b -> c -> a
        "d": {"e"},
        "e": set(),
        "f": {"f"},  # a module importing itself
        "g": {"e"},
    }
    assert import_loops(edges, lambda m: edges[m]) == [["a", "b", "c"], ["f"]]
    del edges["c"]
    edges["c"] = {"d"}
    assert import_loops(edges, lambda m: edges[m]) == [["f"]]
