"""Recall quality sets for bench/memory.py (and the memory tests).

``PARAPHRASE``: facts with a question that shares no content word with its
fact (checked by ``shared_words``), so only meaning can connect them.
``lexical_set``: facts with names and numbers, and questions using the same
words, among distractors that share some of them — what BM25 is good at.
``heldout``: 172 such pairs written apart from both, in a tuning and a test
half (bench/memory_heldout.json).
``distractors``: everyday facts about the user that answer none of the
questions; both sets are searched among at least 150 of them.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

PARAPHRASE: list[tuple[str, str]] = [
    ("My cat is named Miso.", "What is my pet called?"),
    ("The user is allergic to peanuts.", "Which food makes me ill?"),
    ("The user works as a nurse at the city hospital.", "What is my job?"),
    ("The user's wife Clara was born in Vienna.", "Where does my spouse come from?"),
    ("The user drives a red Toyota Corolla.", "What car do I own?"),
    ("The user's favourite dish is lasagne.", "What meal do I like most?"),
    (
        "The user plays the cello in an amateur orchestra.",
        "Which musical instrument do I practise?",
    ),
    (
        "The user's daughter Lea studies medicine in Leipzig.",
        "What is my child learning at university?",
    ),
    ("The user is vegetarian.", "Do I eat meat?"),
    ("The user's dentist appointment is on March 3rd.", "When must I see the tooth doctor?"),
    ("The user's mother lives in a small village near Porto.", "Where is my mum's home?"),
    ("The user takes blood pressure pills every morning.", "What medication am I on?"),
    ("The user speaks fluent Japanese.", "Which foreign language do I know?"),
    (
        "The WiFi password is on a sticker under the router.",
        "Where can I find the internet login code?",
    ),
    ("The user is afraid of heights.", "What phobia do I have?"),
    ("The user's son Ben plays football on Saturdays.", "When does my boy have soccer?"),
    ("The user goes to the gym on Monday and Thursday evenings.", "Which days do I work out?"),
    ("The user's favourite author is Haruki Murakami.", "Which writer do I enjoy reading?"),
    (
        "The user met their partner at a salsa class in 2015.",
        "How did I get to know my significant other?",
    ),
    ("The user's car insurance renews in November.", "When is my vehicle coverage due?"),
    ("The user grows tomatoes on the balcony.", "What vegetables am I cultivating at home?"),
    ("The user's best friend is called Jonas.", "Who is my closest buddy?"),
    ("The spare house key is with the neighbour.", "Who can let me in if I get locked out?"),
    ("The user drinks coffee black without sugar.", "How do I take my espresso?"),
    ("The user's laptop is a ThinkPad X1.", "Which computer do I use?"),
    ("The user is learning to play chess online.", "What board game am I getting better at?"),
    ("The user's rent is 900 euros per month.", "How much do I pay for my apartment?"),
    ("The user is colour-blind.", "Do I have trouble seeing certain hues?"),
    ("The user's grandfather was a fisherman.", "What did my dad's dad do for a living?"),
    ("The user hates flying and prefers trains.", "How do I like to travel?"),
    ("The user's birthday is on the 12th of August.", "When was I born?"),
    ("The user volunteers at an animal shelter on Sundays.", "Where do I help out at weekends?"),
    ("The user's phone is an old iPhone 8.", "What mobile do I carry?"),
    ("The user gets migraines after sleeping too little.", "What gives me headaches?"),
    ("The user wants to visit Iceland next summer.", "Where am I planning my holiday?"),
    ("The user's GP is Dr. Weber in Schillerstrasse.", "Who is my physician?"),
    ("The user bakes sourdough bread every weekend.", "What do I make in the oven?"),
    ("The user is lactose intolerant.", "Can I have milk?"),
    ("The user supports the football club Benfica.", "Which soccer team am I a fan of?"),
    ("The user's sister is a pilot for Lufthansa.", "What does my sibling do for work?"),
    ("The user sleeps badly when the bedroom is warm.", "Why do I get poor rest on hot nights?"),
    ("The user's passport expires in 2027.", "Until when is my travel document valid?"),
]

# Questions in other languages for facts stored in English (the model is multilingual).
MULTILINGUAL: list[tuple[str, str]] = [
    ("My cat is named Miso.", "Wie heißt mein Haustier?"),
    ("The user works as a nurse at the city hospital.", "Qual é a minha profissão?"),
    ("The user speaks fluent Japanese.", "¿Qué idioma extranjero hablo?"),
]

# Past-conversation search (tests/integration/test_memory_conversations.py, bench/memory.py): a turn,
# who said it (the person or Hearth), a question sharing no content word with it.
CONVERSATION_PAIRS = [
    (
        "The boiler has been making a clanking noise since Monday.",
        "user",
        "What did I say about the heating system being loud?",
    ),
    (
        "Try bleeding the radiators first; trapped air often causes that.",
        "assistant",
        "Which fix did you propose for the heaters?",
    ),
    (
        "My sister Karen is flying in from Toronto on the 14th.",
        "user",
        "When does my sibling land from Canada?",
    ),
    (
        "I finally booked the dentist for a filling next Wednesday.",
        "user",
        "When is my tooth appointment?",
    ),
    ("We adopted a kitten and named her Pixel.", "user", "What is our new cat called?"),
    ("My knee has been hurting after running.", "user", "Which joint was sore following a jog?"),
    (
        "The landlord wants to raise the rent by 50 euros.",
        "user",
        "How much more will the apartment cost?",
    ),
    (
        "I'm thinking about learning Portuguese before the trip to Lisbon.",
        "user",
        "Which language did I want to study?",
    ),
    (
        "The car failed its inspection because of the brakes.",
        "user",
        "Why didn't my vehicle pass the check?",
    ),
    ("I lost my wallet on the tram yesterday.", "user", "Where did I misplace my purse?"),
    (
        "The kids have swimming lessons every Tuesday afternoon.",
        "user",
        "When do my children go to the pool?",
    ),
    ("My boss offered me a promotion to team lead.", "user", "Did my manager suggest a new role?"),
    (
        "A good gift for a five-year-old could be a wooden train set.",
        "assistant",
        "What present idea did you give for the young child?",
    ),
]

HELDOUT = Path(__file__).with_name("memory_heldout.json")


def heldout() -> dict[str, list[tuple[str, str]]]:
    """The held-out set's ``tune`` and ``test`` halves as ``(fact, question)`` pairs.

    Written apart from ``PARAPHRASE`` (ADR 0060); each topic's pairs, ordered by
    the SHA-256 of the fact, alternate between the halves. Constants and choices
    are made on ``tune``; ``test`` is only measured.
    """
    halves: dict[str, list[tuple[str, str]]] = {"tune": [], "test": []}
    for pair in json.loads(HELDOUT.read_text(encoding="utf-8"))["pairs"]:
        halves[pair["half"]].append((pair["fact"], pair["question"]))
    return halves


PEOPLE = "Anna Marta Tom Ines Paulo Sofia Omar Yuki Karl Nina Luis Eva Ravi Mia Jan".split()
PLACES = "Lisbon Berlin Madrid Rome Oslo Dublin Prague Warsaw Kyoto Lima Boston Seoul".split()
SHOPS = "Zalando|IKEA|Amazon|Decathlon|Thomann|MediaMarkt|Etsy|Lidl|Apple|Fnac".split("|")
TOPICS = (
    "the quarterly report|the kitchen renovation|a new bicycle|the tax return|"
    "a birthday present for a colleague|the garden fence|a podcast about history|"
    "the company picnic|a photography course|the broken dishwasher|a board meeting|"
    "the neighbour's wedding|a jazz concert|the team offsite|a hiking trail"
).split("|")


def distractors(n: int, seed: int = 3) -> list[str]:
    """Everyday facts about other people and chores; none answers a set's question."""
    rng = random.Random(seed)
    templates = (
        "{p} from accounting asked about {t} on {d}.",
        "The user promised {p} to look into {t} before {d}.",
        "{p} recommended {t}; the user was not convinced.",
        "A reminder came in about {t}, due {d}.",
        "The user read an article on {t} while waiting in {c}.",
        "{p} is organising {t} in {c} next month.",
        "The user and {p} argued about {t} over lunch.",
        "Receipt for {t} is filed under {c} in the drawer.",
    )
    days = ("Monday", "Tuesday", "Wednesday", "Friday", "the 20th", "the end of June")
    out: dict[str, None] = {}  # distinct, in order
    while len(out) < n:
        text = rng.choice(templates).format(
            p=rng.choice(PEOPLE), t=rng.choice(TOPICS), d=rng.choice(days), c=rng.choice(PLACES)
        )
        out.setdefault(text, None)
    return list(out)


def lexical_set(n: int = 40, seed: int = 5) -> tuple[list[tuple[str, str]], list[str]]:
    """``(fact, question)`` pairs sharing names and numbers, and look-alike distractors."""
    rng = random.Random(seed)
    relations = "sister brother cousin friend colleague neighbour aunt uncle".split()
    pairs: list[tuple[str, str]] = []
    used: set[tuple[str, str]] = set()
    while len(pairs) < n:
        rel, name = rng.choice(relations), rng.choice(PEOPLE)
        if (rel, name) in used:
            continue
        used.add((rel, name))
        if len(pairs) % 3 == 2:
            number, shop = rng.randint(100000, 999999), rng.choice(SHOPS)
            pairs.append(
                (
                    f"The parcel with tracking number {number} comes from {shop}.",
                    f"Which shop sent parcel {number}?",
                )
            )
        elif len(pairs) % 3 == 1:
            city = rng.choice(PLACES)
            pairs.append(
                (f"The user's {rel} {name} lives in {city}.", f"Where does my {rel} {name} live?")
            )
        else:
            code = rng.randint(1000, 9999)
            pairs.append(
                (f"The locker code of {name}'s {rel} is {code}.", f"Whose locker code is {code}?")
            )
    look_alikes = [
        f"The parcel with tracking number {rng.randint(100000, 999999)} comes from "
        f"{rng.choice(SHOPS)}."
        for _ in range(80)
    ]
    while len(look_alikes) < 200:
        i, rel, name = len(look_alikes), rng.choice(relations), rng.choice(PEOPLE)
        if (rel, name) in used:
            continue
        look_alikes.append(
            rng.choice(
                (
                    f"The user's {rel} {name} visited {rng.choice(PLACES)} in spring (note {i}).",
                    f"{name} lost a locker key at the gym (note {i}).",
                    f"The user's {rel} likes {rng.choice(TOPICS)} (note {i}).",
                )
            )
        )
    return pairs, look_alikes


CONTENT = re.compile(r"[^\W_]+")
STOP = set(
    "a an the is are was were my i me do does did what which who whom where when why how "
    "of in on at to for with by from am be can if get let".split()
)


def shared_words(fact: str, question: str) -> set[str]:
    """Content words (or 4-letter stems) the question shares with its fact."""

    def stems(text: str) -> set[str]:
        words = {w for w in CONTENT.findall(text.casefold()) if w not in STOP and len(w) > 1}
        return words | {w[:4] for w in words if len(w) >= 5}

    fact_words = {w for w in CONTENT.findall(fact.casefold()) if w not in STOP}
    return stems(question) & (stems(fact) | fact_words) - {"user"}
