"""The ``rockets`` test extension shared by the consent and replay suites: one
side-effecting tool and one that declares it has no side effects, so a test can
see which calls consent asks about and which a replay may run again."""

from __future__ import annotations

from conftest import ext_code

# `launch` acts on the world (nothing declared: side-effecting); `peek` declares none.
ROCKETS = ext_code(
    header="""
    from agents import function_tool
    from core.extensions.sdk import side_effects
    """,
    body="""
    launched = None
    def log(self):
        if self.launched is None:
            self.launched = []
        return self.launched
    def get_tools(self):
        @function_tool
        def launch(target: str) -> str:
            "Launch a rocket at a target."
            self.log().append(target)
            return f"launched at {target}"

        @function_tool
        def peek() -> str:
            "Look at the launch pad."
            return "pad is clear"

        return [launch, side_effects(peek, False)]
    """,
)
