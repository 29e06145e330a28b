"""The extension library's setup questions shared by the chat channels: the
allow-list fields, the routing of their answers, the closing sentences, and the
message that gives a stranger a pairing code."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.extensions.sdk import (
    CODE_TTL_S,
    AllowListQuestions,
    Pairings,
    one_line,
    running_note,
    secret_field,
)


def _ids(text: str) -> list[int]:
    try:
        return [int(i) for i in text.strip("[]").split(",") if i.strip()]
    except ValueError:
        raise ValueError(f"not ids: {text!r}") from None


def test_a_secret_field_keeps_the_token_set_now_without_showing_it() -> None:
    fresh = secret_field("TOKEN", "Bot token", None)
    kept = secret_field("TOKEN", "Bot token", "abc")
    assert fresh == {
        "name": "TOKEN",
        "prompt": "Bot token (hidden)",
        "secret": True,
        "required": False,
    }
    assert kept["default"] == "abc"
    assert kept["prompt"] == "Bot token (hidden; Enter keeps the one set now)"


def test_one_line_folds_and_cuts_an_error() -> None:
    assert one_line(ValueError("a\n  b")) == "a b"
    assert one_line(ValueError()) == "ValueError"
    assert len(one_line("x" * 500)) == 200


def test_the_fields_offer_discovery_then_each_writer_then_the_list() -> None:
    people = AllowListQuestions([1], _ids, "ids to serve")
    people.found([(7, "Ada, id 7"), (7, "Ada again"), (9, "Bob, id 9")])
    fields = people.fields("Add someone?")
    assert [f["name"] for f in fields] == ["discover", "allow_7", "allow_9", "allowed_user_ids"]
    assert fields[0]["default"] == "no"  # somebody is allowed already
    assert fields[1]["prompt"] == "Ada, id 7 wrote. Allow them"
    assert fields[-1]["default"] == "[1]"
    assert [f["name"] for f in people.fields(None)] == ["allow_7", "allow_9", "allowed_user_ids"]


async def test_answers_add_writers_discover_and_replace_the_list() -> None:
    people: AllowListQuestions[int] = AllowListQuestions([], _ids, "ids")
    asked: list[str] = []

    async def discover() -> None:
        asked.append("discover")
        people.found([(7, "Ada")])

    assert await people.apply("discover", "no", discover)
    assert await people.apply("discover", "yes", discover)
    assert asked == ["discover"]
    assert await people.apply("allow_7", "yes")
    assert await people.apply("allow_7", "yes")  # once only
    assert people.allowed == [7]
    assert not await people.apply("allow_8", "yes")  # never offered: not ours
    assert not await people.apply("discover", "yes")  # a channel that cannot listen
    assert await people.apply("allowed_user_ids", "[3, 4]")
    assert people.allowed == [3, 4]
    with pytest.raises(ValueError):
        await people.apply("allowed_user_ids", "[x]")


def test_the_closing_sentences() -> None:
    people = AllowListQuestions(["a", "b"], lambda text: [text], "ids")
    assert people.serves("the bot @hearth") == "the bot @hearth serves a, b; start Hearth to use it"
    nobody = AllowListQuestions([], lambda text: [text], "ids")
    assert "nobody yet (/pair admits someone later)" in nobody.serves("the bot")
    assert running_note(None) == (
        True,
        "the bot is running; /pair admits someone, `main.py setup` changes the bot",
    )


def test_an_invitation_carries_a_fresh_code_once_while_it_lives(tmp_path: Path) -> None:
    pairings = Pairings(tmp_path, label="Test", prefix="test")
    text = pairings.invite("stranger")
    assert text is not None
    code = text.split("/pair ", 1)[1].split(" ", 1)[0]
    assert pairings.holds(code)
    assert f"for {round(CODE_TTL_S / 60)} minutes" in text
    assert pairings.invite("stranger") is None  # told already
