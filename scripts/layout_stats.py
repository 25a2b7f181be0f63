#!/usr/bin/env python3
"""Count what a newcomer meets in the scoring code: files, lines, parts, arrows, levels, circles.

    .venv/bin/python scripts/layout_stats.py

Reads the import graph with grimp (which import-linter uses; function-level imports
count, as they do for the contracts). The scoring code is `scoring` plus, once they are
top-level, `engine` and `judges`. Two granularities:

- parts: the direct children of `scoring` (a package counts as one node, its inside
  squashed) and `engine`, `judges`; an arrow is "some module of A imports some module of
  B". Levels: the longest chain of arrows after each circle is shrunk to one node (so 1
  level means nothing imports anything). Circles: groups of parts that reach each other;
  back arrows: the arrows inside such groups (the ones that "run back up").
- modules: the same counts over every module.

Migrations are left out (history; they import what existed when they were written).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

# LAYOUT_ROOT=/path/to/checkout counts another checkout (e.g. main before a change).
ROOT = Path(os.environ.get("LAYOUT_ROOT") or Path(__file__).resolve().parent.parent)
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

import grimp  # noqa: E402


def packages() -> list[str]:
    return [p for p in ("scoring", "engine", "judges") if importlib.util.find_spec(p)]


def part_of(module: str) -> str:
    bits = module.split(".")
    if bits[0] != "scoring":
        return bits[0]
    return ".".join(bits[:2]) if len(bits) > 1 else "scoring"


def strongly_connected(nodes: set[str], edges: set[tuple[str, str]]) -> list[set[str]]:
    """Tarjan's algorithm, iterative."""
    succ: dict[str, list[str]] = {n: [] for n in nodes}
    for a, b in edges:
        succ[a].append(b)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on, stack, out, counter = set(), [], [], [0]
    for root in sorted(nodes):
        if root in index:
            continue
        work = [(root, iter(succ[root]))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            node, it = work[-1]
            for nxt in it:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter[0]
                    counter[0] += 1
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(succ[nxt])))
                    break
                if nxt in on:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = set()
                    while True:
                        n = stack.pop()
                        on.discard(n)
                        group.add(n)
                        if n == node:
                            break
                    out.append(group)
    return out


def levels(nodes: set[str], edges: set[tuple[str, str]], groups: list[set[str]]) -> int:
    where = {n: i for i, g in enumerate(groups) for n in g}
    dag = {(where[a], where[b]) for a, b in edges if where[a] != where[b]}
    succ: dict[int, set[int]] = {i: set() for i in range(len(groups))}
    for a, b in dag:
        succ[a].add(b)
    depth: dict[int, int] = {}

    def d(i: int) -> int:
        if i not in depth:
            depth[i] = 1 + max((d(j) for j in succ[i]), default=0)
        return depth[i]

    sys.setrecursionlimit(10000)
    return max((d(i) for i in succ), default=0)


def report(title: str, nodes: set[str], edges: set[tuple[str, str]]) -> None:
    groups = strongly_connected(nodes, edges)
    circles = [g for g in groups if len(g) > 1]
    back = sum(1 for a, b in edges for g in circles if a in g and b in g)
    print(
        f"{title}: {len(nodes)} nodes, {len(edges)} arrows, {levels(nodes, edges, groups)} levels,"
        f" {len(circles)} circles ({back} arrows inside them)"
    )
    for g in circles:
        print("   circle:", " <-> ".join(sorted(g)))


def main() -> None:
    roots = packages()
    graph = grimp.build_graph(*roots)
    modules = {m for m in graph.modules if ".migrations" not in m}
    files = [m for m in modules]
    lines = 0
    for root in roots:
        for path in (ROOT / root).rglob("*.py"):
            if "migrations" not in path.parts:
                lines += sum(1 for _ in path.open(encoding="utf-8"))
    print(f"packages: {', '.join(roots)}; {len(files)} modules, {lines} lines (no migrations)")
    m_edges = {
        (a, b)
        for a in modules
        for b in graph.find_modules_directly_imported_by(a)
        if b in modules and a != b
    }
    parts = {part_of(m) for m in modules} - {"scoring"}
    p_edges = {
        (part_of(a), part_of(b))
        for a, b in m_edges
        if part_of(a) != part_of(b) and "scoring" not in (part_of(a), part_of(b))
    }
    report("parts", parts, p_edges)
    print("   parts:", " ".join(sorted(parts)))
    report("modules", modules, m_edges)


if __name__ == "__main__":
    main()
