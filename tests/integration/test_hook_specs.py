"""Each hook point is declared once (issue 27, ADR 0041): every structure built from
the spec table covers every row, so a row added to ``HOOK_SPECS`` is picked up by
the capability detection, the settings, the isolated proxy, the wire codec and
the grant check without editing them."""

from __future__ import annotations

import inspect
import json
from typing import Any, Protocol, get_args, runtime_checkable

import pytest
from pydantic import ValidationError

from core.config import CommandHook
from core.extensions.access.grants import CONVERSATIONS_WORDS, GrantRequest
from core.extensions.contract import (
    HOOK_SPECS,
    Annotated,
    CompactionPlan,
    GuardrailTrip,
    HookSpec,
    ModelRoute,
    ShortCircuit,
    ToolCall,
    ToolDecision,
    TurnContext,
    TurnOutcome,
)
from core.extensions.contract.hook_specs import ArgKind, ResultKind
from core.extensions.isolation.kernel.hook_mixins import HOOK_MIXINS, hook_mixin
from core.extensions.isolation.protocol.hook_wire import (
    HOOK_METHODS,
    RESULT_TYPES,
    decode_hook_result,
    encode_hook_result,
    hook_args_from_wire,
    hook_args_to_wire,
)
from core.extensions.isolation.protocol.messages import InvokeParams
from core.extensions.loading.capabilities import (
    HOOKS,
    PERMISSIONS,
    PROTOCOLS,
    Capability,
    CapabilityError,
    require_permissions,
)
from core.extensions.loading.manifest import Manifest
from core.kernel.hooks.command_hooks import EVENT_NAMES, TARGETS

SPECS = pytest.mark.parametrize("spec", HOOK_SPECS, ids=lambda s: s.method)

TURN = TurnContext(channel_id="cli_channel", user_id="u1", session_id="s1", turn_id="t1")
ARGS: dict[ArgKind, Any] = {
    "turn": TURN,
    "outcome": TurnOutcome("answered", "hi there", 12.5),
    "call": ToolCall("shell", {"cmd": "ls"}, "c1"),
    "messages": [{"role": "user", "content": "my bank PIN is 4321"}],
    "text": "hello",
    "attrs": {"href": "x"},
}
RESULTS: dict[ResultKind, Any] = {
    "text": "rewritten",
    "messages": [{"role": "user", "content": "rewritten"}],
    "short_circuit": ShortCircuit("answered here"),
    "tool_decision": ToolDecision.deny("not today"),
    "annotated": Annotated("new", {"k": 1}),
    "model_route": ModelRoute("small", "cheap"),
    "compaction_plan": CompactionPlan(summary="sum"),
    "guardrail_trip": GuardrailTrip("pin", "no PINs"),
}


def test_every_result_kind_has_a_wire_type_and_a_sample():
    assert set(get_args(ResultKind)) == set(RESULT_TYPES) == set(RESULTS)


@SPECS
def test_the_capability_detection_knows_each_spec(spec: HookSpec):
    capability = Capability(spec.capability)  # the public string names the protocol
    assert capability in HOOKS
    assert PROTOCOLS[spec.protocol] == (spec.method,)
    assert inspect.iscoroutinefunction(getattr(spec.protocol, spec.method))


@SPECS
def test_settings_accept_exactly_the_command_hook_points(spec: HookSpec):
    if spec.command_event is None:
        with pytest.raises(ValidationError, match="is not a hook point"):
            CommandHook(hook=spec.method, command="true")
        assert spec.method not in TARGETS
        return
    assert CommandHook(hook=spec.method, command="true").hook == spec.method
    assert EVENT_NAMES[spec.method] == spec.command_event
    capability, target = TARGETS[spec.method]
    assert capability == spec.capability and spec.method in vars(target)


def _fake_host(ext: Any) -> Any:
    """``remote`` of a proxy answered by ``ext`` through the host's side of the codec."""

    async def remote(method: str, params: Any, *, deadline: Any = None) -> Any:
        call = InvokeParams.from_wire(json.loads(json.dumps(params)))
        args = hook_args_from_wire(call.name, call.args)
        answer = encode_hook_result(call.name, await getattr(ext, call.name)(*args))
        return json.loads(json.dumps(answer))

    return remote


@SPECS
async def test_the_isolated_proxy_forwards_each_spec_over_the_wire(spec: HookSpec):
    seen: list[Any] = []
    answers = iter((*spec.results, None))

    class Ext:
        async def answer(self, *args: Any) -> Any:
            seen.append(list(args))
            kind = next(answers)
            return None if kind is None else RESULTS[kind]

    ext = Ext()
    setattr(ext, spec.method, ext.answer)
    proxy_class = HOOK_MIXINS[spec.capability]
    proxy = proxy_class()
    proxy.ext_id, proxy.described = "walled", {a: ["ui:*"] for a in spec.attributes}
    proxy.remote = _fake_host(ext)  # type: ignore[method-assign]
    assert isinstance(proxy, spec.protocol)
    assert inspect.signature(getattr(proxy_class, spec.method)) == inspect.signature(
        getattr(spec.protocol, spec.method)
    )
    for attribute in spec.attributes:
        assert tuple(getattr(proxy, attribute)) == ("ui:*",)
    args = [ARGS[kind] for kind in spec.args]
    for kind in (*spec.results, None):
        got = await getattr(proxy, spec.method)(*args)
        assert got == (None if kind is None else RESULTS[kind])
    assert seen == [args] * (len(spec.results) + 1)  # the host rebuilt the same arguments


@SPECS
def test_the_wire_codec_round_trips_each_spec_and_refuses_other_results(spec: HookSpec):
    assert HOOK_METHODS[spec.method] is spec
    args = [ARGS[kind] for kind in spec.args]
    sent = json.loads(json.dumps(hook_args_to_wire(spec.method, args)))
    assert hook_args_from_wire(spec.method, sent) == args
    for kind, value in RESULTS.items():
        if kind in spec.results:
            data = json.loads(json.dumps(encode_hook_result(spec.method, value)))
            assert decode_hook_result("walled", spec.method, data) == value
        elif not (kind == "text" and "annotated" in spec.results):
            with pytest.raises(TypeError):
                encode_hook_result(spec.method, value)


@SPECS
def test_each_spec_needs_its_permission_and_the_grant_request_names_it(spec: HookSpec):
    capability = Capability(spec.capability)
    assert PERMISSIONS[capability] == spec.permission == "conversations"
    asking = Manifest(id="walled", name="W", entrypoint="main:Ext")
    with pytest.raises(CapabilityError, match=f"permissions.conversations.*{spec.capability}"):
        require_permissions([capability], asking.permissions.resolved("walled", isolated=True), "m")
    declared = Manifest.model_validate(
        {**asking.model_dump(), "permissions": {"conversations": True}}
    )
    require_permissions([capability], declared.permissions.resolved("walled", isolated=True), "m")
    request = GrantRequest.from_manifest(declared, default_isolation="process", code="")
    assert CONVERSATIONS_WORDS in request.describe() and request.needs_grant


async def test_a_new_spec_gets_a_proxy_and_a_codec_from_its_row_alone(
    monkeypatch: pytest.MonkeyPatch,
):
    @runtime_checkable
    class ReplyDraftHook(Protocol):
        async def on_reply_draft(self, text: str, turn: TurnContext) -> str | None: ...

    spec = HookSpec(ReplyDraftHook, "on_reply_draft", ("text", "turn"), ("text",), "chain")
    mixin = hook_mixin(spec)
    calls: list[tuple[str, list[Any]]] = []

    class Proxy(mixin):  # type: ignore[misc, valid-type]
        ext_id, described = "walled", {}

        async def call_method(self, name: str, *args: Any, deadline: Any = None) -> Any:
            calls.append((name, list(args)))
            return {"type": "text", "text": "drafted"}

    proxy = Proxy()
    assert isinstance(proxy, ReplyDraftHook)
    assert str(inspect.signature(mixin.on_reply_draft)) == str(
        inspect.signature(ReplyDraftHook.on_reply_draft)
    )
    with pytest.raises(LookupError):  # the codec knows only the table's rows
        await proxy.on_reply_draft("hi", TURN)
    monkeypatch.setitem(HOOK_METHODS, spec.method, spec)  # the row, as the table derives it
    assert await proxy.on_reply_draft("hi", TURN) == "drafted"
    [(name, sent)] = calls
    assert name == "on_reply_draft" and hook_args_from_wire(name, sent) == ["hi", TURN]
