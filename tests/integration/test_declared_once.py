"""A hook point and a guarded context method are each declared once (issue 42, ADR 0084).

A hook point is its ``@hook_point`` row on the protocol; a context method's
permission is its ``@needs`` beside the method, with the ``Permission``'s grant
wording. The ``Capability`` members, the manifest's permission fields, the
grant's words, the kernel context's refusals and the docs' tables are built
from them — and ``bench/declared_once.py`` proves the file counts by adding
one of each to a copy of the tree.
"""

from __future__ import annotations

import asyncio
import inspect
from pathlib import Path
from typing import Any, Protocol, get_type_hints, runtime_checkable

import pytest

from bench import declared_once
from core.config import Settings
from core.extensions.context.kernel_context import KernelContext
from core.extensions.context.services import KernelServices
from core.extensions.contract import HOOK_SPECS, ExtensionContext, TurnContext
from core.extensions.contract.hook_declaration import hook_point
from core.extensions.contract.permissions import declared_needs
from core.extensions.errors import PermissionDeniedError
from core.extensions.loading.capabilities import PERMISSIONS, Capability
from core.extensions.loading.docs_tables import GENERATED, stale
from core.extensions.loading.manifest import PERMISSION_FLAGS, Manifest, Permissions

NEEDS = [(m, need) for m, needs in declared_needs(ExtensionContext).items() for need in needs]


@pytest.mark.parametrize("change", ["hook_point", "context_method"])
def test_a_new_hook_point_or_guarded_context_method_touches_at_most_its_budget_of_files(
    change: str, tmp_path: Path
) -> None:
    edits = {"hook_point": declared_once.HOOK_POINT, "context_method": declared_once.CONTEXT_METHOD}
    checks = {
        "hook_point": declared_once.CHECK_HOOK_POINT,
        "context_method": declared_once.CHECK_CONTEXT_METHOD,
    }
    report = declared_once.prove(change, edits[change], checks[change], tmp_path)
    assert report["count"] <= declared_once.BUDGETS[change], report["files"]
    assert report["count"] < report["before"]
    assert report.get("digest_unchanged", True), "a manifest that asks nothing new kept its digest"


def test_the_docs_tables_say_what_the_contract_declares() -> None:
    assert stale() == [], (
        "run `python -m core.extensions.loading.docs_tables` to regenerate "
        f"{', '.join(t.page for t in GENERATED)}"
    )


def test_each_hook_point_has_its_capability_member_and_permission() -> None:
    for spec in HOOK_SPECS:
        assert Capability[spec.member].value == spec.capability
        assert PERMISSIONS[Capability[spec.member]] == spec.permission
        assert spec.when, f"{spec.capability}: the docs' 'when' column is empty"
    assert Capability.TAG.value == "TagHook"  # the public names stay


def test_a_hook_point_naming_a_method_its_protocol_lacks_is_refused_naming_it() -> None:
    with pytest.raises(TypeError, match=r"Wrong declares no method 'on_nothing'"):

        @hook_point("on_nothing", ("turn",), when="never")
        @runtime_checkable
        class Wrong(Protocol):
            async def on_something(self, turn: TurnContext) -> None: ...


def test_the_manifests_boolean_permissions_are_the_declared_ones() -> None:
    booleans = {
        name for name, f in Permissions.model_fields.items() if f.annotation in (bool, "bool")
    }
    assert booleans == {p.key for p in PERMISSION_FLAGS}
    for permission in PERMISSION_FLAGS:
        assert Permissions.model_fields[permission.key].default is permission.default


def _context(**permissions: bool) -> KernelContext:
    services = KernelServices(
        settings=Settings(),
        bus=None,  # type: ignore[arg-type]
        get_instance=lambda _: None,
        request_restart=lambda _: None,
        request_shutdown=lambda: None,
        secrets={},
        state=None,  # type: ignore[arg-type]
    )
    manifest = Manifest(id="w", name="W", entrypoint="main:E", permissions=permissions)
    return KernelContext(manifest, Path("."), services)


def _arguments(method: str) -> list[Any]:
    function = vars(ExtensionContext)[method]
    hints = get_type_hints(function)
    samples = {str: "x", int: 1}
    params = list(inspect.signature(function).parameters.values())[1:]
    return [samples.get(hints[p.name], "list") for p in params if p.default is p.empty]


@pytest.mark.parametrize(
    ("method", "need"), NEEDS, ids=[f"{m}-{n.permission.key}" for m, n in NEEDS]
)
def test_the_kernel_context_refuses_each_declared_need_in_its_words(method: str, need: Any) -> None:
    others = {n.permission.key: True for n in declared_needs(ExtensionContext)[method]}
    context = _context(**{**others, need.permission.key: False})
    with pytest.raises(PermissionDeniedError) as refused:
        result = getattr(context, method)(*_arguments(method))
        if inspect.isawaitable(result):
            asyncio.run(result)  # type: ignore[arg-type]
    assert f"{need.what} (declare `permissions.{need.permission.key}: true`" in str(refused.value)
