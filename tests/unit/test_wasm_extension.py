"""``isolation: wasm`` (ADR 0085) without a kernel: budgets, refused imports, the ABI.

Each guest is WAT text (``support.wasm_guests``) run by the real wasmtime.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from core.extensions.contract import HOST_ABI_VERSION, PostProcessContext
from core.extensions.isolation.protocol.errors import HostUnavailableError
from core.extensions.isolation.wasm import (
    BudgetExceededError,
    DrawLog,
    GuestTrapError,
    WasmExtension,
    WasmLoadError,
)
from core.extensions.loading.capabilities import Capability, detect_capabilities
from core.extensions.loading.manifest import load_manifest
from support.wasm_guests import (
    ECHO,
    MEMORY_HOG,
    RUNAWAY,
    drawing_guest,
    guest,
    tool_spec,
    write_wasm_extension,
)

TOOLS = {"capabilities": ["ToolProvider"], "tools": [tool_spec("weather", city="string")]}


class FakeContext(SimpleNamespace):
    """What a wasm extension uses of its context: its config, and emit for its draws."""

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        super().__init__(config=config or {}, emitted=[])

    async def emit(self, topic: str, payload: dict[str, Any]) -> int:
        self.emitted.append((topic, payload))
        return len(self.emitted)


async def loaded(tmp_path: Path, wat: str, manifest: dict[str, Any] | None = None, **kw: Any):
    ext_dir = write_wasm_extension(tmp_path, "wx", wat, manifest)
    ext = WasmExtension(load_manifest(ext_dir), ext_dir, **kw)
    await ext.initialize(FakeContext())  # type: ignore[arg-type]
    return ext


async def call_tool(ext: Any, name: str, **args: Any) -> Any:
    [tool] = [t for t in ext.get_tools() if t.name == name]
    ctx = SimpleNamespace(context=None, tool_call_id="c1")
    import json

    return await tool.on_invoke_tool(ctx, json.dumps(args))


async def test_a_tool_gets_the_process_boundarys_message_as_json(tmp_path):
    ext = await loaded(tmp_path, guest(TOOLS, tool=ECHO))
    assert detect_capabilities(ext) == [Capability.TOOL]
    answer = await call_tool(ext, "weather", city="Paris")
    assert answer["abi_version"] == HOST_ABI_VERSION == 1
    assert answer["params"]["name"] == "weather"
    assert answer["params"]["args"] == '{"city": "Paris"}'


async def test_a_runaway_loop_is_cut_at_its_fuel_budget_and_the_extension_restarts(tmp_path):
    down: list[tuple[str, str]] = []
    ext = await loaded(
        tmp_path,
        guest(TOOLS, tool=RUNAWAY),
        {"wasm": {"fuel": 2_000_000}},
        on_status=lambda ext_id, why: down.append((ext_id, why)),
    )
    answer = await call_tool(ext, "weather", city="Oslo")  # the model sees why, the kernel lives
    assert "tool 'weather' of wasm extension 'wx' was stopped" in answer
    assert "fuel budget (wasm.fuel: 2000000 instructions)" in answer
    assert down and down[0][0] == "wx" and "fuel budget" in down[0][1]
    assert not await ext.health_check()
    with pytest.raises(HostUnavailableError, match="fuel budget"):
        await ext.remote("call_tool", {"name": "weather", "args": "{}"})
    await ext.start()  # what the supervisor does, after its backoff
    assert await ext.health_check() and ext.restarts == 1


async def test_a_runaway_loop_with_plenty_of_fuel_is_cut_at_its_time_limit(tmp_path):
    wasm = {"fuel": 100_000_000_000, "time_limit_ms": 100}
    ext = await loaded(tmp_path, guest(TOOLS, tool=RUNAWAY), {"wasm": wasm})
    with pytest.raises(BudgetExceededError, match=r"time limit \(wasm.time_limit_ms: 100\)"):
        await ext.remote("call_tool", {"name": "weather", "args": "{}"})


async def test_growing_memory_stops_at_the_cap(tmp_path):
    ext = await loaded(tmp_path, guest(TOOLS, tool=MEMORY_HOG), {"wasm": {"memory_mb": 4}})
    with pytest.raises(BudgetExceededError) as caught:
        await ext.remote("call_tool", {"name": "weather", "args": "{}"})
    assert caught.value.limit == "memory cap (wasm.memory_mb: 4)"
    assert "tool 'weather' of wasm extension 'wx'" in str(caught.value)


async def test_an_initial_memory_above_the_cap_is_refused_at_load(tmp_path):
    wat = guest(TOOLS).replace('(memory (export "memory") 1)', '(memory (export "memory") 128)')
    with pytest.raises(WasmLoadError, match="cannot instantiate"):
        await loaded(tmp_path, wat, {"wasm": {"memory_mb": 1}})


@pytest.mark.parametrize(
    ("imports", "why"),
    [
        (  # a file open: WASI is not there
            '(import "wasi_snapshot_preview1" "path_open" '
            "(func (param i32 i32 i32 i32 i32 i64 i64 i32 i32) (result i32)))",
            "imports wasi_snapshot_preview1.path_open: WASI is not offered: wasm extensions "
            "get no files, sockets",
        ),
        (  # a network connect: neither WASI's nor a host call of that name
            '(import "wasi_snapshot_preview1" "sock_connect" (func (param i32 i32) (result i32)))',
            "imports wasi_snapshot_preview1.sock_connect: WASI is not offered",
        ),
        (
            '(import "hearth" "connect" (func (param i32 i32) (result i32)))',
            "imports hearth.connect, which host ABI 1 lacks",
        ),
        (  # the clock without asking for it
            '(import "hearth" "clock_ms" (func (result i64)))',
            "imports hearth.clock_ms: declare `wasm: {clock: true}` in its manifest",
        ),
    ],
)
async def test_an_import_hearth_does_not_give_is_refused_at_load(tmp_path, imports, why):
    with pytest.raises(WasmLoadError) as caught:
        await loaded(tmp_path, guest(TOOLS, imports=imports))
    assert str(caught.value).startswith("wasm extension 'wx': ")
    assert why in str(caught.value)


async def test_a_module_built_for_another_abi_or_asking_another_is_refused(tmp_path):
    with pytest.raises(WasmLoadError, match="built for host ABI 2; this Hearth offers ABI 1"):
        await loaded(tmp_path, guest(TOOLS, abi_version=2))
    with pytest.raises(
        WasmLoadError,
        match=r"requires host ABI >=2 \(requires_abi in its manifest\), but this host speaks ABI 1",
    ):
        await loaded(tmp_path, guest(TOOLS), {"requires_abi": ">=2"})
    ext = await loaded(tmp_path, guest(TOOLS), {"requires_abi": ">=1,<2"})
    assert await ext.health_check()


async def test_granted_clock_and_randomness_are_recorded_and_replayed(tmp_path):
    wat = drawing_guest(TOOLS)
    wasm = {"clock": True, "random": True}
    context = FakeContext()
    ext_dir = write_wasm_extension(tmp_path, "wx", wat, {"wasm": wasm})
    live = WasmExtension(load_manifest(ext_dir), ext_dir)
    await live.initialize(context)  # type: ignore[arg-type]
    first = await live.remote("call_tool", {"name": "weather", "args": "{}"})
    [(topic, payload)] = context.emitted
    assert topic == "wx.wasm.draws" and payload["call"] == "tool 'weather'"
    assert [d["kind"] for d in payload["draws"]] == ["clock", "random"]

    replayed = WasmExtension(load_manifest(ext_dir), ext_dir, draws=DrawLog(payload["draws"]))
    await replayed.initialize(FakeContext())  # type: ignore[arg-type]
    assert await replayed.remote("call_tool", {"name": "weather", "args": "{}"}) == first


async def test_a_hook_and_a_post_processor_answer_through_invoke(tmp_path):
    hook = await loaded(
        tmp_path / "hook",
        guest({"capabilities": ["LlmOutputHook"]}, invoke={"type": "text", "text": "REWRITTEN"}),
    )
    assert detect_capabilities(hook) == [Capability.LLM_OUTPUT]
    assert await hook.on_llm_output("draft", None) == "REWRITTEN"

    described = {
        "capabilities": ["PostProcessorProvider"],
        "post_processors": [{"name": "verdict", "output_target": "status_panel", "params": ["x"]}],
    }
    answer = {"content": {"verdict": "fine"}, "content_type": "application/json"}
    post = await loaded(tmp_path / "post", guest(described, invoke=answer))
    assert detect_capabilities(post) == [Capability.POST_PROCESSOR_PROVIDER]
    [proc] = post.get_post_processors()
    assert (proc.name, proc.output_target) == ("verdict", "status_panel")
    assert proc.validate_param("y") == (False, "'y' is not one of x")
    result = await proc.execute(PostProcessContext("the answer", "q #verdict", "q"), "x")
    assert (result.name, result.content, result.success) == ("verdict", {"verdict": "fine"}, True)


async def test_a_guest_that_traps_in_describe_or_offers_too_much_is_refused(tmp_path):
    with pytest.raises(WasmLoadError, match=r"describe\(\) of wasm extension 'wx' trapped"):
        await loaded(
            tmp_path,
            guest(TOOLS).replace("(i64.const 4398046511", "unreachable (i64.const 4398046511"),
        )
    with pytest.raises(WasmLoadError, match="ChannelProvider, which host ABI 1 does not serve"):
        await loaded(tmp_path, guest({"capabilities": ["ChannelProvider"]}))


def test_a_guest_trap_names_the_extension_the_call_and_the_cause():
    exc = GuestTrapError("wx", "on_llm_output()", "wasm trap: unreachable")
    assert str(exc) == "on_llm_output() of wasm extension 'wx' trapped: wasm trap: unreachable"


async def test_a_guest_log_line_lands_in_the_extensions_log(tmp_path, caplog):
    imports = '(import "hearth" "log" (func $log (param i32 i32)))'
    body = "(call $log (i32.const 0) (i32.const 5)) (i64.const 0)"  # "{\"ok\"" then a trap
    ext = await loaded(tmp_path, guest(TOOLS, tool=body, imports=imports))
    with caplog.at_level("INFO", logger="ext.wx"), pytest.raises(GuestTrapError):
        await ext.remote("call_tool", {"name": "weather", "args": "{}"})
    assert [r.getMessage() for r in caplog.records if r.name == "ext.wx"] == ['{"ok"']
