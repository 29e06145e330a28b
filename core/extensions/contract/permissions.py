"""How a context method declares the manifest permission it needs (issue 42).

``@needs(PERMISSION, "what it does")`` on an ``ExtensionContext`` method says,
beside the method, which ``permissions.<key>`` a call needs and the words of
the refusal; the ``Permission`` says once what the user is asked in a grant
and what the docs say it guards. Built from these declarations: the
manifest's boolean permission fields (``loading.manifest``), the grant
request's wording and digest (``access.grants``), the kernel context's checks
(``KernelContext``) and docs/isolation.md's table (``loading.docs_tables``).
A new permission is one ``Permission(...)`` beside the first method that
needs it. Light: the plugin host imports it before the extension.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

__all__ = ["Need", "Permission", "declared_needs", "declared_permissions", "needs"]

F = TypeVar("F", bound=Callable[..., Any])
_ORDER = itertools.count()
_NEEDS = "__hearth_needs__"  # set on a declared method: its (permission, refusal) pairs


@dataclass(frozen=True, slots=True)
class Permission:
    """One boolean manifest permission (``permissions.<key>``).

    ``grant``: the phrase the grant request shows when it is asked (``None``: never
    shown, as for ``notify``, which every extension has unless it says no);
    ``guards``: the docs' words for what it protects beyond its methods' names.
    """

    key: str
    grant: str | None
    guards: str = ""
    default: bool = False
    order: int = field(default_factory=lambda: next(_ORDER), compare=False)


@dataclass(frozen=True, slots=True)
class Need:
    """A method's need: the permission, and the refusal's words (``not permitted to …``)."""

    permission: Permission
    what: str


def needs(permission: Permission, what: str) -> Callable[[F], F]:
    """Declare that the decorated context method needs ``permission``; stacked, the
    upper declaration is checked first."""

    def declare(method: F) -> F:
        setattr(method, _NEEDS, (Need(permission, what), *getattr(method, _NEEDS, ())))
        return method

    return declare


def declared_needs(protocol: type) -> dict[str, tuple[Need, ...]]:
    """The methods of ``protocol`` (its own) that declare needs, by name."""
    return {
        name: getattr(member, _NEEDS)
        for name, member in vars(protocol).items()
        if callable(member) and hasattr(member, _NEEDS)
    }


def declared_permissions(protocol: type) -> tuple[Permission, ...]:
    """Every permission ``protocol``'s methods declare, in the order they were written."""
    found = {
        need.permission.key: need.permission
        for ns in declared_needs(protocol).values()
        for need in ns
    }
    return tuple(sorted(found.values(), key=lambda p: p.order))
