"""Splitting and Markdown rendering of the Telegram channel (pure functions)."""

from __future__ import annotations

import importlib.util
from types import ModuleType

import pytest

from core.extensions.sdk import split_text, utf16_len
from support.fake_telegram import _check_text, visible_text
from support.telegram_support import SOURCE_DIR


def _module(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"tg_{name}", SOURCE_DIR / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


markup = _module("markup")
TELEGRAM = 4096  # the channel's limit (telegram_channel/sender.py), in UTF-16 units


def test_short_text_is_one_piece_and_blank_text_none():
    assert split_text("hello\n", TELEGRAM) == ["hello"]
    assert split_text("  \n ", TELEGRAM) == []


def test_split_prefers_paragraphs_then_lines_then_words():
    para = "a" * 3000
    assert split_text(f"{para}\n\n{para}", TELEGRAM) == [para, para]
    lines = "\n".join(["b" * 99] * 60)  # no paragraph break anywhere
    pieces = split_text(lines, TELEGRAM)
    assert all(len(p) <= 4096 for p in pieces)
    assert all(set(line) == {"b"} and len(line) == 99 for p in pieces for line in p.split("\n"))
    words = " ".join(["word"] * 2000)
    assert all(not p.endswith("wor") for p in split_text(words, TELEGRAM))


def test_unbroken_text_is_cut_hard_and_emoji_count_double():
    assert [len(p) for p in split_text("x" * 9000, TELEGRAM)] == [4092, 4092, 816]
    emoji = split_text("😀" * 3000, TELEGRAM)
    assert all(utf16_len(p) <= 4096 for p in emoji)
    assert "".join(emoji) == "😀" * 3000


def test_code_fence_is_closed_and_reopened_across_a_split():
    code = "```python\n" + "x = 1\n" * 1000 + "```\nafter"
    pieces = split_text(code, TELEGRAM)
    assert len(pieces) == 2
    assert pieces[0].startswith("```python\n") and pieces[0].endswith("\n```")
    assert pieces[1].startswith("```python\n") and pieces[1].endswith("```\nafter")
    for piece in pieces:
        assert _check_text(markup.to_html(piece), "HTML", False) is None


@pytest.mark.parametrize(
    ("source", "html"),
    [
        ("**bold** and *it* and _it_", "<b>bold</b> and <i>it</i> and <i>it</i>"),
        ("snake_case_name and 2*3*4", "snake_case_name and 2*3*4"),
        ("# Title\n- one\n* two", "<b>Title</b>\n• one\n• two"),
        ("`a<b>` & ~~old~~", "<code>a&lt;b&gt;</code> &amp; <s>old</s>"),
        ("[docs](https://x.org/?a=1&b=2)", '<a href="https://x.org/?a=1&amp;b=2">docs</a>'),
        ("<script>x</script>", "&lt;script&gt;x&lt;/script&gt;"),
        (
            "```py\nif a < b: **x**\n```",
            '<pre><code class="language-py">if a &lt; b: **x**</code></pre>',
        ),
    ],
)
def test_markdown_becomes_telegram_html(source, html):
    assert markup.to_html(source) == html
    assert _check_text(html, "HTML", False) is None


def test_rendering_keeps_the_visible_text_within_the_source_length():
    source = "**Note** — see `cfg.yaml` & [the docs](https://example.org) <now>\n" * 40
    html = markup.to_html(source)
    assert len(visible_text(html, "HTML")) <= len(source)


def test_a_post_processor_follow_up_is_a_code_block_under_its_name():
    """The follow-up message under an answer (docs/postprocessors.md): `#json` stays a
    plain line (not a heading), the JSON becomes a code block, escaped."""
    followup = '#json\n```json\n{\n  "answer": "a <b> & c"\n}\n```\n\n▸ #classify: "alert"'
    html = markup.to_html(followup)
    assert html == (
        '#json\n<pre><code class="language-json">{\n  "answer": "a &lt;b&gt; &amp; c"\n}'
        '</code></pre>\n\n▸ #classify: "alert"'
    )
    assert _check_text(html, "HTML", False) is None  # Telegram would accept it
