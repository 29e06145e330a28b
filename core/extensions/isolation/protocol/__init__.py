"""What crosses the process boundary, known to both sides: framing, the RPC
methods and their typed payloads, correlation, the context calls and hook
calls derived from the contract, and the boundary's errors.

The door imports its parts plainly: both sides of the boundary load every one
of them anyway and none is heavy (ADR 0081). Each name is declared once, as
``Name as Name``.
"""

from __future__ import annotations

from core.extensions.isolation.protocol.artifacts import (
    ARTIFACTS as ARTIFACTS,
    artifacts_from_wire as artifacts_from_wire,
    artifacts_to_wire as artifacts_to_wire,
)
from core.extensions.isolation.protocol.context_calls import (
    CONTEXT_CALLS as CONTEXT_CALLS,
    CONTEXT_CALLS_BY_NAME as CONTEXT_CALLS_BY_NAME,
    HOST_SERVED as HOST_SERVED,
    RESHAPED as RESHAPED,
    ContextCall as ContextCall,
    derive_calls as derive_calls,
)
from core.extensions.isolation.protocol.errors import (
    CallTimeoutError as CallTimeoutError,
    ConfinementError as ConfinementError,
    HookResultError as HookResultError,
    HostUnavailableError as HostUnavailableError,
    IsolationError as IsolationError,
    PeerClosedError as PeerClosedError,
    QuotaExceededError as QuotaExceededError,
    RemoteError as RemoteError,
)
from core.extensions.isolation.protocol.framing import (
    MAX_MESSAGE_BYTES as MAX_MESSAGE_BYTES,
    ProtocolError as ProtocolError,
    check_frame as check_frame,
    event_from_wire as event_from_wire,
    event_to_wire as event_to_wire,
    invocation_from_wire as invocation_from_wire,
    invocation_to_wire as invocation_to_wire,
    read_message as read_message,
    request_from_wire as request_from_wire,
    response_from_wire as response_from_wire,
    turn_from_wire as turn_from_wire,
    turn_to_wire as turn_to_wire,
)
from core.extensions.isolation.protocol.hook_wire import (
    HOOK_METHODS as HOOK_METHODS,
    RESULT_TYPES as RESULT_TYPES,
    decode_hook_result as decode_hook_result,
    encode_hook_result as encode_hook_result,
    hook_args_from_wire as hook_args_from_wire,
    hook_args_to_wire as hook_args_to_wire,
)
from core.extensions.isolation.protocol.messages import (
    HOST_REQUESTS as HOST_REQUESTS,
    KERNEL_NOTIFICATIONS as KERNEL_NOTIFICATIONS,
    CallToolParams as CallToolParams,
    CommandParams as CommandParams,
    Described as Described,
    Empty as Empty,
    EventParams as EventParams,
    FrameError as FrameError,
    HostMethod as HostMethod,
    InvokeParams as InvokeParams,
    LifecycleParams as LifecycleParams,
    LoadParams as LoadParams,
    LogParams as LogParams,
    Notice as Notice,
    PingResult as PingResult,
    StateValue as StateValue,
    StreamKind as StreamKind,
    StreamParams as StreamParams,
    SubscribeParams as SubscribeParams,
    Wire as Wire,
    decode as decode,
)
from core.extensions.isolation.protocol.ratelimit import LogLimiter as LogLimiter
from core.extensions.isolation.protocol.rpc import RpcPeer as RpcPeer
from core.extensions.isolation.protocol.wire import plain as plain
