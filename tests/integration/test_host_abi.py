"""The versioned host ABI (issue 43, ADR 0086): ``requires_abi`` in a manifest,
checked before any of the extension's code runs; ``abi_version`` in the plugin
host's load/ready exchange, checked by both sides."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import ext_code
from core.extensions.contract import HOST_ABI_VERSION
from core.extensions.isolation.host.plugin_host import HostServer
from core.extensions.isolation.kernel.confinement import probe
from core.extensions.isolation.kernel.proxy import ready_refusal
from core.extensions.isolation.protocol.messages import LoadParams, Ready
from core.extensions.loading.manifest import ManifestError, abi_refusal, load_manifest
from support.harness import running_kernel

needs_bwrap = pytest.mark.skipif(
    not probe().available, reason="an isolated extension without network needs bubblewrap"
)


def test_the_host_abi_is_version_1():
    assert HOST_ABI_VERSION == 1


@pytest.mark.parametrize("spec", ["banana", ">=one", "", " "])
def test_a_requires_abi_that_is_not_a_version_specifier_is_refused_naming_the_field(
    spec, make_ext, ext_root
):
    make_ext("odd", ext_code(), {"requires_abi": spec})
    with pytest.raises(ManifestError) as err:
        load_manifest(ext_root / "odd")
    assert "requires_abi:" in str(err.value) and "not a version specifier" in str(err.value)
    assert str(ext_root / "odd" / "manifest.yaml") in str(err.value)


@pytest.mark.parametrize(
    ("spec", "fits"), [(">=1,<2", True), ("==1", True), ("~=1.0", True), ("<1", False)]
)
def test_requires_abi_is_checked_against_the_hosts_version(spec, fits, make_ext, ext_root):
    make_ext("spec", ext_code(), {"requires_abi": spec})
    refusal = abi_refusal(load_manifest(ext_root / "spec"), HOST_ABI_VERSION)
    assert (refusal is None) == fits
    if not fits:
        assert refusal == (
            f"extension 'spec' requires host ABI {spec} (requires_abi in its manifest), "
            "but this host speaks ABI 1: install a version of the extension written for it"
        )


def test_the_kernel_refuses_a_host_that_answers_another_abi(make_ext, ext_root):
    make_ext("plain", ext_code())
    manifest = load_manifest(ext_root / "plain")
    assert ready_refusal(manifest, Ready(HOST_ABI_VERSION)) is None
    refusal = ready_refusal(manifest, Ready(HOST_ABI_VERSION + 1))
    assert refusal == "the plugin host of 'plain' speaks host ABI 2, the kernel ABI 1"
    make_ext("old", ext_code(), {"requires_abi": "==0"})
    old = ready_refusal(load_manifest(ext_root / "old"), Ready(HOST_ABI_VERSION))
    assert old is not None and "requires host ABI ==0" in old


async def test_the_host_refuses_a_kernel_that_speaks_another_abi(tmp_path: Path):
    server = HostServer()
    server.peer = object()  # type: ignore[assignment]  # refused before it is used
    load = LoadParams("x", str(tmp_path), "main:Ext", str(tmp_path), HOST_ABI_VERSION + 1)
    with pytest.raises(RuntimeError, match="the kernel speaks host ABI 2, this plugin host ABI 1"):
        await server.rpc_load(load)
    assert server.ext is None


def test_the_load_frame_must_carry_the_abi_version():
    from core.extensions.isolation.protocol.messages import HOST_REQUESTS, FrameError, decode

    with pytest.raises(FrameError, match="load: missing key 'abi_version'"):
        decode(
            HOST_REQUESTS,
            "load",
            {"ext_id": "x", "ext_dir": "d", "entrypoint": "m:E", "data_dir": "d"},
        )


OLD = ext_code(
    header="""
    from pathlib import Path
    Path(__file__).with_name("imported").write_text("its code ran")
    """
)


@needs_bwrap
async def test_an_old_abi_isolated_extension_is_refused_at_load_and_a_fitting_one_runs(
    make_ext, ext_root, settings_file
):
    make_ext("old", OLD, {"isolation": "process", "requires_abi": "<1"})
    make_ext("current", ext_code(), {"isolation": "process", "requires_abi": ">=1,<2"})
    async with running_kernel(settings_file()) as k:
        old = k.loader.records["old"]
        assert old.status == "error" and old.instance is None
        assert old.error == (
            "extension 'old' requires host ABI <1 (requires_abi in its manifest), but this "
            "host speaks ABI 1: install a version of the extension written for it"
        )
        assert not list(ext_root.parent.rglob("imported"))  # refused before its code ran
        assert k.loader.records["current"].live  # its host answered `load` with ABI 1
        # a reload checks it too
        reason = k.loader.refusal_for(
            load_manifest(ext_root / "old"), ext_root / "old", old.code_digest
        )
        assert reason == old.error
