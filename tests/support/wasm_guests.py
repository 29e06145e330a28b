"""Guest modules for the wasm extension tests, written as WAT text (ADR 0085).

``guest()`` composes a module that follows the guest ABI (``docs/extensions.md``,
"WebAssembly extensions"): a bump allocator, ``hearth_describe`` answering
``describe``, and ``hearth_call_tool`` / ``hearth_invoke`` whose bodies the test
chooses — an answer from a data segment, the request echoed back, a runaway
loop, a memory hog. No toolchain: wasmtime compiles WAT itself.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

# where the constant answers live; the heap starts above them
_PREFIX_AT, _DESCRIBE_AT, _TOOL_AT, _INVOKE_AT, _HEAP_AT = 0, 1024, 8192, 12288, 16384

# a body: WAT instructions leaving the answer's packed i64 on the stack; $p, $n: the request
ECHO = """
    ;; {"ok":<the request>}: alloc left room before it for the prefix
    (memory.copy (i32.sub (local.get $p) (i32.const 6)) (i32.const 0) (i32.const 6))
    (i32.store8 (i32.add (local.get $p) (local.get $n)) (i32.const 125))
    (i64.or
      (i64.shl (i64.extend_i32_u (i32.sub (local.get $p) (i32.const 6))) (i64.const 32))
      (i64.extend_i32_u (i32.add (local.get $n) (i32.const 7))))
"""
RUNAWAY = "(loop $forever (br $forever)) (i64.const 0)"
MEMORY_HOG = """
    (loop $more (br_if $more (i32.ne (memory.grow (i32.const 16)) (i32.const -1))))
    unreachable
"""
TRAP = "unreachable"


def answer_body(at: int, answer: Any) -> str:
    """Return ``{"ok": answer}`` stored at ``at``."""
    return f"(i64.const {(at << 32) | len(_json({'ok': answer}))})"


def guest(
    describe: dict[str, Any],
    *,
    tool: str | Any | None = None,
    invoke: str | Any | None = None,
    imports: str = "",
    abi_version: int = 1,
) -> str:
    """A module's WAT; ``tool``/``invoke``: a body (``ECHO``, ``RUNAWAY``…) or a JSON
    value answered as ``{"ok": value}``."""
    data = [(_PREFIX_AT, b'{"ok":'), (_DESCRIBE_AT, _json({"ok": describe}))]
    funcs = [_method("describe", answer_body(_DESCRIBE_AT, describe))]
    for name, at, spec in (("call_tool", _TOOL_AT, tool), ("invoke", _INVOKE_AT, invoke)):
        if spec is None:
            continue
        if isinstance(spec, str) and spec.lstrip().startswith(("(", "unreachable", ";;")):
            funcs.append(_method(name, spec))
        else:
            data.append((at, _json({"ok": spec})))
            funcs.append(_method(name, answer_body(at, spec)))
    segments = "\n".join(f'  (data (i32.const {at}) "{_wat_bytes(raw)}")' for at, raw in data)
    return f"""(module
{imports}
  (memory (export "memory") 1)
  (global $heap (mut i32) (i32.const {_HEAP_AT}))
{segments}
  (func (export "hearth_abi_version") (result i32) (i32.const {abi_version}))
  (func (export "hearth_alloc") (param $len i32) (result i32)
    (local $p i32)
    (local.set $p (i32.add (global.get $heap) (i32.const 8)))
    (global.set $heap (i32.add (i32.add (local.get $p) (local.get $len)) (i32.const 8)))
    (if (i32.gt_u (global.get $heap) (i32.mul (memory.size) (i32.const 65536)))
      (then
        (if (i32.eq
              (memory.grow (i32.add (i32.shr_u (local.get $len) (i32.const 16)) (i32.const 1)))
              (i32.const -1))
          (then (return (i32.const 0))))))
    (local.get $p))
{chr(10).join(funcs)}
)"""


def drawing_guest(describe: dict[str, Any]) -> str:
    """A tool that reads the clock, then answers four random letters (a-p): a module
    asking for ``wasm: {clock: true, random: true}``."""
    imports = """
  (import "hearth" "clock_ms" (func $clock (result i64)))
  (import "hearth" "random_fill" (func $random (param i32 i32)))"""
    at = _TOOL_AT  # {"ok":"xxxx"} there, the letters at +7
    letters = "".join(
        f"(i32.store8 (i32.const {i}) (i32.add (i32.const 97) "
        f"(i32.and (i32.load8_u (i32.const {i})) (i32.const 15))))"
        for i in range(at + 7, at + 11)
    )
    body = f"""
    (drop (call $clock))
    (call $random (i32.const {at + 7}) (i32.const 4))
    {letters}
    {answer_body(at, "xxxx")}"""
    wat = guest(describe, tool=body, imports=imports)
    segment = f'  (data (i32.const {at}) "{_wat_bytes(_json({"ok": "xxxx"}))}")\n'
    return wat.replace("  (global $heap", segment + "  (global $heap", 1)


def tool_spec(name: str, description: str = "", **properties: str) -> dict[str, Any]:
    """A ``describe`` entry for a tool taking string ``properties``."""
    return {
        "name": name,
        "description": description,
        "params_json_schema": {
            "type": "object",
            "properties": {key: {"type": kind} for key, kind in properties.items()},
            "required": sorted(properties),
            "additionalProperties": False,
        },
        "side_effects": False,
    }


def write_wasm_extension(
    root: Path, ext_id: str, wat: str, manifest: dict[str, Any] | None = None
) -> Path:
    """``<root>/<ext_id>/`` with ``guest.wat`` and a manifest naming it."""
    ext_dir = root / ext_id
    ext_dir.mkdir(parents=True, exist_ok=True)
    (ext_dir / "guest.wat").write_text(wat)
    extra = dict(manifest or {})
    data: dict[str, Any] = {
        "id": ext_id,
        "name": ext_id.title(),
        **extra,
        "wasm": {"module": "guest.wat", **extra.get("wasm", {})},
    }
    (ext_dir / "manifest.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return ext_dir


def _method(name: str, body: str) -> str:
    return (
        f'  (func (export "hearth_{name}") (param $p i32) (param $n i32) (result i64)\n'
        f"    (global.set $heap (i32.const {_HEAP_AT}))\n    {body})"
    )


def _json(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _wat_bytes(raw: bytes) -> str:
    return "".join(
        chr(b) if 0x20 <= b < 0x7F and b not in (0x22, 0x5C) else f"\\{b:02x}" for b in raw
    )
