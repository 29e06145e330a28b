"""Text handling for memory: tokens, normalised form, safe FTS5 queries, similarity.

User text goes into FTS5 ``MATCH``, whose syntax treats quotes, ``*``, ``-``,
``:``, ``NEAR`` and ``AND``/``OR``/``NOT`` specially. We never pass user text
through: we take its word tokens, drop stop words, quote each term and join
them with ``OR`` — BM25 then rewards facts that share more (and rarer) terms.
Terms are split on ``_`` as the FTS tokenizer does, so a quoted term is
always a single token.
"""

from __future__ import annotations

import re

WORD = re.compile(r"[^\W_]+", re.UNICODE)
MAX_QUERY_TERMS = 24

STOPWORDS = frozenset(
    """
    a about above after again against all also am an and any are as at be because been
    before being below between both but by can could did do does doing done down during
    each else ever few for from further get gets got had has have having he her here hers
    herself him himself his how i if in into is it its itself just let like ll me more
    most much must my myself no nor not now of off on once only or other our ours
    ourselves out over own please re s same shall she should so some such t than that
    the their theirs them themselves then there these they this those through to too
    under until up us ve very was we were what when where which while who whom why will
    with would yes yet you your yours yourself yourselves d m o y don doesn didn isn
    wasn aren weren won wouldn shouldn couldn hasn haven hadn tell know remember
    hi hello hey thanks thank ok okay user users
    """.split()
)


def tokens(text: str) -> list[str]:
    """Lower-cased word tokens (runs of letters and digits), in order."""
    return WORD.findall(text.casefold())


def normalise(text: str) -> str:
    """The dedupe key: tokens joined by one space (case, punctuation, spacing ignored)."""
    return " ".join(tokens(text))


def query_terms(text: str) -> list[str]:
    """Distinct content terms of ``text`` (stop words and single letters dropped)."""
    seen: dict[str, None] = {}
    for token in tokens(text):
        if token in STOPWORDS or (len(token) < 2 and not token.isdigit()):
            continue
        seen.setdefault(token, None)
        if len(seen) == MAX_QUERY_TERMS:
            break
    return list(seen)


USER_POSSESSIVE = re.compile(r"\b(the user's|the user’s)", re.IGNORECASE)
USER_SUBJECT = re.compile(r"\bthe user\b", re.IGNORECASE)


def first_person(text: str) -> str:
    """``The user's cat`` → ``My cat``, ``The user`` → ``I``: the text to embed.

    Facts are stored in the third person (the ``remember`` tool asks for it)
    while people ask in the first; embedding both in the first person lifts
    paraphrase recall (38 instead of 34 of 42 facts for e5 on bench/memory.py's set).
    """

    def possessive(match: re.Match[str]) -> str:
        return (
            "My" if match.start() == 0 or text[match.start() - 2 : match.start()] == ". " else "my"
        )

    def subject(match: re.Match[str]) -> str:
        return (
            "I" if match.start() == 0 or text[match.start() - 2 : match.start()] == ". " else "me"
        )

    return USER_SUBJECT.sub(subject, USER_POSSESSIVE.sub(possessive, text))


def match_any(terms: list[str]) -> str:
    """An FTS5 ``MATCH`` expression matching any of ``terms`` (each quoted)."""
    return " OR ".join(f'"{term}"' for term in terms)


def jaccard(a: str, b: str) -> float:
    """Token-set Jaccard similarity of two texts (1.0 = same words)."""
    sa, sb = set(tokens(a)), set(tokens(b))
    if not sa and not sb:
        return 1.0
    return len(sa & sb) / len(sa | sb)
