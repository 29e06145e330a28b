"""The extension side stays light (ADR 0015): importing the contract and the
extension library, or running a plugin host whose extension subscribed to an
event, loads neither the bus, aiosqlite, pydantic, croniter, agents nor openai."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import PROJECT_ROOT, ext_code
from core.extensions.contract import TurnContext
from core.kernel.commands.table import parse_command
from support.harness import running_kernel, wait_for

HEAVY = ("core.events.bus", "aiosqlite", "pydantic", "croniter", "agents", "openai")


def loaded_heavy(modules: list[str]) -> list[str]:
    return sorted(
        name for name in modules if any(name == h or name.startswith(h + ".") for h in HEAVY)
    )


def test_contract_and_library_import_nothing_heavy():
    code = (
        "import core.extensions.contract, core.extensions.sdk; import sys, json; "
        "print(json.dumps(sorted(sys.modules)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=PROJECT_ROOT, capture_output=True, text=True, check=True
    )
    modules = json.loads(out.stdout)
    assert "core.extensions.sdk" in modules
    assert loaded_heavy(modules) == []
    # the fake kernel for tests is imported by tests only (ADR 0049)
    assert "core.extensions.sdk.testing" not in modules


def test_the_event_package_door_still_offers_its_names():
    from core.events import Event, EventBus, SQLiteJournal, topic_matches
    from core.events.bus import EventBus as BusItself

    assert EventBus is BusItself and SQLiteJournal.__name__ == "SQLiteJournal"
    assert Event.__module__ == "core.events.models" and topic_matches("a.*", "a.b")


PROBE = ext_code(
    body="""
    async def initialize(self, context):
        self.ctx = context
        context.subscribe_event("probe.ping", self.on_ping)

    async def on_ping(self, event):
        (self.ctx.data_dir / "pinged").write_text(event.payload["n"])

    def get_commands(self):
        from core.extensions.contract import Command

        async def modules(args, turn):
            import json, sys
            return json.dumps(sorted(sys.modules))

        return [Command("modules", "What this host has imported.", modules)]
    """
)


async def test_a_plugin_host_stays_light_after_a_subscription(make_ext, settings_file, tmp_path):
    make_ext(
        "probe",
        PROBE,
        {"isolation": "process", "permissions": {"subscribe": ["probe.*"]}},
    )
    async with running_kernel(settings_file(isolation={"call_timeout_s": 20})) as kernel:
        assert kernel.loader.records["probe"].status.value == "active"
        await kernel.bus.publish("probe.ping", "test", {"n": "1"})
        marker = tmp_path / "data" / "extensions" / "probe" / "pinged"
        await wait_for(marker.exists, 20)
        reply = await kernel.commands.run(parse_command("/modules"), TurnContext(user_id="u"))
    modules = json.loads(reply or "[]")
    assert "core.extensions.isolation.host.plugin_host" in modules  # it really ran in the host
    assert loaded_heavy(modules) == []


# Each runs in a second at most once the SDK is not imported: the commands that read
# what the kernel recorded, and the parser every command builds first (ADR 0068).
LIGHT_COMMANDS = (
    ["--help"],
    ["usage", "--json"],
    ["events", "--limit", "1"],
    ["replay", "--list"],
    ["skills", "check", "{tmp}"],
    ["metrics"],
    ["new-extension", "--help"],
)


def test_commands_reading_records_do_not_load_the_sdk(settings_file, tmp_path):
    """One process runs each command through ``main.main`` and lists what it loaded."""
    settings = settings_file()
    (tmp_path / "data").mkdir()
    commands = [[*c[:1], "--settings", str(settings), *c[1:]] for c in LIGHT_COMMANDS[1:]]
    commands = [[a.replace("{tmp}", str(tmp_path)) for a in c] for c in commands]
    code = (
        "import json, sys, contextlib, io, main\n"
        "out = {}\n"
        f"for argv in {[LIGHT_COMMANDS[0], *commands]!r}:\n"
        "    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
        "        try:\n"
        "            main.main(argv)\n"
        "        except SystemExit:\n"
        "            pass\n"
        "    out[argv[0]] = sorted(sys.modules)\n"
        "print(json.dumps(out))\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], cwd=PROJECT_ROOT, capture_output=True, text=True, check=True
    )
    loaded = json.loads(run.stdout)
    assert list(loaded) == [c[0] for c in LIGHT_COMMANDS]
    for command, modules in loaded.items():
        assert [m for m in modules if m == "agents" or m.startswith("agents.")] == [], command
        assert "core.kernel.runner" not in modules, command
