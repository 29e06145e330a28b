"""The example extension in docs/postprocessors.md works as the page says.

The manifest and code are taken from the page itself, so the example a
plugin author copies is the one tested, through a running kernel."""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from agents.testing import ScriptedModel, assistant_message
from test_postprocess_turn import say

from conftest import PROJECT_ROOT, grant_all
from support.harness import CAPTURE_CHANNEL, CAPTURE_MANIFEST, running_kernel

DOC = PROJECT_ROOT / "docs" / "postprocessors.md"
ANSWER = "Hearth 0.9 is out. Notes at https://example.com/notes and https://example.com/faq."


def write_example(ext_root: Path) -> None:
    """``<ext_root>/digest/`` from the two code blocks under "A complete example"."""
    section = DOC.read_text(encoding="utf-8").split("## A complete example", 1)[1]
    manifest = re.search(r"```yaml\n(.*?)```", section, re.S)
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert manifest and code, "docs/postprocessors.md lost its example"
    ext_dir = ext_root / "digest"
    ext_dir.mkdir()
    (ext_dir / "manifest.yaml").write_text(yaml.safe_dump(yaml.safe_load(manifest.group(1))))
    (ext_dir / "main.py").write_text(code.group(1))


async def test_the_example_post_processors(make_ext, settings_file, ext_root):
    write_example(ext_root)
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    path = settings_file(channels={"default": "capture"})
    grant_all(ext_root, path.parent / "data")
    model = ScriptedModel([[assistant_message(ANSWER)] for _ in range(3)])
    async with running_kernel(path, model=model) as kernel:
        assert await say(kernel, "/ext activate tldr") == ["Activated #tldr (tldr)."]
        assert await say(kernel, "/ext activate links") == ["Activated #links (links)."]
        assert await say(kernel, "What's new? #tldr #links", count=2) == [
            ANSWER,
            "#tldr\nHearth 0.9 is out.",
        ]
        links = (await say(kernel, "/last links"))[0]
        assert await say(kernel, "And now? #tldr:3", count=2) == [ANSWER, "#tldr\nHearth 0.9 is"]
        assert (await say(kernel, "Once more #tldr:few", count=2))[1] == (
            "▸ #tldr failed: give a number of words, e.g. #tldr:20"
        )
    assert '"https://example.com/notes",\n    "https://example.com/faq"' in links
    assert '"tldr": "Hearth 0.9 is out."' in links
    assert [i["content"] for i in model.calls[0].input if i.get("role") == "user"] == [
        "What's new?"
    ]
