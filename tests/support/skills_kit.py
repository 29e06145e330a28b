"""Skills written for the tests in the layout the public skills repositories use:
instructions only, with references, with a Python script."""

from __future__ import annotations

import textwrap
from pathlib import Path


def write_skill(
    root: Path,
    name: str,
    body: str = "Follow these steps.",
    *,
    front: str | None = None,
    files: dict[str, str] | None = None,
) -> Path:
    """``root/name/SKILL.md`` (front matter ``front`` or a valid one) plus ``files``."""
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    if front is None:
        front = f"name: {name}\ndescription: The {name} skill, for tests."
    (folder / "SKILL.md").write_text(f"---\n{front}\n---\n{textwrap.dedent(body)}")
    for relative, text in (files or {}).items():
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return folder


def public_layout(root: Path) -> Path:
    """Three skills as the public repositories lay them out; returns ``root``."""
    write_skill(
        root,
        "brand-voice",
        "# Brand voice\nWrite short sentences. Never use exclamation marks.\n",
        front="name: brand-voice\ndescription: Write in the house style.\nlicense: Apache-2.0",
    )
    write_skill(
        root,
        "pdf-forms",
        "# PDF forms\nRead references/fields.md for the field names.\n",
        front=(
            "name: pdf-forms\ndescription: Fill PDF forms.\n"
            "metadata:\n  author: tests\n  version: '1.0'"
        ),
        files={"references/fields.md": "Field names: first_name, last_name.\n"},
    )
    write_skill(
        root,
        "word-count",
        "# Word count\nRun scripts/count.py with the text as arguments.\n",
        front="name: word-count\ndescription: Count the words of a text.\ncompatibility: Python 3",
        files={
            "scripts/count.py": """
                import sys
                words = " ".join(sys.argv[1:]).split()
                print(f"{len(words)} words")
            """
        },
    )
    return root
