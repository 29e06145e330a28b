"""Jinja2 prompt files: compiled once, rendered strictly (an unknown variable is an error)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2

from core.agents.errors import PromptTemplateError

__all__ = ["PromptTemplate"]

_ENV = jinja2.Environment(
    undefined=jinja2.StrictUndefined,
    autoescape=False,
    keep_trailing_newline=False,
    trim_blocks=True,
    lstrip_blocks=True,
)


class PromptTemplate:
    """One prompt file; errors name the file (``PromptTemplateError``)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            source = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise PromptTemplateError(str(path), f"cannot read: {exc.strerror or exc}") from exc
        try:
            self._template = _ENV.from_string(source)
        except jinja2.TemplateSyntaxError as exc:
            raise PromptTemplateError(str(path), f"line {exc.lineno}: {exc.message}") from exc

    def render(self, **variables: Any) -> str:
        try:
            return self._template.render(**variables).strip()
        except jinja2.TemplateError as exc:
            raise PromptTemplateError(str(self.path), f"cannot render: {exc}") from exc
