"""A member's reminder never reaches another person (issue 41, ADR 0076). Alice is the
owner on the ``capture`` channel (the default one); Bob is a member on ``bobchan``
(and, as ``bob``, on ``capture`` too). Bob's reminder comes due while his channel
is not loaded — disabled, or not installed across a restart — and Alice's channel
is: nothing reaches Alice, Bob's ``/reminders`` says it waits, and Bob gets it once
on ``bobchan`` when that channel is up again."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

from support.bundled import copy_bundled
from support.fake_telegram import FakeTelegram
from support.harness import CAPTURE_CHANNEL, CAPTURE_MANIFEST, running_kernel, wait_for
from support.telegram_support import ALICE, EXTENSION_ID, install_extension, telegram_config

PEOPLE = {
    "alice": {"role": "owner", "identities": ["capture:alice"]},
    "bob": {"role": "member", "identities": ["bobchan:bob", "capture:bob"]},
}
REMINDER = "⏰ Reminder: take the pills"
BOB = 43  # a member on Telegram


def sent(kernel, ext_id: str) -> list[tuple[str, str | None, str]]:
    return kernel.loader.instance(ext_id)._log()


def leaked(kernel) -> list[tuple[str, str | None, str]]:
    """What reached anyone but Bob about his reminder."""
    return [row for row in sent(kernel, "capture") if "pills" in row[2] and row[1] != "bob"]


async def ask(kernel, text: str, who: str) -> str:
    """``text`` from ``who`` on ``capture``; the first reply to them after it."""
    before = len(sent(kernel, "capture"))
    await kernel.loader.instance("capture").say(text, who)
    await wait_for(lambda: any(u == who for _, u, _ in sent(kernel, "capture")[before:]))
    return next(m for _, u, m in sent(kernel, "capture")[before:] if u == who)


def held_rows(data: Path) -> list[tuple[str, str, str]]:
    """What waits in ``state.db`` (none while the table does not exist)."""
    try:
        with sqlite3.connect(data / "state.db") as db:
            rows = db.execute("SELECT channel_id, user_id, text FROM hearth_held_notices")
            return [tuple(row) for row in rows]
    except sqlite3.OperationalError:
        return []


def fire_handled(kernel, data: Path) -> bool:
    """Bob's fire has been dealt with: held for him, or sent to someone."""
    return bool(leaked(kernel) or held_rows(data))


async def set_bobs_reminder(kernel) -> None:
    await kernel.loader.instance("bobchan").say("/remind 2s take the pills", "bob")
    await wait_for(lambda: any("Reminder #1 set" in t for _, _, t in sent(kernel, "bobchan")))


def setup(ext_root: Path, make_ext, settings_file) -> tuple[Path, Path]:
    copy_bundled(ext_root, "scheduler")
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    make_ext("bobchan", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    path = settings_file(channels={"default": "capture"}, people=PEOPLE)
    return path, ext_root.parent / "data"


async def test_a_members_reminder_waits_for_their_channel_not_the_owners(
    ext_root, make_ext, settings_file
):
    path, data = setup(ext_root, make_ext, settings_file)
    async with running_kernel(path) as kernel:
        await set_bobs_reminder(kernel)
        bobchan = kernel.loader.records["bobchan"]
        bobchan.disable("the test took it down")  # not loaded: no traffic
        await wait_for(lambda: fire_handled(kernel, data), timeout=30)
        assert leaked(kernel) == []
        assert held_rows(data) == [("bobchan", "bob", REMINDER)]
        assert await ask(kernel, "/reminders", "bob") == (
            f"waiting for bobchan to be up (it is not loaded): {REMINDER}"
        )
        assert (await ask(kernel, "/reminders", "alice")).startswith("No reminders.")

        bobchan.activate()  # up again: what waited for it is sent, once
        await wait_for(lambda: ("reply", "bob", REMINDER) in sent(kernel, "bobchan"))
        await wait_for(lambda: not held_rows(data))
        bobchan.disable("down again")
        bobchan.activate()
        bobs = sent(kernel, "bobchan")
        after = await ask(kernel, "/reminders", "bob")
    assert bobs.count(("reply", "bob", REMINDER)) == 1
    assert leaked(kernel) == []
    assert after.startswith("No reminders.")


async def test_a_held_reminder_survives_a_restart_and_is_sent_once(
    ext_root, make_ext, settings_file, tmp_path
):
    path, data = setup(ext_root, make_ext, settings_file)
    async with running_kernel(path) as kernel:
        await set_bobs_reminder(kernel)
    away = tmp_path / "bobchan-away"
    shutil.move(ext_root / "bobchan", away)  # Bob's channel is not installed for a while

    async with running_kernel(path) as kernel:  # the reminder comes due, late
        await wait_for(lambda: fire_handled(kernel, data), timeout=30)
        assert leaked(kernel) == []
        assert "waiting for bobchan" in await ask(kernel, "/reminders", "bob")

    shutil.move(away, ext_root / "bobchan")
    async with running_kernel(path) as kernel:
        await wait_for(lambda: any("pills" in t for _, _, t in sent(kernel, "bobchan")))
        await wait_for(lambda: not held_rows(data))
        bobs = [row for row in sent(kernel, "bobchan") if "pills" in row[2]]
        others = leaked(kernel)
    assert len(bobs) == 1 and bobs[0][:2] == ("reply", "bob") and "take the pills" in bobs[0][2]
    assert others == []


async def test_a_members_telegram_reminder_never_reaches_the_owners_terminal(
    ext_root, make_ext, settings_file, tmp_path, monkeypatch
):
    """The issue's case: Bob's reminder, set on Telegram, comes due while Telegram is
    not installed and the owner's terminal is up; Bob's chat gets it once, later."""
    with FakeTelegram() as tg:
        monkeypatch.setenv("TELEGRAM_BOT_TOKEN", tg.token)
        copy_bundled(ext_root, "scheduler")
        install_extension(ext_root)
        make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)  # the owner's terminal
        people = {
            "alice": {"role": "owner", "identities": ["capture:alice", f"telegram:{ALICE}"]},
            "bob": {"role": "member", "identities": [f"telegram:{BOB}"]},
        }
        path = settings_file(
            channels={"default": "capture"},
            people=people,
            extensions={EXTENSION_ID: telegram_config(tg, (ALICE, BOB))},
        )
        async with running_kernel(path):
            tg.send_update("/remind 2s take the pills", user_id=BOB)
            await wait_for(lambda: any("Reminder #1 set" in t for t in tg.chat_texts(BOB)))
        away = tmp_path / "telegram-away"
        shutil.move(ext_root / EXTENSION_ID, away)

        data = ext_root.parent / "data"
        async with running_kernel(path) as kernel:
            await wait_for(lambda: fire_handled(kernel, data), timeout=30)
            on_terminal = [row for row in sent(kernel, "capture") if "pills" in row[2]]
        assert on_terminal == []

        shutil.move(away, ext_root / EXTENSION_ID)
        async with running_kernel(path):
            await wait_for(lambda: any("take the pills" in t for t in tg.chat_texts(BOB)[1:]))
            await wait_for(lambda: not held_rows(data))
        bobs = [t for t in tg.chat_texts(BOB) if "take the pills" in t and "Reminder #1" not in t]
    assert len(bobs) == 1 and bobs[0].startswith("⏰ Reminder: take the pills")
    assert not any("pills" in t for t in tg.chat_texts(ALICE))
