"""Signature checks at load (pluggy's ``_verify_hook`` idea): a protocol method
with the wrong parameters is a load error naming the extension, the method and
the expected signature — not a failure on the first turn."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import ext_code
from core.config import load_settings
from core.extensions.contract import ChannelProvider, ContextProvider
from core.extensions.loading.capabilities import detect_capabilities
from core.extensions.loading.signatures import SignatureError, check_signatures
from core.extensions.sdk import BaseExtension
from core.kernel.runner import Kernel

GOOD = ext_code("def get_commands(self):\n    return []")

SEND = "`async def send_to_user(self, user_id: str, message: str) -> None`"
CONTEXT = "`async def get_context(self, prompt: str, turn_context: TurnContext) -> str | None`"
INVOKE = (
    "`async def invoke(self, task: str, context: AgentInvocationContext | None = None)"
    " -> AgentResponse`"
)

WRONG = {
    "send_to_user": (
        """
        async def send_to_user(self, message):
            pass
        async def send_message(self, message):
            pass
        """,
        f"Ext.send_to_user(self, message) does not match ChannelProvider.send_to_user: "
        f"expected {SEND}",
    ),
    "get_context": (
        """
        context_priority = 10
        async def get_context(self, prompt):
            return None
        """,
        f"Ext.get_context(self, prompt) does not match ContextProvider.get_context: "
        f"expected {CONTEXT}",
    ),
    "invoke": (
        """
        def get_agent_descriptor(self):
            from core.extensions.contract import AgentDescriptor
            return AgentDescriptor("helper", "Helps.")
        async def invoke(self, task):
            pass
        """,
        f"Ext.invoke(self, task) does not match AgentProvider.invoke: expected {INVOKE}",
    ),
    "health_check": (
        """
        def health_check(self, verbose):
            return True
        """,
        "Ext.health_check(self, verbose) does not match Extension.health_check: "
        "expected `def health_check(self) -> bool`",
    ),
}


async def load(settings_path: Path) -> Kernel:
    kernel = Kernel(load_settings(settings_path))
    await kernel.load()
    return kernel


@pytest.mark.parametrize("method", sorted(WRONG))
async def test_a_wrong_signature_is_a_load_error_naming_extension_method_and_contract(
    make_ext, settings_file, method
):
    body, expected = WRONG[method]
    make_ext("wrong", ext_code(body))
    make_ext("good", GOOD)
    kernel = await load(settings_file())
    try:
        wrong = kernel.loader.records["wrong"]
        assert wrong.status.value == "error"
        assert wrong.error == f"protocol check failed: SignatureError: {expected}"
        assert wrong.report()["id"] == "wrong"
        assert kernel.loader.records["good"].status.value == "active"
    finally:
        await kernel.loader.shutdown()


async def test_an_isolated_extension_gets_the_same_load_error(make_ext, settings_file):
    body, expected = WRONG["send_to_user"]
    make_ext("wrong", ext_code(body), {"isolation": "process"})
    kernel = await load(settings_file(isolation={"call_timeout_s": 20}))
    try:
        wrong = kernel.loader.records["wrong"]
        assert wrong.status.value == "error"
        assert expected in (wrong.error or "")
    finally:
        await kernel.loader.shutdown()


class RenamedParameters(BaseExtension):
    async def send_to_user(self, uid, text):  # the kernel passes them positionally
        pass

    async def send_message(self, text, *, urgent=False):
        pass


class Flexible(BaseExtension):
    context_priority = 5

    async def get_context(self, *args, **kwargs):
        return None


class ExtraRequired(BaseExtension):
    context_priority = 5

    async def get_context(self, prompt, turn_context, style):
        return None


def test_compatible_signatures_load():
    assert detect_capabilities(RenamedParameters()) == ["ChannelProvider"]
    assert detect_capabilities(Flexible()) == ["ContextProvider"]
    check_signatures(RenamedParameters(), ChannelProvider)


def test_an_extra_required_parameter_is_refused():
    with pytest.raises(SignatureError) as caught:
        check_signatures(ExtraRequired(), ContextProvider)
    assert caught.value.method == "get_context" and caught.value.owner == "ExtraRequired"
    assert str(caught.value).startswith(
        "ExtraRequired.get_context(self, prompt, turn_context, style) does not match"
    )
