"""postprocessors: the post-processors every conversation has (seed 000, ADR 0063).

``#json``, ``#decision``, ``#extract`` and ``#classify`` after a message turn
the answer into structured output (docs/postprocessors.md). They are plain
``PostProcessor`` objects of the public contract, offered through
``get_post_processors`` like any extension's; the kernel activates them for
every conversation because ``postprocess.activate_by_default`` names them.
"""

from __future__ import annotations

from core.extensions.contract import PostProcessor
from core.extensions.sdk import BaseExtension

from .classify import Classify
from .decision import Decision
from .extract import Extract
from .json_output import JsonOutput

__all__ = ["PostProcessorsExtension", "processors"]


def processors() -> list[PostProcessor]:
    """One instance of each, in the order ``/ext`` lists them."""
    return [JsonOutput(), Decision(), Extract(), Classify()]


class PostProcessorsExtension(BaseExtension):
    """Offers the four deterministic post-processors; no state, no service."""

    def __init__(self) -> None:
        self._processors = processors()

    def get_post_processors(self) -> list[PostProcessor]:
        return list(self._processors)
