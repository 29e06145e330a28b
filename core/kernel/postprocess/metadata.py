"""What a post-processor says about itself (seed 000 "Extension Manifest"), read once.

A processor may carry plain attributes beside the four it must have:
``display_name``, ``category``, ``version``, ``keywords``, ``display_order``,
``parameters`` (``supported``, ``description``, ``examples``,
``allowed_values``) and ``output_schema`` (a JSON Schema). ``ProcessorInfo``
reads and checks them when the catalog is built: a malformed one leaves the
processor out with an error naming the attribute and the value at fault, like
any other flaw. The kernel enforces two of them on every run: a param outside
``allowed_values`` (or any param when ``supported`` is false) is refused
before the processor sees it, and content that does not match
``output_schema`` makes the result a failed one that names the mismatch.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from core.extensions.contract import CATEGORIES
from core.runtime.errors import HearthError

__all__ = ["MetadataError", "ProcessorInfo"]

DEFAULT_ORDER = 100


class MetadataError(HearthError, ValueError):
    """A processor's metadata attribute is malformed; the message names it."""


@dataclass(frozen=True, slots=True)
class ProcessorInfo:
    """A processor's metadata with the defaults filled in."""

    name: str
    description: str = ""
    display_name: str = ""
    category: str = "Custom"
    version: str | None = None
    keywords: tuple[str, ...] = ()
    display_order: int = DEFAULT_ORDER
    takes_param: bool = True
    param_description: str = ""
    examples: tuple[str, ...] = ()
    allowed_values: tuple[str, ...] | None = None
    output_schema: dict[str, Any] | None = None
    _validator: Any = field(default=None, repr=False, compare=False)

    @classmethod
    def of(cls, processor: Any) -> ProcessorInfo:
        """Read ``processor``'s attributes; ``MetadataError`` names a malformed one."""
        name = str(processor.name)
        text = getattr(processor, "description", None) or inspect.getdoc(type(processor)) or ""
        lines = str(text).strip().splitlines()
        category = getattr(processor, "category", None) or "Custom"
        if category not in CATEGORIES:
            raise MetadataError(f"{name}: category {category!r} is not one of {CATEGORIES}")
        order = getattr(processor, "display_order", DEFAULT_ORDER)
        if not isinstance(order, int) or isinstance(order, bool):
            raise MetadataError(f"{name}: display_order {order!r} is not a whole number")
        params = getattr(processor, "parameters", None) or {}
        if not isinstance(params, dict):
            raise MetadataError(f"{name}: parameters {params!r} is not a mapping")
        allowed = params.get("allowed_values")
        schema = getattr(processor, "output_schema", None)
        validator = None
        if schema is not None:
            if not isinstance(schema, dict):
                raise MetadataError(f"{name}: output_schema {schema!r} is not a JSON Schema")
            try:
                Draft202012Validator.check_schema(schema)
            except SchemaError as exc:
                raise MetadataError(f"{name}: output_schema is invalid: {exc.message}") from None
            validator = Draft202012Validator(schema)
        version = getattr(processor, "version", None)
        return cls(
            name=name,
            description=lines[0] if lines else "",
            display_name=str(getattr(processor, "display_name", None) or name),
            category=str(category),
            version=None if version is None else str(version),
            keywords=_strings(name, "keywords", getattr(processor, "keywords", ()) or ()),
            display_order=order,
            takes_param=bool(params.get("supported", True)),
            param_description=str(params.get("description") or ""),
            examples=_strings(name, "parameters.examples", params.get("examples") or ()),
            allowed_values=None
            if allowed is None
            else _strings(name, "parameters.allowed_values", allowed),
            output_schema=schema,
            _validator=validator,
        )

    def refuses(self, param: str | None) -> str | None:
        """Why ``param`` is not one this processor declares, or ``None``."""
        if param is None:
            return None
        if not self.takes_param:
            return f"#{self.name} takes no param (got {param!r})"
        if self.allowed_values is not None and param not in self.allowed_values:
            return f"{param!r} is not one of {', '.join(self.allowed_values)}"
        return None

    def mismatch(self, content: Any) -> str | None:
        """How ``content`` breaks ``output_schema`` (the first error), or ``None``."""
        if self._validator is None:
            return None
        error = next(iter(self._validator.iter_errors(content)), None)
        if error is None:
            return None
        where = "/".join(str(p) for p in error.absolute_path) or "content"
        return f"output does not match the declared schema at {where}: {error.message}"

    def to_json(self) -> dict[str, Any]:
        """As JSON (the fields a listing shows)."""
        return {
            "name": self.name,
            "display_name": self.display_name,
            "description": self.description,
            "category": self.category,
            "version": self.version,
            "keywords": list(self.keywords),
            "display_order": self.display_order,
            "parameters": {
                "supported": self.takes_param,
                "description": self.param_description,
                "examples": list(self.examples),
                "allowed_values": None
                if self.allowed_values is None
                else list(self.allowed_values),
            },
            "output_schema": self.output_schema,
        }


def _strings(name: str, attribute: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise MetadataError(f"{name}: {attribute} {value!r} is not a list of strings")
    if not all(isinstance(item, str) for item in value):
        raise MetadataError(f"{name}: {attribute} {list(value)!r} holds a value that is no string")
    return tuple(value)
