"""The words local-first sentences turn into (issue 47): German reminder times into
the ``/remind`` phrases, first-person facts into the third person memory keeps."""

from __future__ import annotations

import pytest

from sandbox.extensions.memory.sentences import third_person
from sandbox.extensions.scheduler.sentences import german_time


@pytest.mark.parametrize(
    ("german", "phrase"),
    [
        ("in 10 Minuten", "in 10 minutes"),
        ("in einer Stunde", "in 1 hours"),
        ("morgen um 9 Uhr", "tomorrow 9:00"),
        ("heute um 18:30", "today 18:30"),
        ("um 7:15 Uhr", "7:15"),
        ("jeden Tag um 8 Uhr", "every day 8:00"),
        ("werktags um 8:30", "every weekday 8:30"),
        ("jeden Montag um 10 Uhr", "every monday 10:00"),
    ],
)
def test_german_times_read_as_remind_phrases(german: str, phrase: str) -> None:
    assert german_time(german) == phrase


@pytest.mark.parametrize(
    ("said", "kept"),
    [
        ("my cat is called Miso", "The user's cat is called Miso."),
        ("I'm allergic to peanuts", "The user is allergic to peanuts."),
        ("I have two sisters.", "The user has two sisters."),
        ("Anna lives next to me", "Anna lives next to the user."),
    ],
)
def test_facts_are_kept_in_the_third_person(said: str, kept: str) -> None:
    assert third_person(said) == kept
