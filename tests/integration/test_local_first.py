"""Everyday requests answered locally first (issue 47): remembering, recalling and
forgetting facts, setting, listing and cancelling reminders, in English and German,
answered at once by the memory and scheduler extensions' input hooks without a
model call; anything else, or everything with ``local_first: false``, goes to the
model. Through a real kernel, the capture channel and a scripted model that fails
the test if it is asked what the sentences answer."""

from __future__ import annotations

from agents.testing import ScriptedModel, assistant_message

from support.bundled import copy_bundled
from support.harness import CAPTURE_CHANNEL, CAPTURE_MANIFEST, running_kernel, wait_for
from support.scheduler_helpers import replied

WORDS_ONLY = {"embeddings": {"backend": "none"}}  # no model file to load: words are enough


def household(ext_root, make_ext, settings_file, **extensions):
    copy_bundled(ext_root, "memory", "scheduler")
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    return settings_file(
        channels={"default": "capture"},
        timezone="Europe/Berlin",
        extensions={"memory": WORDS_ONLY, **extensions},
    )


async def ask(kernel, text: str) -> str:
    count = len(replied(kernel))
    await kernel.loader.instance("capture").say(text)
    await wait_for(lambda: len(replied(kernel)) > count, timeout=30)
    return replied(kernel)[-1]


async def test_memory_sentences_need_no_model(ext_root, make_ext, settings_file) -> None:
    model = ScriptedModel([])  # any model call fails the turn
    async with running_kernel(household(ext_root, make_ext, settings_file), model=model) as k:
        said = await ask(k, "Please remember that my cat is called Miso.")
        assert said == "I'll remember that (#1): The user's cat is called Miso."
        assert await ask(k, "Remember that my cat is called Miso") == (
            "I already knew that (#1): The user's cat is called Miso."
        )
        recalled = await ask(k, "What do you remember about my cat?")
        assert recalled.splitlines() == [
            "What I remember (my cat):",
            "- #1: The user's cat is called Miso.",
        ]
        german = await ask(k, "Merk dir, dass meine Katze Miso heißt.")
        assert german == "Ich merke es mir (#2): meine Katze Miso heißt"
        assert await ask(k, "Forget that my cat is called Miso.") == (
            "Forgotten (#1): The user's cat is called Miso."
        )
        memories = await ask(k, "/memories")
        assert memories.splitlines() == [
            "1 memory kept",
            "#2: Der Nutzer sagt: meine Katze Miso heißt.",
        ]
    assert not model.calls


async def test_reminder_sentences_need_no_model(ext_root, make_ext, settings_file) -> None:
    model = ScriptedModel([])
    async with running_kernel(household(ext_root, make_ext, settings_file), model=model) as k:
        first = await ask(k, "Remind me in 2 minutes to water the plants.")
        assert first.startswith("Reminder #1 set for today ") and first.endswith(
            ": water the plants"
        )
        second = await ask(k, "Erinnere mich morgen um 9 Uhr daran, die Pflanzen zu gießen")
        assert second == "Reminder #2 set for tomorrow 09:00: die Pflanzen zu gießen"
        third = await ask(k, "remind me to call mom tomorrow at 9am")
        assert third == "Reminder #3 set for tomorrow 09:00: call mom"
        fourth = await ask(k, "Erinnere mich in 10 Minuten an den Tee")
        assert fourth.startswith("Reminder #4 set for ") and fourth.endswith(": den Tee")
        listed = await ask(k, "What are my reminders?")
        assert [line.split()[0] for line in listed.splitlines()] == ["#1", "#4", "#2", "#3"]
        assert await ask(k, "Cancel reminder 1") == "Cancelled reminder #1: water the plants"
        assert await ask(k, "Lösche Erinnerung 4") == "Cancelled reminder #4: den Tee"
        schedules = await k.loader.instance("scheduler").scheduler.list(None)
        assert [s.text for s in schedules] == ["die Pflanzen zu gießen", "call mom"]
    assert not model.calls


async def test_what_the_sentences_do_not_take_goes_to_the_model(
    ext_root, make_ext, settings_file
) -> None:
    model = ScriptedModel(
        [
            [assistant_message("Paris.")],
            [assistant_message("Which memory?")],
            [assistant_message("When?")],
            [assistant_message("Here is what you said.")],
        ]
    )
    async with running_kernel(household(ext_root, make_ext, settings_file), model=model) as k:
        assert await ask(k, "What is the capital of France?") == "Paris."
        # nothing stored says nearly that: the model may know what was meant
        assert await ask(k, "Forget that I like jazz.") == "Which memory?"
        assert await ask(k, "Remind me to call mom sometime") == "When?"  # no time reads
        assert await ask(k, "Remind me what I said about the heating") == ("Here is what you said.")
    model.assert_complete()


async def test_local_first_false_hands_everything_to_the_model(
    ext_root, make_ext, settings_file
) -> None:
    model = ScriptedModel([[assistant_message("Noted by the model.")]])
    path = household(ext_root, make_ext, settings_file, scheduler={"local_first": False})
    async with running_kernel(path, model=model) as k:
        assert await ask(k, "Remind me in 2 minutes to stretch") == "Noted by the model."
        # the memory's sentences are still on
        assert (await ask(k, "Remember that I like tea.")).startswith("I'll remember that")
    model.assert_complete()


async def test_a_member_reaches_only_their_own_memories_and_reminders(
    ext_root, make_ext, settings_file
) -> None:
    """The sentences act for the person who says them (SPEC §11): Bob, a member, can
    neither recall, forget nor cancel what Alice, the owner, keeps."""
    copy_bundled(ext_root, "memory", "scheduler")
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    people = {
        "alice": {"role": "owner", "identities": ["capture:alice"]},
        "bob": {"role": "member", "identities": ["capture:bob"]},
    }
    path = settings_file(
        channels={"default": "capture"},
        timezone="Europe/Berlin",
        extensions={"memory": WORDS_ONLY},
        people=people,
    )
    model = ScriptedModel([[assistant_message("Which memory?")]])
    async with running_kernel(path, model=model) as k:
        capture = k.loader.instance("capture")

        async def said_by(who: str, text: str) -> str:
            before = len(capture._log())
            await capture.say(text, who)
            await wait_for(lambda: len(capture._log()) > before, timeout=30)
            return capture._log()[-1][2]

        assert (await said_by("alice", "Remember that my cat is called Miso.")).startswith(
            "I'll remember that"
        )
        first = await said_by("alice", "Remind me in 2 minutes to water the plants")
        assert first.startswith("Reminder #1 set for ")
        assert await said_by("bob", "What do you remember about my cat?") == (
            "I don't remember anything about my cat."
        )
        # nothing of Bob's says that: the model is asked, Alice's fact stays
        assert await said_by("bob", "Forget that my cat is called Miso.") == "Which memory?"
        refused = await said_by("bob", "Cancel reminder 1")
        assert not refused.startswith("Cancelled")
        assert [
            s.text for s in await k.loader.instance("scheduler").scheduler.list(None)
        ] == [  # the owner's
            "water the plants"
        ]
        recalled = await said_by("alice", "What do you remember about my cat?")
        assert "- #1: The user's cat is called Miso." in recalled
    model.assert_complete()
