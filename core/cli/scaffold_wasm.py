"""``main.py new-extension NAME --wasm``: a WebAssembly extension skeleton (ADR 0085).

Writes a manifest naming ``guest.wat`` — the module as WAT text, which
wasmtime compiles itself, so the skeleton runs with no toolchain — and a test
that loads it and calls its tool the way the kernel does. It asks nothing
beyond a wasm extension's defaults, so it needs no grant: edit, ``/reload``,
and the new code serves. docs/extensions.md shows the same extension in
AssemblyScript; point ``wasm.module`` at the ``.wasm`` you build instead.
"""

from __future__ import annotations

import json
from string import Template
from typing import Any

__all__ = ["wasm_files"]

MANIFEST = Template("""\
id: $ext_id
name: $title
version: "0.1.0"
description: |
  Say in a sentence or two what $ext_id does; the model reads it.
side_effects: false   # its tools change nothing outside Hearth
wasm:
  module: guest.wat   # or the .wasm your toolchain builds (docs/extensions.md)
  fuel: 200000000     # instructions per call (deterministic budget)
  time_limit_ms: 2000 # wall clock per call
  memory_mb: 32       # linear memory cap
  # clock: true       # hearth.clock_ms; needs a grant, recorded for replay
  # random: true      # hearth.random_fill; likewise
""")

# the guest ABI, version 1: JSON in and out through linear memory (docs/extensions.md)
GUEST = Template(""";; $ext_id: a WebAssembly extension (written by `main.py new-extension --wasm`).
;; The guest ABI (docs/extensions.md, "WebAssembly extensions"): the host writes a
;; request's JSON where hearth_alloc says, calls hearth_<method>(ptr, len), and reads
;; the answer {"ok": ...} or {"error": "..."} at the returned (ptr << 32 | len).
(module
  (memory (export "memory") 1)
  (global $$heap (mut i32) (i32.const 4096))
  ;; describe: what it offers (the tool's JSON schema is the model's)
  (data (i32.const 1024) "$describe")
  ;; the tool's answer
  (data (i32.const 3072) "$answer")

  (func (export "hearth_abi_version") (result i32) (i32.const 1))

  ;; room for the request: a bump allocator, reset at every call
  (func (export "hearth_alloc") (param $$len i32) (result i32)
    (local $$p i32)
    (local.set $$p (global.get $$heap))
    (global.set $$heap (i32.add (global.get $$heap) (local.get $$len)))
    (if (i32.gt_u (global.get $$heap) (i32.mul (memory.size) (i32.const 65536)))
      (then
        (if (i32.eq
              (memory.grow (i32.add (i32.shr_u (local.get $$len) (i32.const 16)) (i32.const 1)))
              (i32.const -1))
          (then (return (i32.const 0))))))
    (local.get $$p))

  (func (export "hearth_describe") (param $$p i32) (param $$n i32) (result i64)
    (global.set $$heap (i32.const 4096))
    (i64.const $describe_at))

  ;; call_tool: {"abi_version":1,"params":{"name":"$tool_name","args":"{\\"name\\":...}",...}}
  (func (export "hearth_call_tool") (param $$p i32) (param $$n i32) (result i64)
    (global.set $$heap (i32.const 4096))
    (i64.const $answer_at))
)
""")

TEST = Template('''\
"""Tests of $ext_id: the module loads in wasmtime and its tool answers (make test)."""

from __future__ import annotations

from pathlib import Path

from core.extensions.sdk.testing import FakeContext, call_tool, load_extension, running

EXT_DIR = Path(__file__).resolve().parents[1]


async def test_the_tool_answers(tmp_path: Path) -> None:
    ext = load_extension(EXT_DIR)
    async with running(ext, FakeContext(tmp_path, "$ext_id")):
        assert await call_tool(ext, "$tool_name", {"name": "Ada"}) == "Hello from WebAssembly!"
''')


def wasm_files(names: dict[str, str]) -> dict[str, str]:
    """``manifest.yaml``, ``guest.wat`` and the test, for the names ``_files`` derives."""
    tool = names["tool_name"]
    describe = {
        "capabilities": ["ToolProvider"],
        "tools": [
            {
                "name": tool,
                "description": "Greet someone by name.",
                "params_json_schema": {
                    "type": "object",
                    "properties": {"name": {"type": "string", "description": "who to greet"}},
                    "required": ["name"],
                    "additionalProperties": False,
                },
                "side_effects": False,
            }
        ],
    }
    answer: dict[str, Any] = {"ok": "Hello from WebAssembly!"}
    described, answered = _compact({"ok": describe}), _compact(answer)
    wat = GUEST.substitute(
        names,
        describe=_wat_string(described),
        describe_at=str(1024 << 32 | len(described)),
        answer=_wat_string(answered),
        answer_at=str(3072 << 32 | len(answered)),
    )
    return {
        "manifest.yaml": MANIFEST.substitute(names),
        "guest.wat": wat,
        f"tests/test_{names['ext_id']}.py": TEST.substitute(names),
    }


def _compact(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _wat_string(raw: bytes) -> str:
    """Bytes as a WAT string literal's body: printable ASCII as is (quotes and
    backslashes escaped), the rest as hex escapes."""
    plain = {0x22: '\\"', 0x5C: "\\\\"}
    return "".join(plain.get(b) or (chr(b) if 0x20 <= b < 0x7F else f"\\{b:02x}") for b in raw)
