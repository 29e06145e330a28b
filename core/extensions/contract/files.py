"""Files that tools hand back with their result (issue 45, ADR 0096).

A tool (core, in-process extension) returns its text as always and attaches
files or images to the turn with ``attach(Artifact(...))``: the kernel keeps
them per person under the data dir (``files:`` settings: size limit,
retention), records them with the turn and sends them after the reply. A
channel that can send files implements ``FileChannel``; any other channel
gets one line per file naming where it is kept.

Attaching costs nothing on a turn that attaches nothing: the kernel opens a
collection (a plain list in a context variable) around the turn's run and
looks at it once after.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = ["COLLECTING", "Artifact", "FileChannel", "KeptFile", "attach"]


@dataclass(frozen=True, slots=True)
class Artifact:
    """A file a tool returns: its ``name`` (shown to the person), ``mime_type``,
    and its content as ``data`` or as ``path`` (a file the extension wrote in its
    data dir; the kernel copies it). Exactly one of ``data`` and ``path``."""

    name: str
    mime_type: str
    data: bytes | None = None
    path: str | None = None
    caption: str = ""

    def __post_init__(self) -> None:
        if (self.data is None) == (self.path is None):
            raise ValueError(f"artifact {self.name!r}: give exactly one of data and path")
        if not self.name or "/" in self.name or "\\" in self.name or self.name in (".", ".."):
            raise ValueError(f"artifact name {self.name!r}: a plain file name is needed")


@dataclass(frozen=True, slots=True)
class KeptFile:
    """A file the kernel keeps for one person: ``file_id`` addresses it (the HTTP
    API serves it to that person alone), ``path`` is where it is on disk."""

    file_id: str
    name: str
    mime_type: str
    size: int
    path: str
    caption: str = ""
    person: str = ""  # "" for the owner

    @property
    def is_image(self) -> bool:
        """Whether channels show it as a picture (``sendPhoto``, an ``<img>``)."""
        return self.mime_type.startswith("image/")


@runtime_checkable
class FileChannel(Protocol):
    """A channel that sends files itself (Telegram's ``sendPhoto`` /
    ``sendDocument``, the HTTP API's links); others get a line with the path."""

    async def send_file(self, user_id: str, file: KeptFile) -> None: ...


# the turn being run collects its artifacts here (the kernel sets a fresh list per
# turn; outside a turn it is ``None`` and ``attach`` refuses)
COLLECTING: ContextVar[list[Artifact] | None] = ContextVar("hearth_artifacts", default=None)


def attach(artifact: Artifact) -> None:
    """Attach ``artifact`` to the turn being run: it is sent after the reply.
    Raises ``RuntimeError`` outside a turn (a scheduled job has no one to send to)."""
    collected = COLLECTING.get()
    if collected is None:
        raise RuntimeError(f"artifact {artifact.name!r}: no turn is collecting files here")
    collected.append(artifact)
