"""Package doors declare each exported name once (ADR 0081).

A lazy door names each export in one ``from core.pkg.home import Name as Name``
line of its ``TYPE_CHECKING`` block; ``__all__`` and where a name lives are
read from those lines, so a door that also keeps an ``__all__`` list or a
homes table has gone back to three copies that drift apart."""

from __future__ import annotations

import ast
import importlib

from conftest import PROJECT_ROOT
from core.runtime.lazy_door import declared_homes

DOORS = sorted(
    path
    for path in (PROJECT_ROOT / "core").rglob("__init__.py")
    if "lazy_door(" in path.read_text(encoding="utf-8")
)


def _package(path: object) -> str:
    return ".".join(path.parent.relative_to(PROJECT_ROOT).parts)  # type: ignore[attr-defined]


def test_the_heavy_packages_keep_lazy_doors():
    # the doors ADR 0068 made lazy so `main.py usage` and `events` stay light
    packages = {_package(path) for path in DOORS}
    assert {"core.agents", "core.events", "core.kernel.spending", "core.skills"} <= packages


def test_a_lazy_door_writes_each_name_once():
    repeated = []
    for path in DOORS:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            targets = node.targets if isinstance(node, ast.Assign) else []
            names = {t.id for t in targets if isinstance(t, ast.Name)}
            if names & {"__all__", "_HOMES"}:
                repeated.append(f"{path.relative_to(PROJECT_ROOT)}:{node.lineno}: {names}")
            if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
                repeated.extend(
                    f"{path.relative_to(PROJECT_ROOT)}:{node.lineno}: write '{a.name} as {a.name}'"
                    for statement in node.body
                    if isinstance(statement, ast.ImportFrom)
                    for a in statement.names
                    if a.asname != a.name
                )
    assert not repeated, "declare these names once, in the TYPE_CHECKING block:\n" + "\n".join(
        repeated
    )


def test_every_declared_name_resolves_to_its_home():
    for path in DOORS:
        package = _package(path)
        door = importlib.import_module(package)
        homes = declared_homes(package, str(path))
        assert door.__all__ == sorted(homes), package
        for name, (module, original) in homes.items():
            if module.rsplit(".", 1)[1] == name:
                continue  # once imported, the submodule of that name shadows it (Python's rule)
            assert getattr(door, name) is getattr(importlib.import_module(module), original)
        assert set(homes) <= set(dir(door))


def test_a_door_names_an_undeclared_attribute_in_its_error():
    import core.events

    try:
        core.events.NoSuchThing  # noqa: B018
    except AttributeError as error:
        assert "core.events" in str(error) and "NoSuchThing" in str(error)
    else:
        raise AssertionError("an undeclared name must raise AttributeError")
