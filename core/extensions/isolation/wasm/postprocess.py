"""Post-processors offered by a WebAssembly extension (``PostProcessorProvider``).

The guest lists them in its ``describe`` answer (``post_processors``: name,
output target, accepted params); ``execute`` is an ``invoke`` of
``post_process`` with the processor's name, the context and the param, whose
answer is the result's fields (``content``, ``content_type``, ``success``,
``error``).
"""

from __future__ import annotations

from typing import Any

from core.extensions.contract import (
    OUTPUT_TARGETS,
    OutputTarget,
    PostProcessContext,
    PostProcessor,
    PostProcessResult,
)
from core.extensions.isolation.kernel.proxy_core import ProxyCore
from core.extensions.isolation.protocol.wire import plain

__all__ = ["PostProcessorsProxy", "WasmPostProcessor"]

POST_PROCESS = "post_process"  # the invoke name the guest serves


class WasmPostProcessor:
    """One post-processor the guest described; ``execute`` calls into it."""

    def __init__(self, owner: ProxyCore, spec: dict[str, Any]) -> None:
        self._owner = owner
        self.name = str(spec["name"])
        target = spec.get("output_target", "chat_append")
        self.output_target: OutputTarget = target if target in OUTPUT_TARGETS else "chat_append"
        params = spec.get("params")
        self._params = None if params is None else tuple(str(p) for p in params)

    def validate_param(self, param: str | None) -> tuple[bool, str | None]:
        if self._params is None or param is None or param in self._params:
            return True, None
        return False, f"{param!r} is not one of {', '.join(self._params)}"

    async def execute(self, context: PostProcessContext, param: str | None) -> PostProcessResult:
        data = plain(context)
        data["previous_results"] = {k: v.to_dict() for k, v in context.previous_results.items()}
        value = await self._owner.call_method(POST_PROCESS, self.name, data, param)
        if not isinstance(value, dict):
            raise ValueError(f"post-processor {self.name!r} answered {type(value).__name__}")
        return PostProcessResult.from_dict({**value, "name": self.name})


class PostProcessorsProxy(ProxyCore):
    def get_post_processors(self) -> list[PostProcessor]:
        return [WasmPostProcessor(self, spec) for spec in self.described.get("post_processors", [])]
