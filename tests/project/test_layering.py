"""The package structure holds: no import cycle among fedaudit's, attacks' and strategies'
modules, counting imports inside functions and under TYPE_CHECKING (grimp sees them all),
and the size limits docs/architecture.md states.  `lint-imports` checks the layers."""

import grimp

from tests.helpers.paths import ROOT


def _cycles(graph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    mods = sorted(graph.modules)
    adj = {m: sorted(set(graph.find_modules_directly_imported_by(m)) & set(mods)) for m in mods}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in adj[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for m in mods:
        if m not in index:
            visit(m)
    return out


def test_no_import_cycle():
    graph = grimp.build_graph("fedaudit", "attacks", "strategies")
    assert _cycles(graph) == []


def test_the_tools_cycle_finder_finds_a_cycle():
    class Graph:
        modules = {"a", "b", "c"}
        edges = {"a": {"b"}, "b": {"a"}, "c": {"a"}}

        def find_modules_directly_imported_by(self, m):
            return self.edges[m]

    assert _cycles(Graph()) == [["a", "b"]]


def test_modules_stay_small_and_the_top_level_short():
    sizes = {p.relative_to(ROOT).as_posix(): len(p.read_text(encoding="utf-8").splitlines())
             for d in ("fedaudit", "attacks", "strategies") for p in (ROOT / d).rglob("*.py")}
    assert {p: n for p, n in sizes.items() if n > 400} == {}
    top = sorted(p.name for p in (ROOT / "fedaudit").glob("*.py") if p.name != "__init__.py")
    assert len(top) <= 10, top
