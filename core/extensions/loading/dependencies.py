"""Topological order of extensions by ``depends_on``.

Missing dependencies and cycles are reported naming every extension
involved; those extensions and everything depending on them are skipped,
the rest keep their order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence


def order_by_dependencies(
    deps: Mapping[str, Sequence[str]],
) -> tuple[list[str], dict[str, str]]:
    """Return (load order, {skipped id: reason}).

    ``deps`` maps each loadable extension id to its ``depends_on`` list, in
    discovery order (which breaks ties, so the result is deterministic).
    """
    skipped: dict[str, str] = {}
    for ext_id, needs in deps.items():
        missing = [d for d in needs if d not in deps]
        if missing:
            skipped[ext_id] = f"missing dependency: {', '.join(missing)}"

    for cycle in _find_cycles(deps):
        path = " -> ".join([*cycle, cycle[0]])
        for ext_id in cycle:
            skipped.setdefault(ext_id, f"dependency cycle: {path}")

    order: list[str] = []
    placed: set[str] = set()
    remaining = [e for e in deps if e not in skipped]
    while remaining:
        progressed = False
        for ext_id in list(remaining):
            needs = deps[ext_id]
            bad = [d for d in needs if d in skipped]
            if bad:
                skipped[ext_id] = f"dependency not loaded: {', '.join(bad)}"
                remaining.remove(ext_id)
                progressed = True
            elif all(d in placed for d in needs):
                order.append(ext_id)
                placed.add(ext_id)
                remaining.remove(ext_id)
                progressed = True
        if not progressed:  # pragma: no cover - cycles were removed above
            for ext_id in remaining:
                skipped[ext_id] = "dependency cycle"
            break
    return order, skipped


def _find_cycles(deps: Mapping[str, Sequence[str]]) -> list[list[str]]:
    """Each elementary cycle once, as the list of ids along it (DFS colouring)."""
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1 = on stack, 2 = done
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for dep in deps.get(node, ()):
            if dep not in deps:
                continue
            if state.get(dep) == 1:
                cycles.append(stack[stack.index(dep) :])
            elif dep not in state:
                visit(dep)
        stack.pop()
        state[node] = 2

    for node in deps:
        if node not in state:
            visit(node)
    return cycles


def dependents_of(ext_id: str, deps: Mapping[str, Sequence[str]]) -> list[str]:
    """Every extension that (transitively) depends on ``ext_id``."""
    found: list[str] = []
    frontier = [ext_id]
    while frontier:
        current = frontier.pop()
        for other, needs in deps.items():
            if current in needs and other not in found and other != ext_id:
                found.append(other)
                frontier.append(other)
    return found
