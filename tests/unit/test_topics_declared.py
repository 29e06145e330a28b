"""Every topic the kernel names is declared once, in ``core/events/topics.py``.

A topic typed as a raw string in a second place is how a rename misses one
publisher or one guard (``topic_rules`` refusing ``hook.*`` to extensions, a
replay reading ``replay.turn``); this scans the kernel for such literals.
"""

from __future__ import annotations

import ast

from conftest import PROJECT_ROOT
from core.events.topics import PostProcessTopics, RecordTopics, SystemTopics

ROOTS = ("user.", "system.", "turn.", "replay.", "hook.", "postprocess.")


def _declared() -> set[str]:
    return {
        value
        for holder in (SystemTopics, RecordTopics, PostProcessTopics)
        for name, value in vars(holder).items()
        if name.isupper() and isinstance(value, str)
    }


def test_topics_are_named_only_in_the_topics_module():
    home = PROJECT_ROOT / "core" / "events" / "topics.py"
    raw = [
        f"{path.relative_to(PROJECT_ROOT)}:{node.lineno}: {node.value!r}"
        for path in sorted((PROJECT_ROOT / "core").rglob("*.py"))
        if path != home
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value.startswith(ROOTS)
        and not any(ch.isspace() for ch in node.value)
    ]
    assert not raw, "use the constants of core/events/topics.py:\n" + "\n".join(raw)


def test_the_kernel_only_prefixes_cover_every_record_topic():
    """What only the kernel may publish is derived from the same constants."""
    from core.extensions.access.topic_rules import KERNEL_ONLY

    for topic in _declared():
        if topic.startswith((RecordTopics.HOOK_PREFIX, RecordTopics.REPLAY_PREFIX)):
            assert any(topic.startswith(prefix) for prefix in KERNEL_ONLY), topic
        if topic.startswith(PostProcessTopics.PREFIX):
            assert PostProcessTopics.PREFIX in KERNEL_ONLY
