"""The files ``main.py new-extension`` writes, as templates (``string.Template``).

Placeholders: ``$ext_id``, ``$title``, ``$class_name``, ``$tool_name``,
``$capabilities``. Each piece is ruff-clean and ruff-formatted once joined,
so a generated extension passes ``make lint`` and ``make test`` as it is.
"""

from __future__ import annotations

from string import Template

__all__ = [
    "CHANNEL_METHODS",
    "CHANNEL_TEST",
    "CODE_HEAD",
    "MANIFEST",
    "TEST_HEAD",
    "TOOL_METHODS",
    "TOOL_TEST",
]

MANIFEST = Template("""\
id: $ext_id
name: $title
version: "0.1.0"
entrypoint: main:$class_name
description: |
  Say in a sentence or two what $ext_id does; the model reads it.
$extra""")

CODE_HEAD = Template('''\
"""$ext_id: $capabilities (written by `main.py new-extension`; make it yours).

The kernel calls the methods below; ``BaseExtension`` supplies the
lifecycle (``initialize`` keeps ``self.context``). Test it with
``make test`` (tests/test_$ext_id.py), load it with
``python main.py extensions``. See docs/extensions.md.
"""

from __future__ import annotations

$imports

class $class_name(BaseExtension):
    """A Hearth extension: $capabilities."""
''')

TOOL_METHODS = Template('''
    def get_tools(self) -> list[FunctionTool]:
        """ToolProvider: the tools the model may call."""

        @function_tool(name_override="$tool_name")
        async def hello(name: str) -> str:
            """Greet someone by name.

            Args:
                name: who to greet.
            """
            greeting = self.context.get_config("greeting", "Hello")
            return f"{greeting}, {name}!"

        # no side effects: under the `safe` consent profile it runs without asking
        return [side_effects(hello, False)]
''')

CHANNEL_METHODS = Template('''
    # ChannelProvider: how the kernel reaches the user. This one appends each
    # message to <data_dir>/outbox.txt; replace it with your service's API.
    async def send_to_user(self, user_id: str, message: str) -> None:
        """A reply (or notification) for one user."""
        self._append(f"{user_id}: {message}")

    async def send_message(self, message: str) -> None:
        """A message with no particular user (broadcast)."""
        self._append(message)

    async def receive(self, text: str, user_id: str = "me") -> None:
        """Call this when your service delivers a user's message: it becomes a
        turn, and the answer comes back through ``send_to_user``."""
        await self.context.on_user_message(text, user_id)

    def _append(self, line: str) -> None:
        with (self.context.data_dir / "outbox.txt").open("a", encoding="utf-8") as out:
            out.write(line + "\\n")
''')

TEST_HEAD = Template('''\
"""Tests of $ext_id against a fake kernel: no bus, no model (``make test``)."""

from __future__ import annotations

from pathlib import Path

from core.extensions.sdk.testing import $helpers

EXT_DIR = Path(__file__).resolve().parent.parent
''')

TOOL_TEST = Template("""

async def test_the_tool_greets(tmp_path):
    ext = load_extension(EXT_DIR)
    context = FakeContext(tmp_path, "$ext_id", config_values={"greeting": "Hi"})
    async with running(ext, context):
        assert await call_tool(ext, "$tool_name", {"name": "Ada"}) == "Hi, Ada!"
""")

CHANNEL_TEST = Template("""

async def test_the_channel_delivers_and_receives(tmp_path):
    ext = load_extension(EXT_DIR)
    context = FakeContext(tmp_path, "$ext_id")
    async with running(ext, context):
        await ext.send_to_user("ada", "tea is ready")
        await ext.receive("hello")
    assert (context.data_dir / "outbox.txt").read_text() == "ada: tea is ready\\n"
    assert [m["text"] for m in context.user_messages] == ["hello"]
""")
