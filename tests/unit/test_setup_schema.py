"""An extension's setup as the kernel walks it (``run_setup``, ADR 0053): later
questions may depend on earlier answers, a refused answer is asked again, config
answers are handed to be kept only when the setup ends well, and a schema that
never stops growing is cut off."""

from __future__ import annotations

from core.extensions.loading.setup_schema import ANSWER_ATTEMPTS, SetupField, run_setup


class Script:
    """Answers questions from a list, recording the prompts it was shown."""

    def __init__(self, *answers: str | None) -> None:
        self.answers = list(answers)
        self.prompts: list[str] = []

    async def ask_field(self, field: SetupField) -> str | None:
        self.prompts.append(field.prompt)
        return self.answers.pop(0)


class Pets:
    """Asks for a count, then one name per pet; refuses a count that is no number."""

    def __init__(self) -> None:
        self.count: int | None = None
        self.names: list[str] = []

    def get_setup_schema(self) -> list[dict[str, object]]:
        fields: list[dict[str, object]] = [{"name": "count", "prompt": "How many pets"}]
        if self.count is not None:
            fields += [{"name": f"pet_{i}", "prompt": f"Name {i}"} for i in range(self.count)]
            fields.append({"name": "food", "prompt": "Food", "default": "kibble"})
        return fields

    async def apply_config(self, name: str, value: str) -> None:
        if name == "count":
            if not value.isdigit():
                raise ValueError(f"{value!r} is not a number")
            self.count = int(value)
        elif name.startswith("pet_"):
            self.names.append(value)

    async def on_setup_complete(self) -> tuple[bool, str]:
        return bool(self.names), f"{len(self.names)} pets"


async def test_questions_follow_the_answers_and_a_refused_one_comes_again() -> None:
    pets, kept = Pets(), []
    asker = Script("two", "2", "Rex", "Tom", None)

    async def keep(values: dict[str, str]) -> None:
        kept.append(dict(values))

    ok, message = await run_setup("pets", pets, asker, None, keep, frozenset({"food", "count"}))
    assert (ok, message) == (True, "pets: 2 pets")
    assert asker.prompts == [
        "How many pets",
        "'two' is not a number — How many pets",
        "Name 0",
        "Name 1",
        "Food",
    ]
    assert pets.names == ["Rex", "Tom"]
    assert kept == [{"count": "2", "food": "kibble"}]  # config keys only, the default included


async def test_an_answer_refused_every_time_stops_the_setup_and_keeps_nothing() -> None:
    kept: list[object] = []

    async def keep(values: dict[str, str]) -> None:
        kept.append(values)

    asker = Script(*["many"] * ANSWER_ATTEMPTS)
    ok, message = await run_setup("pets", Pets(), asker, None, keep, frozenset({"count"}))
    assert not ok and message == "pets: count: 'many' is not a number"
    assert kept == []


async def test_a_failed_setup_keeps_no_config() -> None:
    kept: list[object] = []

    async def keep(values: dict[str, str]) -> None:
        kept.append(values)

    ok, _ = await run_setup("pets", Pets(), Script("0", None), None, keep, frozenset({"food"}))
    assert not ok and kept == []


async def test_a_schema_that_never_stops_growing_is_cut_off() -> None:
    class Endless:
        def __init__(self) -> None:
            self.n = 0

        def get_setup_schema(self) -> list[dict[str, object]]:
            return [{"name": f"q{i}", "required": False} for i in range(self.n + 1)]

        async def apply_config(self, name: str, value: str) -> None:
            self.n += 1

        async def on_setup_complete(self) -> tuple[bool, str]:
            return True, "done"

    class Yes:
        async def ask_field(self, field: SetupField) -> str | None:
            return "y"

    ok, message = await run_setup("endless", Endless(), Yes())
    assert not ok and "asked more than 50 questions" in message
