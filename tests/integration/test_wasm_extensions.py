"""``isolation: wasm`` in a running kernel (ADR 0085): the model calls a wasm tool, a
wasm hook rewrites the answer the user gets, a trapping tool fails that call only
and its extension comes back by itself; modules refused at load say why.
"""

from __future__ import annotations

from agents.testing import ScriptedModel, assistant_message, function_call

from conftest import grant_all
from support.bundled import tool_output
from support.harness import CAPTURE_CHANNEL, CAPTURE_MANIFEST, running_kernel, wait_for
from support.wasm_guests import ECHO, RUNAWAY, guest, tool_spec, write_wasm_extension

WEATHER = {"capabilities": ["ToolProvider"], "tools": [tool_spec("weather", city="string")]}
POLISH = {"capabilities": ["LlmOutputHook"]}
CONVERSATIONS = {"permissions": {"conversations": True}}


def sent(kernel) -> list[str]:
    return [text for _, _, text in kernel.loader.instance("capture")._log()]


async def test_the_model_calls_a_wasm_tool_and_a_wasm_hook_rewrites_the_answer(
    make_ext, settings_file, ext_root
):
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    write_wasm_extension(ext_root, "weather", guest(WEATHER, tool=ECHO))
    polished = {"type": "text", "text": "Paris: sunny (checked by a wasm tool)"}
    write_wasm_extension(ext_root, "polish", guest(POLISH, invoke=polished), CONVERSATIONS)
    grant_all(ext_root, ext_root.parent / "data", only="polish")  # it sees the answers
    model = ScriptedModel(
        [
            [function_call("weather", {"city": "Paris"}, call_id="w1")],
            [assistant_message("it is sunny")],
        ]
    )
    path = settings_file(channels={"default": "capture"})
    async with running_kernel(path, model=model) as kernel:
        for ext_id in ("weather", "polish"):
            record = kernel.loader.records[ext_id]
            assert record.status.value == "active", record.error
            assert type(record.instance).__name__.startswith("Wasm")
        await kernel.loader.instance("capture").say("weather in Paris?")
        await wait_for(lambda: sent(kernel))
        assert sent(kernel) == ["Paris: sunny (checked by a wasm tool)"]
    echoed = tool_output(model, "w1")  # the guest got the call as the process host would
    assert "'name': 'weather'" in echoed and '{"city":"Paris"}' in echoed
    model.assert_complete()


async def test_a_runaway_wasm_tool_fails_its_call_and_is_restarted(
    make_ext, settings_file, ext_root
):
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    write_wasm_extension(
        ext_root, "weather", guest(WEATHER, tool=RUNAWAY), {"wasm": {"fuel": 1_000_000}}
    )
    model = ScriptedModel(
        [
            [function_call("weather", {"city": "Oslo"}, call_id="w1")],
            [assistant_message("The weather tool is broken.")],
        ]
    )
    path = settings_file(
        channels={"default": "capture"},
        isolation={"restart_backoff_max_s": 1},
        supervisor={"backoff_initial_s": 0.05},
    )
    async with running_kernel(path, model=model) as kernel:
        record = kernel.loader.records["weather"]
        await kernel.loader.instance("capture").say("weather in Oslo?")
        await wait_for(lambda: "The weather tool is broken." in sent(kernel), timeout=30)
        output = tool_output(model, "w1")
        assert "tool 'weather' of wasm extension 'weather' was stopped" in output
        assert "fuel budget (wasm.fuel: 1000000 instructions)" in output
        # the kernel served on; the supervisor restarted the extension with a fresh instance
        await wait_for(lambda: record.instance.restarts == 1, timeout=30)
        await wait_for(lambda: record.status.value == "active", timeout=30)
        assert await record.instance.health_check()
    model.assert_complete()


async def test_a_module_asking_for_files_or_another_abi_is_refused_at_load(
    make_ext, settings_file, ext_root
):
    path_open = (
        '(import "wasi_snapshot_preview1" "path_open" '
        "(func (param i32 i32 i32 i32 i32 i64 i64 i32 i32) (result i32)))"
    )
    write_wasm_extension(ext_root, "reader", guest(WEATHER, imports=path_open))
    write_wasm_extension(ext_root, "future", guest(WEATHER), {"requires_abi": ">=2,<3"})
    async with running_kernel(settings_file()) as kernel:
        reader, future = kernel.loader.records["reader"], kernel.loader.records["future"]
        assert reader.status.value == future.status.value == "error"
        assert "wasm extension 'reader': imports wasi_snapshot_preview1.path_open" in (
            reader.error or ""
        )
        assert (
            "requires host ABI >=2,<3 (requires_abi in its manifest), but this host speaks ABI 1"
            in (future.error or "")
        )
