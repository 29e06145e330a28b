"""The Matrix channel against a real homeserver (Synapse on SQLite, started once
per test session on a free port): a message answered in its room, an approval
answered in place, a stranger given a pairing code and nothing else, a
reminder delivered to the right person, and a SIGKILL between the answer and
its sending delivered once after the restart. Test users talk to the bot with
nio's ``AsyncClient``; the model is scripted (in process) or the fake OpenAI
server (the crash test's real ``main.py``)."""

from __future__ import annotations

import importlib.util
import itertools
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from agents.testing import ScriptedModel, assistant_message, function_call

from conftest import PROJECT_ROOT
from support.fake_openai import FakeOpenAIServer, models_section
from support.harness import running_kernel
from support.matrix_support import (
    SOURCE_DIR,
    MatrixUser,
    Synapse,
    install_extension,
    synapse_missing,
    until,
    write_settings,
)
from support.rocket_ext import ROCKETS
from support.telegram_support import slow_stream

pytestmark = pytest.mark.skipif(synapse_missing() is not None, reason=str(synapse_missing()))


@pytest.fixture(scope="session")
def synapse(tmp_path_factory):
    server = Synapse(tmp_path_factory.mktemp("synapse")).start()
    print(f"Synapse up in {server.start_s:.2f} s")
    yield server
    server.stop()


@pytest.fixture
async def users(synapse):
    made: list[MatrixUser] = []

    def make(prefix: str) -> MatrixUser:
        made.append(MatrixUser(synapse, prefix))
        return made[-1]

    yield make
    for user in made:
        await user.close()


@pytest.fixture
def bot(synapse, monkeypatch, ext_root):
    """A fresh bot account; its token in the environment, the extension installed."""
    bot_id, token = synapse.register("hearth")
    monkeypatch.setenv("MATRIX_ACCESS_TOKEN", token)
    install_extension(ext_root)
    return bot_id


def reply_model(*texts: str) -> ScriptedModel:
    return ScriptedModel([[assistant_message(t)] for t in texts])


async def test_a_message_is_answered_in_its_direct_room(synapse, users, bot, settings_file):
    alice = users("alice")
    model = reply_model("Hello Alice!")
    async with running_kernel(
        write_settings(settings_file, synapse.url, [alice.user_id]), model=model
    ):
        room = await alice.open_direct(bot)
        await alice.send(room, "hi there")
        await until(lambda: _texts_are(alice, room, bot, ["Hello Alice!"]))
    assert "hi there" in str(model.calls[0].input)
    model.assert_complete()


async def test_a_reply_streams_by_editing_one_message_at_most_once_per_second(
    synapse, users, bot, settings_file
):
    alice = users("alice")
    parts = [f"word{i} " for i in range(30)]  # 30 chunks over ~3 s
    model = ScriptedModel([slow_stream(parts, 0.1)])
    settings = write_settings(settings_file, synapse.url, [alice.user_id])
    async with running_kernel(settings, model=model):
        room = await alice.open_direct(bot)
        await alice.send(room, "stream please")
        await until(lambda: _texts_are(alice, room, bot, ["".join(parts).strip()]))
    writes = await alice.bot_writes(room, bot)
    edits = [c for _, c in writes if c.get("m.relates_to", {}).get("rel_type") == "m.replace"]
    assert len(writes) - len(edits) == 1  # one message, edited in place
    assert 1 <= len(edits) <= 4  # previews every second, then the final text
    gaps = [b - a for (a, _), (b, _) in itertools.pairwise(writes)]
    # server receive times (ms): a request delayed on its way under load narrows a gap
    assert min(gaps) >= 800, gaps  # unthrottled, 30 chunks 0.1 s apart would be ~100
    texts = [c["m.new_content"]["body"] for c in edits]
    assert len(set(texts)) == len(texts)  # never the same text twice


async def test_in_a_listed_room_only_a_mention_by_an_allowed_user_is_answered(
    synapse, users, bot, settings_file
):
    from nio import RoomCreateResponse

    alice, bob = users("alice"), users("bob")
    created = await alice.client.room_create(name="family", invite=[bot, bob.user_id])
    assert isinstance(created, RoomCreateResponse), created
    room = str(created.room_id)
    await bob.client.join(room)
    model = reply_model("Hello family!")
    settings = write_settings(settings_file, synapse.url, [alice.user_id], allowed_room_ids=[room])
    async with running_kernel(settings, model=model) as kernel:
        await alice.wait_joined(room, bot)
        await alice.send(room, "talking among ourselves")
        await bob.send(room, f"{bot}: me too")  # a mention, but bob is not allowed
        await alice.send(room, f"{bot.split(':')[0][1:]}: say hello")
        await until(lambda: _texts_are(alice, room, bot, ["Hello family!"]))
        events = await kernel.bus.journal.recent_events(50, topic="user.message")
    assert [e.payload["text"] for e in events] == ["say hello"]
    model.assert_complete()


async def test_a_stranger_gets_a_pairing_code_and_nothing_else(synapse, users, bot, settings_file):
    alice, mallory = users("alice"), users("mallory")
    model = reply_model("for alice")
    settings = write_settings(settings_file, synapse.url, [alice.user_id])
    async with running_kernel(settings, model=model) as kernel:
        strange = await mallory.open_direct(bot)
        await mallory.send(strange, "let me in")
        await mallory.send(strange, "please")
        own = await alice.open_direct(bot)
        await alice.send(own, "hello")
        await until(lambda: _texts_are(alice, own, bot, ["for alice"]))
        told = await until(lambda: mallory.bot_texts(strange, bot))
        events = await kernel.bus.journal.recent_events(50, topic="user.message")
        assert [e.payload["text"] for e in events] == ["hello"]
        assert len(told) == 1 and told[0].startswith("Hearth does not know you yet.")
        code = told[0].split("/pair ")[1].split()[0]
        await alice.send(own, f"/pair {code}")
        await until(
            lambda: _texts_are(
                mallory, strange, bot, [told[0], "You are in: Hearth answers you now."]
            )
        )
    assert len(model.calls) == 1 and "let me in" not in str(model.calls[0].input)


async def _texts_are(user: MatrixUser, room: str, bot: str, expected: list[str]) -> bool:
    return await user.bot_texts(room, bot) == expected


async def test_an_approval_is_answered_in_place_by_a_reply(
    synapse, users, bot, settings_file, make_ext
):
    alice = users("alice")
    make_ext("rockets", ROCKETS)
    model = ScriptedModel(
        [
            [function_call("launch", {"target": "moon"}, call_id="c1")],
            [assistant_message("Launched at the moon.")],
        ]
    )
    settings = write_settings(
        settings_file,
        synapse.url,
        [alice.user_id],
        sections={"policy": {"profile": "safe"}},
        edit_interval_s=0,
    )
    async with running_kernel(settings, model=model) as kernel:
        room = await alice.open_direct(bot)
        await alice.send(room, "launch at the moon")
        asked = await until(lambda: _question(alice, room, bot))
        question_id, text = asked
        assert text.splitlines() == [
            'Allow launch(target="moon")?',
            "1. Allow once",
            "2. Always allow",
            "3. Deny",
            "(Reply with the number, or react with it.)",
        ]
        assert kernel.loader.instance("rockets").log() == []
        await alice.send(room, "1", reply_to=question_id)
        await until(lambda: _shown(alice, room, bot, "Launched at the moon."))
        assert kernel.loader.instance("rockets").log() == ["moon"]
        shown = await until(lambda: _edited(alice, room, bot, question_id))
    assert shown == 'Allow launch(target="moon")?\nAllowed once: launch(target="moon")'


async def test_an_approval_is_denied_by_a_reaction(synapse, users, bot, settings_file, make_ext):
    alice = users("alice")
    make_ext("rockets", ROCKETS)
    model = ScriptedModel(
        [
            [function_call("launch", {"target": "moon"}, call_id="c1")],
            [assistant_message("Not launched.")],
        ]
    )
    settings = write_settings(
        settings_file, synapse.url, [alice.user_id], sections={"policy": {"profile": "safe"}}
    )
    async with running_kernel(settings, model=model) as kernel:
        room = await alice.open_direct(bot)
        await alice.send(room, "launch at the moon")
        question_id, _ = await until(lambda: _question(alice, room, bot))
        await alice.react(room, question_id, "3\ufe0f\u20e3")
        await until(lambda: _shown(alice, room, bot, "Not launched."))
        assert kernel.loader.instance("rockets").log() == []
    outputs = [i for i in model.calls[-1].input if isinstance(i, dict) and "output" in i]
    assert outputs[-1]["output"] == "not run: the user denied launch."


async def test_a_reminder_reaches_the_person_who_set_it(
    synapse, users, bot, settings_file, ext_root
):
    install_extension(ext_root, "scheduler")
    alice, bob = users("alice"), users("bob")
    model = reply_model()
    settings = write_settings(settings_file, synapse.url, [alice.user_id, bob.user_id])
    async with running_kernel(settings, model=model):
        alices, bobs = await alice.open_direct(bot), await bob.open_direct(bot)
        await bob.send(bobs, "/remind 2s stretch your legs")
        texts = await until(lambda: _texts_when(bob, bobs, bot, 2), timeout=30)
        assert await alice.bot_texts(alices, bot) == []
    confirmation, reminder = texts
    assert confirmation.startswith("Reminder #1 set for ")
    assert reminder == "⏰ Reminder: stretch your legs"
    assert model.calls == ()


async def test_a_message_for_a_member_by_matrix_id_reaches_their_direct_room(
    synapse, users, bot, settings_file
):
    """What an MCP client's reminder for a member named ``matrix:@bob:...`` in
    ``people:`` does: the kernel addresses Bob by his Matrix id, and the channel
    finds his direct room (``McpDesk.home``)."""
    from core.config import PersonSettings
    from core.kernel.conversations import Household
    from core.kernel.mcp_desk import McpDesk

    alice, bob = users("alice"), users("bob")
    people = {
        "ada": PersonSettings(role="owner", identities=["cli:local"]),
        "bob": PersonSettings(role="member", identities=[f"matrix:{bob.user_id}"]),
    }
    desk = McpDesk(None, Household(people, []), list, list, people)  # type: ignore[arg-type]
    assert desk.home("claude", "bob", owner=False) == ("matrix_channel", bob.user_id)
    settings = write_settings(settings_file, synapse.url, [alice.user_id, bob.user_id])
    async with running_kernel(settings, model=reply_model()) as kernel:
        alices, bobs = await alice.open_direct(bot), await bob.open_direct(bot)
        channel = kernel.loader.instance("matrix_channel")

        async def reminded() -> bool:
            # Bob's room is known to the bot once its next sync brings the join in
            try:
                await channel.send_to_user(bob.user_id, "⏰ Reminder: water the plants")
            except ValueError as exc:
                assert "has no direct room" in str(exc), exc
                return False
            return True

        await until(reminded)
        with pytest.raises(ValueError, match="has no direct room with the bot that is served"):
            await channel.send_to_user("@mallory:hearth.test", "not for strangers")
        assert await bob.bot_texts(bobs, bot) == ["⏰ Reminder: water the plants"]
        assert await alice.bot_texts(alices, bot) == []


async def _question(user: MatrixUser, room: str, bot: str) -> tuple[str, str] | None:
    found = [m for m in await user.bot_messages(room, bot) if "1. Allow once" in m[1]]
    return found[0] if found else None


async def _shown(user: MatrixUser, room: str, bot: str, text: str) -> bool:
    return text in await user.bot_texts(room, bot)


async def _edited(user: MatrixUser, room: str, bot: str, event_id: str) -> str | None:
    text = dict(await user.bot_messages(room, bot)).get(event_id, "")
    return text if "1. Allow once" not in text else None


async def _texts_when(user: MatrixUser, room: str, bot: str, count: int) -> list[str] | None:
    texts = await user.bot_texts(room, bot)
    return texts if len(texts) >= count else None


async def test_a_sigkill_between_answer_and_send_delivers_once_after_restart(
    synapse, users, tmp_path, ext_root, settings_file
):
    """The kernel is killed while the model answers; the restarted kernel also syncs
    from a token older than the message (as if the kill had beaten the token's
    write): the message is journaled once, the model asked again once, and the
    answer reaches the room exactly once."""
    bot_id, token = synapse.register("hearth")
    install_extension(ext_root)
    alice = users("alice")
    db = tmp_path / "data" / "events.db"
    log = tmp_path / "kernel.log"
    with FakeOpenAIServer(delay_s=30) as model:
        settings = write_settings(
            settings_file,
            synapse.url,
            [alice.user_id],
            sections={"models": models_section(model.base_url)},
        )
        first = _start_kernel(settings, token, log)
        try:
            synced = await until(lambda: _sync_file(tmp_path), timeout=90)
            room = await alice.open_direct(bot_id)
            before = synced.read_text()  # a token from before the message
            event_id = await alice.send(room, "remember me")
            await until(lambda: _async(len(model.requests) >= 1), timeout=90)
            key = f"matrix:{event_id}"
            assert _event_count(db, key) == 1  # journaled before the model was asked
        finally:
            first.send_signal(signal.SIGKILL)
            first.wait(timeout=10)
        assert await alice.bot_texts(room, bot_id) == []

        synced.write_text(before)  # the restart fetches the message again
        model.delay_s = 0
        second = _start_kernel(settings, token, log)
        try:
            await until(lambda: alice.bot_texts(room, bot_id), timeout=90)
            await until(lambda: _async(_status(db, key) == "done"), timeout=90)
            await until(lambda: _async(synced.read_text() != before), timeout=30)
        finally:
            second.send_signal(signal.SIGTERM)
            second.wait(timeout=30)
    assert await alice.bot_texts(room, bot_id) == ["echo: remember me"], log.read_text()[-3000:]
    assert _event_count(db, key) == 1  # the message fetched again was a no-op
    assert len(model.requests) == 2  # the killed turn, and its one re-run


def _start_kernel(settings: Path, token: str, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "MATRIX_ACCESS_TOKEN": token, "OPENAI_AGENTS_DISABLE_TRACING": "1"}
    return subprocess.Popen(
        [sys.executable, "main.py", "--settings", str(settings)],
        cwd=PROJECT_ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=log.open("ab"),
    )


async def _sync_file(root: Path) -> Path | None:
    found = list((root / "data").rglob("sync.json"))
    return found[0] if found else None


async def _async(value: object) -> object:
    return value


def _event_count(db: Path, key: str) -> int:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
        query = "SELECT COUNT(*) FROM events WHERE idempotency_key = ?"
        return int(conn.execute(query, (key,)).fetchone()[0])


def _status(db: Path, key: str) -> str | None:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
        row = conn.execute(
            "SELECT d.status FROM deliveries d JOIN events e ON e.id = d.event_id "
            "WHERE e.idempotency_key = ? AND d.subscriber_id = 'kernel.router'",
            (key,),
        ).fetchone()
    return str(row[0]) if row else None


def test_doctor_checks_the_token_live(synapse, tmp_path, ext_root, settings_file):
    bot_id, token = synapse.register("hearth")
    install_extension(ext_root)
    with FakeOpenAIServer() as model:
        settings = write_settings(
            settings_file,
            synapse.url,
            ["@alice:hearth.test"],
            sections={"models": models_section(model.base_url)},
        )
        good = _doctor(settings, token)
        refused = _doctor(settings, "not-a-token")
    assert f"matrix_channel: signed in as {bot_id} on {synapse.url}" in good.stdout, good.stdout
    assert "end-to-end encrypted rooms are refused" in good.stdout
    assert "doctor: no problems found" in good.stdout
    assert refused.returncode == 1
    assert "FAIL extension matrix_channel" in refused.stdout
    assert "refused MATRIX_ACCESS_TOKEN (M_UNKNOWN_TOKEN" in refused.stdout, refused.stdout


async def test_setup_checks_the_homeserver_and_the_token(synapse):
    spec = importlib.util.spec_from_file_location("matrix_setup", SOURCE_DIR / "setup.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    setup_class = module.MatrixSetup
    bot_id, token = synapse.register("hearth")
    flow = setup_class("MATRIX_ACCESS_TOKEN", None, None, [])
    assert [f["name"] for f in flow.schema(running=False)] == ["homeserver_url"]
    with pytest.raises(ValueError, match="cannot reach http://127.0.0.1:9"):
        await flow.apply("homeserver_url", "http://127.0.0.1:9")
    await flow.apply("homeserver_url", synapse.url)
    with pytest.raises(ValueError, match="refused the token .whoami: M_UNKNOWN_TOKEN"):
        await flow.apply("MATRIX_ACCESS_TOKEN", "wrong")
    await flow.apply("MATRIX_ACCESS_TOKEN", token)
    with pytest.raises(ValueError, match="not a list of quoted Matrix user ids"):
        await flow.apply("allowed_user_ids", "@alice:hearth.test")  # not YAML: asked again
    await flow.apply("allowed_user_ids", '["@alice:hearth.test", "@bob:hearth.test"]')
    names = [f["name"] for f in flow.schema(running=False)]
    assert names == ["homeserver_url", "MATRIX_ACCESS_TOKEN", "allowed_user_ids"]
    done, summary = await flow.complete(running=False, running_as=None)
    assert done and summary.startswith(f"{bot_id} serves @alice:hearth.test, @bob:hearth.test")


def _doctor(settings: Path, token: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(PROJECT_ROOT / "main.py"), "doctor", "--settings", str(settings)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "MATRIX_ACCESS_TOKEN": token},
    )


async def test_an_encrypted_room_is_refused_with_a_message(synapse, users, bot, settings_file):
    alice = users("alice")
    model = reply_model()
    encryption = {
        "type": "m.room.encryption",
        "state_key": "",
        "content": {"algorithm": "m.megolm.v1.aes-sha2"},
    }
    async with running_kernel(
        write_settings(settings_file, synapse.url, [alice.user_id]), model=model
    ) as kernel:
        from nio import RoomCreateResponse

        created = await alice.client.room_create(
            is_direct=True, invite=[bot], initial_state=[encryption]
        )
        assert isinstance(created, RoomCreateResponse), created
        room = str(created.room_id)
        await alice.wait_joined(room, bot)
        await alice.send(room, "hello in secret")  # nio without libolm sends it in the clear
        told = await until(lambda: alice.bot_texts(room, bot))
        events = await kernel.bus.journal.recent_events(50, topic="user.message")
    assert told == [
        "This room is end-to-end encrypted, and Hearth's Matrix channel cannot read "
        "encrypted rooms. Write to it in an unencrypted direct chat instead."
    ]
    assert events == [] and model.calls == ()
