"""Errors of the agent layer; each carries the data it names as attributes."""

from __future__ import annotations

from core.runtime.errors import HearthError


class AgentLayerError(HearthError):
    """Base of every error raised by ``core.agents``."""


class ModelNotConfiguredError(AgentLayerError):
    """No usable model for an agent; ``str(exc)`` is one line telling the user what to set."""

    def __init__(self, agent_id: str | None, reason: str) -> None:
        super().__init__(reason)
        self.agent_id = agent_id
        self.reason = reason


class PromptTemplateError(AgentLayerError):
    """A jinja2 prompt could not be read or rendered; the message names the file."""

    def __init__(self, path: str, detail: str) -> None:
        super().__init__(f"{path}: {detail}")
        self.path = path
        self.detail = detail


class TokenBudgetExceededError(AgentLayerError):
    """An agent run used more tokens than ``limits.max_tokens_per_invocation``."""

    def __init__(self, limit: int, used: int) -> None:
        super().__init__(f"max_tokens_per_invocation={limit} exceeded ({used} tokens used)")
        self.limit = limit
        self.used = used


class McpServerUnavailableError(AgentLayerError):
    """A tool of an MCP server was called while the server is not connected.

    Raised at once (a turn never waits on a dead server); ``state`` is what
    ``/status`` shows for it, e.g. ``reconnecting (attempt 2, next in 4.0s)``.
    """

    def __init__(self, server: str, state: str) -> None:
        super().__init__(
            f"MCP server {server!r} is {state}; its tools are unavailable for now, "
            "try again later or do without them"
        )
        self.server = server
        self.state = state


class ModelFailedError(AgentLayerError):
    """A model failed one step of a turn with nothing left to take over: it
    ``refused`` the request (a 4xx that is the request's or the settings' fault),
    or failed (unreachable, too slow, 429, 5xx) and no other model of its chain
    could answer. ``str(exc)`` is what the user reads — which model, at which
    provider, the status — with the provider's own words (``detail``) masked of
    every configured secret, since a provider or a proxy may echo the API key."""

    def __init__(
        self, provider: str, model: str, status: int | None, detail: str, *, refused: bool
    ) -> None:
        what = "refused the request" if refused else "failed"
        code = f" ({status})" if status is not None else ""
        super().__init__(f"the model {model} at provider {provider} {what}{code}: {detail}")
        self.provider = provider
        self.model = model
        self.status = status
        self.detail = detail
        self.refused = refused
