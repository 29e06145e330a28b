"""Everyday memory requests in the person's own words, answered without a model.

"Please remember that my cat is called Miso.", "Merk dir, dass meine Katze
Miso heißt.", "What do you remember about my cat?", "Forget that my cat is
called Miso." are answered at once (issue 47, as Home Assistant's Assist
answers its sentence templates before any model): a small local model took
minutes for the first of them and then answered in text imitating the memory
format, storing nothing. Only sentences that say unambiguously what to do are
taken; anything else — a question about the world, a fact to forget that
matches no memory — goes to the model as before (``None``). The setting
``extensions.memory.local_first: false`` turns it off.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from .store import Memory
from .text import jaccard

__all__ = ["MemoryActions", "answer", "third_person"]

_END = r"\s*[.!?]*\s*"
REMEMBER = (
    re.compile(
        r"(?:please\s+)?(?:remember|note|keep in mind)(?:\s+that|\s*:)\s+(?P<fact>.+?)" + _END,
        re.IGNORECASE | re.DOTALL,
    ),
    re.compile(
        r"(?:bitte\s+)?merk(?:e)?\s+dir\s*(?:,\s*|:\s*|\s+)(?:dass\s+)?(?P<fact>.+?)" + _END,
        re.IGNORECASE | re.DOTALL,
    ),
)
RECALL = (
    re.compile(r"what do you remember about\s+(?P<query>.+?)" + _END, re.IGNORECASE),
    re.compile(
        r"was hast du dir (?:über|zu)\s+(?P<query>.+?)\s+gemerkt"
        + _END
        + r"|woran erinnerst du dich (?:über|zu)\s+(?P<query2>.+?)"
        + _END,
        re.IGNORECASE,
    ),
)
FORGET = (
    re.compile(r"(?:please\s+)?forget\s+that\s+(?P<fact>.+?)" + _END, re.IGNORECASE),
    re.compile(r"(?:bitte\s+)?vergiss\s*,?\s+dass\s+(?P<fact>.+?)" + _END, re.IGNORECASE),
)
GERMAN = 1  # the index of the German pattern in each pair
# a memory to forget must say nearly what the person said (token Jaccard)
FORGET_MATCH = 0.7

_FIRST_PERSON = (
    (re.compile(r"\b(?:I am|I'm)\b", re.IGNORECASE), "the user is"),
    (re.compile(r"\bI was\b", re.IGNORECASE), "the user was"),
    (re.compile(r"\bI have\b|\bI've\b", re.IGNORECASE), "the user has"),
    (re.compile(r"\bmy\b", re.IGNORECASE), "the user's"),
    (re.compile(r"\bmine\b", re.IGNORECASE), "the user's"),
    (re.compile(r"\bI\b"), "the user"),
    (re.compile(r"\bme\b", re.IGNORECASE), "the user"),
    (re.compile(r"\bmyself\b", re.IGNORECASE), "the user"),
)


@dataclass(frozen=True, slots=True)
class MemoryActions:
    """What the sentences may do, for one person (the extension's own API)."""

    remember: Callable[[str], Awaitable[tuple[Memory, bool]]]
    recall: Callable[[str], Awaitable[list[Memory]]]
    forget: Callable[[int], Awaitable[Memory | None]]


def third_person(fact: str) -> str:
    """``my cat is called Miso`` → ``The user's cat is called Miso.``: facts are kept
    in the third person, as the ``remember`` tool asks of the model."""
    text = fact.strip()
    for pattern, replacement in _FIRST_PERSON:
        text = pattern.sub(replacement, text)
    text = text[:1].upper() + text[1:]
    return text if text.endswith((".", "!", "?")) else text + "."


def _german_fact(fact: str) -> str:
    """German facts are kept as said, attributed: pronouns need grammar to turn."""
    text = fact.strip().rstrip(".!")
    return f"Der Nutzer sagt: {text}."


async def answer(text: str, act: MemoryActions) -> str | None:
    """The reply to a memory request in ``text``, or ``None`` for the model."""
    said = " ".join(text.split())
    for index, pattern in enumerate(REMEMBER):
        if found := pattern.fullmatch(said):
            return await _remember(found.group("fact"), index == GERMAN, act)
    for index, pattern in enumerate(RECALL):
        if found := pattern.fullmatch(said):
            query = found.group("query") or found.groupdict().get("query2") or ""
            return await _recall(query, index == GERMAN, act)
    for index, pattern in enumerate(FORGET):
        if found := pattern.fullmatch(said):
            return await _forget(found.group("fact"), index == GERMAN, act)
    return None


async def _remember(fact: str, german: bool, act: MemoryActions) -> str | None:
    stored = _german_fact(fact) if german else third_person(fact)
    try:
        memory, created = await act.remember(stored)
    except ValueError:
        return None  # too long or empty: the model explains better
    if german:
        return (
            f"Ich merke es mir (#{memory.id}): {fact}"
            if created
            else f"Das weiß ich schon (#{memory.id})."
        )
    if created:
        return f"I'll remember that (#{memory.id}): {memory.text}"
    return f"I already knew that (#{memory.id}): {memory.text}"


async def _recall(query: str, german: bool, act: MemoryActions) -> str:
    memories = await act.recall(query.strip())
    if not memories:
        if german:
            return f"Dazu habe ich mir nichts gemerkt: {query}"
        return f"I don't remember anything about {query}."
    head = f"Dazu habe ich mir gemerkt ({query}):" if german else f"What I remember ({query}):"
    return "\n".join([head, *(f"- #{m.id}: {m.text}" for m in memories)])


async def _forget(fact: str, german: bool, act: MemoryActions) -> str | None:
    wanted = _german_fact(fact) if german else third_person(fact)
    candidates = await act.recall(wanted)
    best = max(candidates, key=lambda m: jaccard(wanted, m.text), default=None)
    if best is None or jaccard(wanted, best.text) < FORGET_MATCH:
        return None  # nothing says nearly that: the model may find what was meant
    forgotten = await act.forget(best.id)
    if forgotten is None:
        return None
    if german:
        return f"Vergessen (#{forgotten.id}): {forgotten.text}"
    return f"Forgotten (#{forgotten.id}): {forgotten.text}"
