"""Extension state through the context (SPEC §9, issue 16, ADR 0022).

``get_state``/``set_state``/``delete_state``/``clear_state`` keep JSON values
per (extension, session of the current turn) or per extension, in one kernel
store: keys expire unless read, the least recently used are evicted beyond
the extension's cap, a session's share has a hard limit, ``/new`` forgets the
old session, and an isolated extension reaches its own state — only its own —
over RPC.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from pathlib import Path

import pytest
from agents.tool_context import ToolContext

from conftest import ext_code
from core.config import StateSettings, StorageSettings
from core.extensions.access.state_scope import person_session
from core.extensions.contract import TurnContext
from core.extensions.errors import StateLimitError, StateScopeError
from core.extensions.sdk.testing import FakeContext, serving
from core.kernel.commands.table import parse_command
from core.state import StateStore
from support.harness import CAPTURE_CHANNEL, CAPTURE_MANIFEST, running_kernel, wait_for

S1 = TurnContext(channel_id="capture", user_id="u1", session_id="capture:u1")
S2 = TurnContext(channel_id="capture", user_id="u2", session_id="capture:u2")


class Clock:
    """An injectable clock: tests move time, nothing sleeps."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def make_store(
    tmp_path: Path, storage_backend: dict[str, str]
) -> AsyncIterator[Callable[..., StateStore]]:
    """``make_store(clock, **state_settings)``: stores on one ``state.db`` (or one
    PostgreSQL database), closed after."""
    stores: list[StateStore] = []
    storage = StorageSettings.model_validate(storage_backend)

    def make(clock: Clock, **limits: int | float) -> StateStore:
        stores.append(
            StateStore(tmp_path / "state.db", StateSettings(**limits), clock=clock, storage=storage)
        )
        return stores[-1]

    yield make
    for store in stores:
        await store.aclose()


def value_of_size(key: str, size: int) -> str:
    """A string value whose row (key + JSON) takes exactly ``size`` bytes."""
    return "x" * (size - len(key) - 2)


# ------------------------------------------------------------ the context API


NOTES = ext_code(
    header="""
    from agents import function_tool
    """,
    body="""
    def get_tools(self):
        @function_tool
        async def count_notes() -> str:
            "How many notes this conversation holds."
            return f"{len(await self.ctx.get_state('notes', []))} notes"

        return [count_notes]

    def get_commands(self):
        from core.extensions.contract import Command

        async def note(args, turn):
            notes = await self.ctx.get_state("notes", [])
            await self.ctx.set_state("notes", [*notes, args])
            total = await self.ctx.get_state("total", 0, scope="extension") + 1
            await self.ctx.set_state("total", total, scope="extension")
            return f"noted ({total} in all)"

        async def notes(args, turn):
            return ", ".join(await self.ctx.get_state("notes", [])) or "no notes"

        async def forget(args, turn):
            await self.ctx.delete_state("notes")
            return "forgotten"

        async def misuse(args, turn):
            try:
                await self.ctx.set_state(args or "k", {1, 2} if not args else "y" * 2000)
            except Exception as exc:
                return f"{type(exc).__name__}: {exc}"
            return "stored"

        return [
            Command("note", "Remember a note.", note),
            Command("notes", "List the notes.", notes),
            Command("forget", "Forget the notes.", forget),
            Command("misuse", "Store what cannot be stored.", misuse),
        ]

    async def execute_task(self, task_name):
        try:
            await self.ctx.get_state("notes")
        except Exception as exc:
            return {"text": f"{type(exc).__name__}: {exc}"}
        return {"text": "no error"}
    """,
)


@pytest.fixture(params=["inprocess", "process"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def say(kernel, text: str, user_id: str = "u1") -> str:
    """One message through the capture channel, as the user; the reply."""
    channel = kernel.loader.instance("capture")
    before = len(channel._log())
    await channel.say(text, user_id)
    await wait_for(lambda: len(channel._log()) > before, 20)
    return str(channel.sent[-1][2])


async def test_state_through_commands_per_session_survives_restart_and_new_clears_it(
    mode, make_ext, settings_file
):
    """The same extension in-process and isolated: notes per conversation, a total
    for the extension; both persist across a restart; ``/new`` forgets only the
    notes of the conversation that started over."""
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    make_ext("notes", NOTES, {"isolation": mode})
    path = settings_file(
        channels={"default": "capture"},
        isolation={"call_timeout_s": 20},
        state={"max_bytes_per_session": 1024},
    )
    async with running_kernel(path) as kernel:
        assert await say(kernel, "/note tea") == "noted (1 in all)"
        assert await say(kernel, "/note milk", "u2") == "noted (2 in all)"
        assert await say(kernel, "/note bread") == "noted (3 in all)"
        assert await say(kernel, "/notes") == "tea, bread"
        assert await say(kernel, "/notes", "u2") == "milk"
        # the calls fail at the call, with the same words in both modes
        assert await say(kernel, "/misuse") == (
            "TypeError: state value for key 'k' is not JSON: "
            "Object of type set is not JSON serializable"
        )
        refused = await say(kernel, "/misuse big")
        assert refused.startswith("StateLimitError: extension 'notes': set_state('big') refused")
        assert "(settings `state.max_bytes_per_session`)" in refused
        # outside a turn (a scheduled task) session scope is refused with the way out
        task = await kernel.loader.instance("notes").execute_task("tick")
        assert task == {
            "text": "StateScopeError: no current session: call with scope='extension' "
            "outside a turn"
        }

    async with running_kernel(path) as kernel:
        assert await say(kernel, "/notes") == "tea, bread"
        assert (await say(kernel, "/new")).startswith("Started a new conversation")
        assert await say(kernel, "/notes") == "no notes"
        assert await say(kernel, "/notes", "u2") == "milk"
        assert await say(kernel, "/note jam") == "noted (4 in all)"
        # a tool, called in a turn of u1's conversation (as the turn runner does)
        turn = TurnContext(
            channel_id="capture",
            user_id="u1",
            session_id=kernel.conversations.session_id("capture:u1"),
        )
        tool = next(t for t in kernel.loader.records["notes"].tools if t.name == "count_notes")
        with serving(turn):
            context = ToolContext(
                context=turn, tool_name="count_notes", tool_call_id="c1", tool_arguments="{}"
            )
            assert await tool.on_invoke_tool(context, "{}") == "1 notes"
        assert await say(kernel, "/forget", "u2") == "forgotten"
        assert await say(kernel, "/notes", "u2") == "no notes"


async def test_scopes_sessions_and_extensions_are_apart(make_ext, settings_file):
    make_ext("alpha", ext_code())
    make_ext("beta", ext_code())
    async with running_kernel(settings_file()) as kernel:
        alpha = kernel.loader.records["alpha"].context
        beta = kernel.loader.records["beta"].context
        with serving(S1):
            await alpha.set_state("k", "alpha in s1")
            await beta.set_state("k", "beta in s1")
            await alpha.set_state("k", "alpha everywhere", scope="extension")
            await alpha.set_state("gone", None)
        with serving(S2):
            assert await alpha.get_state("k") is None
            await alpha.set_state("k", "alpha in s2")
            assert await alpha.get_state("k", scope="extension") == "alpha everywhere"
        with serving(S1):
            assert await alpha.get_state("k") == "alpha in s1"
            assert await beta.get_state("k") == "beta in s1"
            assert await beta.get_state("k", "none", scope="extension") == "none"
            assert await alpha.get_state("gone", "default") is None  # a stored null is a value
            await alpha.clear_state()
            assert await alpha.get_state("k") is None
            assert await beta.get_state("k") == "beta in s1"
            assert await alpha.get_state("k", scope="extension") == "alpha everywhere"
        with serving(S2):
            assert await alpha.get_state("k") == "alpha in s2"
            await alpha.delete_state("k")
            await alpha.delete_state("never there")
            assert await alpha.get_state("k", "deleted") == "deleted"
        await alpha.clear_state(scope="extension")
        assert await alpha.get_state("k", scope="extension") is None
        # what a prompt-addition condition reads
        assert await kernel.state.read("beta", "capture:u1", "k") == "beta in s1"
        assert await kernel.state.read("beta", None, "k", "absent") == "absent"
        assert kernel.state.operations["set", "alpha"] == 4


async def test_session_scope_outside_a_turn_is_refused_with_the_way_out(make_ext, settings_file):
    make_ext("alpha", ext_code())
    async with running_kernel(settings_file()) as kernel:
        ctx = kernel.loader.records["alpha"].context
        message = "no current session: call with scope='extension' outside a turn"
        with pytest.raises(StateScopeError, match=message):
            await ctx.set_state("k", 1)
        with serving(TurnContext(agent_id="orchestrator")), pytest.raises(StateScopeError):
            await ctx.get_state("k")  # a turn without a session (a background agent run)
        await ctx.set_state("k", 1, scope="extension")
        assert await ctx.get_state("k", scope="extension") == 1
        with pytest.raises(TypeError, match="state value for key 'when' is not JSON"):
            await ctx.set_state("when", object(), scope="extension")
        with pytest.raises(ValueError, match="scope must be 'session' or 'extension'"):
            await ctx.get_state("k", scope="global")


async def test_uninstalled_extensions_lose_their_state_at_start(
    make_ext, settings_file, ext_root, caplog
):
    make_ext("alpha", ext_code())
    make_ext("beta", ext_code())
    path = settings_file()
    async with running_kernel(path) as kernel:
        for ext_id in ("alpha", "beta"):
            ctx = kernel.loader.records[ext_id].context
            await ctx.set_state("k", ext_id, scope="extension")
            with serving(S1):
                await ctx.set_state("k", ext_id)
    shutil.rmtree(ext_root / "beta")  # beta is uninstalled
    caplog.set_level(logging.INFO, logger="core.kernel.reload.registrations")
    async with running_kernel(path) as kernel:
        assert await kernel.state.read("alpha", None, "k") == "alpha"
        assert await kernel.state.read("beta", None, "k") is None
        assert await kernel.state.read("beta", "capture:u1", "k") is None
    assert (
        "extension beta is no longer installed: unregistered; forgot its state (2 keys)"
        in caplog.text
    )


async def test_a_disabled_extension_keeps_its_state(make_ext, settings_file):
    make_ext("alpha", ext_code())
    path = settings_file()
    async with running_kernel(path) as kernel:
        await kernel.loader.records["alpha"].context.set_state("k", 1, scope="extension")
    make_ext("alpha", ext_code(), {"enabled": False})
    async with running_kernel(path) as kernel:
        assert kernel.loader.records["alpha"].status.value == "disabled"
        assert await kernel.state.read("alpha", None, "k") == 1


# ------------------------------------------------------------ isolated: own state only

THIEF = ext_code(
    body="""
    def get_commands(self):
        from core.extensions.contract import Command

        async def steal(args, turn):
            peer = self.ctx._peer  # past the client: raw frames to the kernel
            out = [repr(await self.ctx.get_state("secret", "none", scope="extension"))]
            for params in (
                {"key": "secret", "scope": "extension", "ext_id": "victim"},
                {"key": "secret", "scope": "extension", "extension_id": "victim"},
            ):
                try:
                    out.append(repr(await peer.call("ctx.get_state", params)))
                except Exception as exc:
                    out.append(f"{type(exc).__name__}: {exc}")
            forged = {"key": "secret", "session_id": "capture:victim-user"}
            out.append(repr(await peer.call("ctx.get_state", forged)))
            mine = {"key": "secret", "value": "pwned", "scope": "extension"}
            await peer.call("ctx.set_state", mine)
            await peer.call("ctx.clear_state", {"session_id": "capture:victim-user"})
            return "\\n".join(out)

        return [Command("steal", "Read another extension's state.", steal)]
    """
)


async def test_an_isolated_extension_reaches_only_its_own_state(make_ext, settings_file):
    make_ext("victim", ext_code())
    make_ext("thief", THIEF, {"isolation": "process"})
    async with running_kernel(settings_file(isolation={"call_timeout_s": 20})) as kernel:
        assert kernel.loader.records["thief"].status.value == "active"
        victim = kernel.loader.records["victim"].context
        await victim.set_state("secret", "s3cret", scope="extension")
        with serving(TurnContext(session_id="capture:victim-user")):
            await victim.set_state("secret", "hidden")
        turn = TurnContext(channel_id="capture", user_id="mallory", session_id="capture:mallory")
        reply = await kernel.commands.run(parse_command("/steal"), turn)
        assert reply.splitlines() == [
            "'none'",
            "FrameError: ctx.get_state: unknown key 'ext_id'",
            "FrameError: ctx.get_state: unknown key 'extension_id'",
            "{'found': False, 'value': None}",
        ]
        assert await kernel.state.read("victim", None, "secret") == "s3cret"
        assert await kernel.state.read("victim", "capture:victim-user", "secret") == "hidden"
        assert await kernel.state.read("thief", None, "secret") == "pwned"


# ------------------------------------------------------------ the store's rules


async def test_keys_expire_unless_read_and_the_kernel_read_renews_nothing(make_store):
    clock = Clock()
    store = make_store(clock, ttl_s=60)
    await store.set("ext", "s1", "read", 1)
    await store.set("ext", "s1", "unread", 2)
    await store.set("ext", "s1", "peeked", 3)
    clock.now += 50
    assert await store.get("ext", "s1", "read") == 1  # renewed until 1110
    assert await store.read("ext", "s1", "peeked") == 3  # not renewed: still 1060
    clock.now += 20  # 1070
    assert await store.get("ext", "s1", "unread", "expired") == "expired"
    assert await store.get("ext", "s1", "peeked") is None
    assert await store.get("ext", "s1", "read") == 1  # renewed again, until 1130
    clock.now += 59
    assert await store.get("ext", "s1", "read") == 1
    # expired rows are pruned, not only hidden: the next write of the extension drops them
    assert await store.size_bytes("ext") == len("read1") + len("unread2") + len("peeked3")
    await store.set("ext", None, "new", 4)
    assert await store.size_bytes("ext") == len("read1") + len("new4")
    # and a kernel restart prunes what expired meanwhile
    clock.now += 1000
    restarted = make_store(clock, ttl_s=60)
    await restarted.open()
    assert await restarted.size_bytes("ext") == 0


async def test_least_recently_used_keys_are_evicted_and_logged(make_store, caplog):
    clock = Clock()
    store = make_store(clock, max_bytes_per_extension=1200)
    caplog.set_level(logging.INFO, logger="core.state")
    for name, session in (("k1", "s1"), ("k2", None), ("k3", "s2")):
        clock.now += 1
        await store.set("ext", session, name, value_of_size(name, 300))
    await store.set("other", "s1", "k0", value_of_size("k0", 900))  # another extension's bytes
    clock.now += 1
    assert await store.get("ext", "s1", "k1") is not None  # k1 is now the most recent
    clock.now += 1
    await store.set("ext", "s1", "k4", value_of_size("k4", 400))  # 1300 > 1200: one must go
    assert await store.read("ext", None, "k2") is None  # (read: the LRU order stays as it is)
    assert await store.read("ext", "s1", "k1") is not None
    assert await store.read("ext", "s2", "k3") is not None
    clock.now += 1
    await store.set("ext", "s2", "k5", value_of_size("k5", 700))  # 1700: k3 goes, then k1
    assert await store.read("ext", "s2", "k3") is None
    assert await store.read("ext", "s1", "k1") is None
    assert await store.read("ext", "s1", "k4") is not None
    assert await store.size_bytes("ext") == 1100
    assert await store.size_bytes("other") == 900  # never touched by ext's evictions
    evictions = [r.getMessage() for r in caplog.records if "evicted state key" in r.getMessage()]
    assert evictions == [
        "extension ext: evicted state key 'k2' (extension scope, 300 bytes, least recently "
        "used) to stay within state.max_bytes_per_extension (1200 bytes)",
        "extension ext: evicted state key 'k3' (session s2, 300 bytes, least recently "
        "used) to stay within state.max_bytes_per_extension (1200 bytes)",
        "extension ext: evicted state key 'k1' (session s1, 300 bytes, least recently "
        "used) to stay within state.max_bytes_per_extension (1200 bytes)",
    ]
    assert store.evictions["ext"] == 3 and store.evictions["other"] == 0


async def test_a_warning_at_80_percent_once_per_crossing(make_store, caplog):
    clock = Clock()
    store = make_store(clock, max_bytes_per_extension=2000)
    caplog.set_level(logging.WARNING, logger="core.state")

    def warnings() -> int:
        return sum(
            "over 80% of state.max_bytes_per_extension" in r.getMessage() for r in caplog.records
        )

    await store.set("ext", None, "a", value_of_size("a", 1000))
    assert warnings() == 0
    await store.set("ext", None, "b", value_of_size("b", 700))  # 1700: crossed
    assert warnings() == 1
    assert "extension ext: its state holds 1700 bytes" in caplog.text
    await store.set("ext", None, "c", value_of_size("c", 100))  # 1800: still above
    assert warnings() == 1
    await store.delete("ext", None, "b")  # 1100: below again
    await store.set("ext", None, "b", value_of_size("b", 700))  # 1800: crossed again
    assert warnings() == 2


async def test_a_sessions_share_has_a_hard_limit(make_store, caplog):
    clock = Clock()
    store = make_store(clock, max_bytes_per_session=1024)
    caplog.set_level(logging.WARNING, logger="core.state")
    await store.set("ext", "s1", "a", value_of_size("a", 600))
    await store.set("ext", "s1", "b", value_of_size("b", 300))  # 900: over 80 %
    assert "its state of session s1 holds 900 bytes, over 80% of state.max_bytes_per_session" in (
        caplog.text
    )
    with pytest.raises(StateLimitError) as refused:
        await store.set("ext", "s1", "c", value_of_size("c", 200))
    assert str(refused.value) == (
        "extension 'ext': set_state('c') refused: this session's state would hold 1100 bytes, "
        "over the limit of 1024 (settings `state.max_bytes_per_session`)"
    )
    assert refused.value.setting == "state.max_bytes_per_session"
    assert await store.get("ext", "s1", "c") is None
    await store.set("ext", "s1", "b", value_of_size("b", 400))  # replacing b: 1000 fits
    await store.set("ext", "s2", "c", value_of_size("c", 200))  # another session's share
    await store.set("other", "s1", "c", value_of_size("c", 200))  # another extension's share
    await store.set("ext", None, "c", value_of_size("c", 2000))  # extension scope: the cap only
    assert await store.size_bytes("ext", "s1") == 1000


async def test_a_value_over_the_whole_cap_is_refused(make_store):
    store = make_store(Clock(), max_bytes_per_extension=1024)
    with pytest.raises(StateLimitError, match="state.max_bytes_per_extension"):
        await store.set("ext", None, "huge", "x" * 2000)


async def test_new_forgets_every_extensions_state_of_the_old_session(make_store, tmp_path):
    """``Conversations.start_new`` tells the store which session ended."""
    from core.kernel.conversations.sessions import Conversations

    store = make_store(Clock())
    conversations = Conversations(tmp_path / "sessions.db")
    conversations.session_ended.append(store.clear_session)
    await conversations.open()
    old = conversations.session_id("capture:u1")
    for ext_id in ("a", "b"):
        await store.set(ext_id, old, "k", 1)
        await store.set(ext_id, None, "k", 2)
    await store.set("a", "capture:u2", "k", 3)
    new = await conversations.start_new("capture:u1")
    await conversations.aclose()
    assert new != old
    assert [await store.read(e, old, "k") for e in ("a", "b")] == [None, None]
    assert [await store.read(e, None, "k") for e in ("a", "b")] == [2, 2]
    assert await store.read("a", "capture:u2", "k") == 3


# ------------------------------------------------------------ the fake kernel


async def test_fake_context_keeps_state_by_the_kernels_rules(tmp_path):
    ctx = FakeContext(tmp_path)
    with pytest.raises(StateScopeError):
        await ctx.get_state("k")
    with serving(S1):
        await ctx.set_state("k", (1, 2))
        assert await ctx.get_state("k") == [1, 2]  # what JSON gives back
    with serving(S2):
        assert await ctx.get_state("k", "none") == "none"
    await ctx.set_state("k", {"n": 1}, scope="extension")
    with pytest.raises(TypeError, match="key 'bad'"):
        await ctx.set_state("bad", b"bytes", scope="extension")
    assert ctx.state == {("capture:u1", "k"): [1, 2], (None, "k"): {"n": 1}}
    with serving(S1):
        await ctx.clear_state()
    assert ctx.state == {(None, "k"): {"n": 1}}


# ------------------------------------------------------------ people (SPEC §11)

GROUP = "telegram_channel:-100"  # one group chat: one session, several people in it


async def test_members_in_one_group_chat_each_keep_their_own_session_state(make_ext, settings_file):
    """A member's session state is theirs, even in a chat they share with the
    owner: bob can neither read nor clear alice's part, nor she his."""
    make_ext("alpha", ext_code())
    async with running_kernel(settings_file()) as kernel:
        alpha = kernel.loader.records["alpha"].context
        owner = TurnContext(channel_id="telegram_channel", user_id="-100", session_id=GROUP)
        bob = replace(owner, sender_id="222", person="bob", role="member")
        carol = replace(owner, sender_id="333", person="carol", role="member")
        with serving(owner):
            await alpha.set_state("draft", "the owner's PIN is 4321")
        with serving(bob):
            assert await alpha.get_state("draft") is None
            await alpha.set_state("draft", "bob's list")
            await alpha.clear_state()  # clears only bob's part
            await alpha.set_state("kept", "bob's")
        with serving(carol):
            assert await alpha.get_state("kept") is None
        with serving(owner):
            assert await alpha.get_state("draft") == "the owner's PIN is 4321"
            assert await alpha.get_state("kept") is None


async def test_new_forgets_every_persons_part_of_the_session(make_store):
    """``/new`` in a group chat forgets the owner's and every member's state of it,
    and nothing of a session whose id merely starts the same way."""
    store = make_store(Clock())
    member = person_session(GROUP, "bob")
    await store.set("a", GROUP, "k", "owner")
    await store.set("a", member, "k", "bob")
    await store.set("a", GROUP + "#2", "k", "the next session")
    await store.set("a", "telegram_channel:-1000", "k", "another chat")
    assert await store.clear_session(GROUP) == 2
    assert await store.read("a", GROUP, "k") is None
    assert await store.read("a", member, "k") is None
    assert await store.read("a", GROUP + "#2", "k") == "the next session"
    assert await store.read("a", "telegram_channel:-1000", "k") == "another chat"
