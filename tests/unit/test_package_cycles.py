"""``core``'s packages import each other in one direction: no package cycle
(ADR 0081). ``lint-imports`` checks the declared layers; this checks that no
pair of packages, in a layer or across, reaches back to itself.

One import still points up, as the layers contract's one ignored import: the
settings derive the hook names a program may implement from the contract's
table of hook specs (ADR 0041, 0081)."""

from __future__ import annotations

from collections import defaultdict

import grimp

STILL_IGNORED = {("core.config.settings", "core.extensions.contract.hook_specs")}


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one package (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in edges.get(node, ()):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in list(edges):
        if node not in index:
            visit(node)
    return found


def test_cores_packages_import_each_other_in_one_direction():
    graph = grimp.build_graph("core", exclude_type_checking_imports=True)
    edges: dict[str, set[str]] = defaultdict(set)
    for module in graph.modules:
        package = ".".join(module.split(".")[:2])
        for imported in graph.find_modules_directly_imported_by(module):
            if (module, imported) in STILL_IGNORED:
                continue
            other = ".".join(imported.split(".")[:2])
            if other != package:
                edges[package].add(other)
    assert _cycles(edges) == []
