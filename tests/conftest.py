"""Shared fixtures: extension directories on disk, settings files, kernels."""

from __future__ import annotations

import logging
import os
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from support.bus_helpers import make_journal  # noqa: F401  (fixture: a bus test on both journals)
from support.ext_files import LIFECYCLE, ext_code, grant_all  # noqa: F401  (imported from here too)
from support.pg_helpers import postgres_dsn, storage_backend  # noqa: F401  (fixtures: PostgreSQL)

os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")

PROJECT_ROOT = Path(__file__).resolve().parent.parent
if str(PROJECT_ROOT) not in sys.path:
    sys.path.insert(0, str(PROJECT_ROOT))

MakeExtension = Callable[..., Path]

# The test-local default of where an extension runs. Hearth's own default is
# `process` for extensions that are not bundled (ADR 0086): every fixture
# extension would start a plugin host, and the suite would be many times slower.
# Fixture extensions are granted as the user would grant them (``grant_all``),
# so they run in the kernel; a test of isolation says `isolation: process` in the
# manifest, and a test of the default itself sets `isolation.default` (or leaves
# this out of a settings file of its own).
TEST_ISOLATION = {"default": "inprocess"}


@pytest.fixture(autouse=True)
def _root_logger_as_it_was() -> Any:
    """A test that sets logging up in-process (``configure_logging``) leaves the root
    logger writing to that test's captured stderr, closed once it ends: a later
    test's server thread logging into it prints "--- Logging error ---"."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for handler in list(root.handlers):
        if handler not in handlers:
            root.removeHandler(handler)
            handler.close()
    for handler in handlers:
        if handler not in root.handlers:
            root.addHandler(handler)
    root.setLevel(level)


@pytest.fixture
def ext_root(tmp_path: Path) -> Path:
    root = tmp_path / "extensions"
    root.mkdir()
    return root


@pytest.fixture
def make_ext(ext_root: Path) -> MakeExtension:
    """Write ``<ext_root>/<ext_id>/manifest.yaml`` (+ ``main.py``) and return the dir.

    ``manifest`` is a dict merged over a minimal valid manifest, or a raw
    string written verbatim; ``code`` is the source of ``main.py``.
    """

    def make(
        ext_id: str,
        code: str | None = None,
        manifest: dict[str, Any] | str | None = None,
        files: dict[str, str] | None = None,
    ) -> Path:
        ext_dir = ext_root / ext_id
        ext_dir.mkdir(parents=True, exist_ok=True)
        if isinstance(manifest, str):
            text = manifest
        else:
            data: dict[str, Any] = {"id": ext_id, "name": ext_id.title()}
            if code is not None:
                data["entrypoint"] = "main:Ext"
            data.update(manifest or {})
            text = yaml.safe_dump(data, sort_keys=False)
        (ext_dir / "manifest.yaml").write_text(text)
        if code is not None:
            (ext_dir / "main.py").write_text(textwrap.dedent(code))
        for name, content in (files or {}).items():
            path = ext_dir / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(content))
        grant_all(ext_root, ext_root.parent / "data", only=ext_id)
        return ext_dir

    return make


@pytest.fixture
def settings_file(tmp_path: Path, ext_root: Path) -> Callable[..., Path]:
    """Write a settings file pointing at ``ext_root`` and a tmp data dir."""

    def write(**sections: Any) -> Path:
        data: dict[str, Any] = {
            "paths": {"extensions": str(ext_root), "data": str(tmp_path / "data")},
            "models": {"default": None},
            "logging": {"level": "INFO"},
            # fixture extensions declare no side effects, so under `safe` every tool
            # call of theirs would ask; consent tests ask for `safe` themselves
            "policy": {"profile": "full_auto"},
            # a plugin host starting while other test workers load the machine can take
            # longer than the 10 s default; tests of the timeout itself set their own
            "loader": {"lifecycle_timeout_s": 60},
            # TEST_ISOLATION: fixture extensions run in the test's kernel unless their
            # manifest says otherwise, as they were written to (ADR 0086)
            "isolation": dict(TEST_ISOLATION),
        }
        for key, value in sections.items():
            if isinstance(value, dict) and isinstance(data.get(key), dict):
                data[key] = {**data[key], **value}
            else:
                data[key] = value
        path = tmp_path / "settings.yaml"
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        return path

    return write


@pytest.fixture
def postprocessors(ext_root: Path) -> None:
    """The bundled ``postprocessors`` extension (``#json``, ``#decision``, ``#extract``,
    ``#classify``) among the test's extensions, as in a fresh install (ADR 0063)."""
    from support.bundled import copy_bundled  # it imports this module

    copy_bundled(ext_root, "postprocessors")


@pytest.fixture
def memory_settings(
    ext_root: Path, make_ext: MakeExtension, settings_file: Callable[..., Path]
) -> Callable[..., Path]:
    """Writes settings with the bundled memory extension (``config`` as its
    section) and the capture channel as the default channel."""
    from support.bundled import copy_bundled  # both import this module
    from support.harness import CAPTURE_CHANNEL, CAPTURE_MANIFEST

    copy_bundled(ext_root, "memory")
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)

    def write(**config: Any) -> Path:
        return settings_file(channels={"default": "capture"}, extensions={"memory": config})

    return write
