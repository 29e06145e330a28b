"""The shared reader of a channel's list settings and its error shape."""

from __future__ import annotations

import pytest

from core.extensions.sdk import ChannelConfigError, listed


class DemoError(ChannelConfigError):
    prefix = "extensions.demo_channel"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (["a", "b"], ["a", "b"]),
        ('["a", "b"]', ["a", "b"]),
        ("a,b c", ["a", "b", "c"]),
        (" a , ,b ", ["a", "b"]),
        ("", []),
        ("[]", []),
    ],
)
def test_a_list_comes_from_yaml_json_or_separated_text(value: object, expected: list[str]) -> None:
    assert listed("ids", value, "demo ids", DemoError) == expected


def test_one_number_is_a_list_of_one_only_when_asked() -> None:
    assert listed("ids", 7, "demo ids", DemoError, one_number=True) == [7]
    with pytest.raises(
        DemoError, match=r"^extensions\.demo_channel\.ids: must be a list of demo ids, got 7$"
    ):
        listed("ids", 7, "demo ids", DemoError)
    with pytest.raises(DemoError, match="must be a list of demo ids, got True"):
        listed("ids", True, "demo ids", DemoError, one_number=True)


def test_bad_json_names_the_key_and_the_text() -> None:
    with pytest.raises(DemoError) as caught:
        listed("allowed", '["a",', "demo ids", DemoError)
    assert (
        str(caught.value) == "extensions.demo_channel.allowed: '[\"a\",' is not a list of demo ids"
    )
    assert caught.value.key == "allowed"
    assert isinstance(caught.value, ValueError)


def test_a_mapping_is_not_a_list() -> None:
    with pytest.raises(DemoError, match=r"must be a list of demo ids, got \{'a': 1\}"):
        listed("ids", {"a": 1}, "demo ids", DemoError)
