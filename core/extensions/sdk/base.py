"""``BaseExtension``: the lifecycle of the contract with nothing to do.

Most extensions only need ``initialize`` to keep the context; inheriting
this class spares them four empty methods and gives one clear error when
the context is used before ``initialize`` ran. Override what you need
(call ``await super().initialize(context)`` to keep ``self.context``).
"""

from __future__ import annotations

from core.extensions.contract import ExtensionContext
from core.runtime.errors import HearthError

__all__ = ["BaseExtension", "NotInitializedError"]


class NotInitializedError(HearthError, RuntimeError):
    """``context`` was read before the kernel called ``initialize``."""

    def __init__(self, extension: str) -> None:
        super().__init__(f"{extension}: the context is used before initialize() ran")


class BaseExtension:
    """Implements the contract's ``Extension`` protocol with no-op lifecycle methods."""

    __context: ExtensionContext | None = None  # mangled: subclasses keep their own names

    @property
    def context(self) -> ExtensionContext:
        """The context ``initialize`` received."""
        if self.__context is None:
            raise NotInitializedError(type(self).__name__)
        return self.__context

    async def initialize(self, context: ExtensionContext) -> None:
        """Keep the context; subclasses that override it call ``super().initialize``."""
        self.__context = context

    async def start(self) -> None:
        """Nothing to start."""

    async def stop(self) -> None:
        """Nothing to stop."""

    async def destroy(self) -> None:
        """Nothing to release."""

    def health_check(self) -> bool:
        """Healthy unless a subclass says otherwise."""
        return True
