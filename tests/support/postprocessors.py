"""The bundled post-processors (``sandbox/extensions/postprocessors``) for tests that
build ``PostProcessing`` without a kernel: wired records as the loader would give them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from conftest import PROJECT_ROOT
from core.extensions.loading.capabilities import Capability
from core.extensions.loading.records import ExtensionRecord
from sandbox.extensions.postprocessors.main import PostProcessorsExtension

BUNDLED_ID = "postprocessors"


class Provider:
    """An extension offering ``processors`` through ``get_post_processors``."""

    def __init__(self, processors: Sequence[Any]) -> None:
        self._processors = list(processors)

    def get_post_processors(self) -> list[Any]:
        return list(self._processors)


def provider_record(ext_id: str, instance: Any) -> ExtensionRecord:
    """A live record of ``instance`` as a ``PostProcessorProvider``."""
    return ExtensionRecord(
        ext_id,
        PROJECT_ROOT / "sandbox" / "extensions" / ext_id,
        instance=instance,
        capabilities=[Capability.POST_PROCESSOR_PROVIDER],
    )


def wired_processors(*extra: Any) -> Callable[[], list[ExtensionRecord]]:
    """The bundled extension, then a ``fixture`` extension offering ``extra``."""
    records = [provider_record(BUNDLED_ID, PostProcessorsExtension())]
    if extra:
        records.append(provider_record("fixture", Provider(extra)))
    return lambda: records
