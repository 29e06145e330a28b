"""The manifest's ``isolation: wasm``, ``wasm:`` and ``requires_abi`` (ADR 0085), and
what a wasm extension's grant asks."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from core.extensions.access.grants import GrantRequest
from core.extensions.loading.manifest import Manifest, abi_refusal


def manifest(**fields) -> Manifest:
    return Manifest.model_validate({"id": "wx", "name": "Wx", **fields})


def test_naming_a_module_means_wasm_with_small_default_budgets():
    m = manifest(wasm={"module": "guest.wasm"})
    assert m.isolation == "wasm" and m.entrypoint is None
    assert (m.wasm.fuel, m.wasm.time_limit_ms, m.wasm.memory_mb) == (200_000_000, 2_000, 32)
    assert not m.wasm.clock and not m.wasm.random


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"isolation": "wasm"}, "isolation: wasm needs a `wasm:` section naming its module"),
        (
            {"isolation": "process", "entrypoint": "m:E", "wasm": {"module": "g.wasm"}},
            "a module runs only with `isolation: wasm`, not process",
        ),
        ({"wasm": {"module": "../other/g.wasm"}}, "must be a path inside the extension"),
        ({"wasm": {"module": "guest.py"}}, "must end in .wasm (a module) or .wat"),
        ({"wasm": {"module": "g.wasm", "memory_mb": 0}}, "greater than or equal to 1"),
        (
            {"wasm": {"module": "g.wasm"}, "permissions": {"network": True}},
            "a wasm extension has no network or file access",
        ),
        (
            {"wasm": {"module": "g.wasm"}, "entrypoint": "m:E"},
            "isolation: wasm runs its module: drop `entrypoint` and `agent`",
        ),
        (
            {"wasm": {"module": "g.wasm"}, "requires_abi": "version one"},
            '\'version one\' is not a version specifier such as ">=1,<2" or "==1"',
        ),
    ],
)
def test_a_wrong_wasm_manifest_says_what_is_wrong(fields, message):
    with pytest.raises(ValidationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        manifest(**fields)


def test_requires_abi_admits_or_refuses_the_host_abi():
    assert abi_refusal(manifest(wasm={"module": "g.wasm"}), 1) is None
    assert abi_refusal(manifest(wasm={"module": "g.wasm"}, requires_abi=">=1,<2"), 1) is None
    assert abi_refusal(manifest(wasm={"module": "g.wasm"}, requires_abi=">=2"), 1) == (
        "extension 'wx' requires host ABI >=2 (requires_abi in its manifest), "
        "but this host speaks ABI 1: install a version of the extension written for it"
    )
    # the other boundaries take the field too
    assert manifest(entrypoint="m:E", requires_abi="==1").requires_abi == "==1"


def test_a_wasm_extension_asking_nothing_needs_no_grant_but_the_clock_does():
    plain = GrantRequest.from_manifest(
        manifest(wasm={"module": "g.wasm"}), default_isolation="inprocess", code="c"
    )
    assert not plain.needs_grant and plain.describe() == []
    asking = GrantRequest.from_manifest(
        manifest(wasm={"module": "g.wasm", "clock": True, "random": True}),
        default_isolation="inprocess",
        code="c",
    )
    assert asking.describe() == [
        "reads the clock (recorded for replay)",
        "draws random numbers (recorded for replay)",
    ]
    assert asking.digest != plain.digest  # a grant for one does not cover the other


async def test_the_documented_wat_guest_rewrites_an_answer(tmp_path):
    """docs/extensions.md's WAT example runs as written."""
    from pathlib import Path

    from core.extensions.sdk.testing import FakeContext, load_extension, running
    from support.wasm_guests import write_wasm_extension

    docs = (Path(__file__).parents[2] / "docs" / "extensions.md").read_text()
    wat = docs.split("```wat\n", 1)[1].split("```", 1)[0]
    ext_dir = write_wasm_extension(tmp_path, "doc", wat, {"permissions": {"conversations": True}})
    ext = load_extension(ext_dir)
    async with running(ext, FakeContext(tmp_path / "data", "doc")):
        assert await ext.on_llm_output("draft", None) == "REWRITTEN"
