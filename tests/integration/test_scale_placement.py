"""What each kernel role runs, and the names that bind replies to a node (ADR 0036)."""

from __future__ import annotations

from pathlib import Path

from core.config import Settings
from core.extensions.loading.capabilities import Capability
from core.extensions.loading.manifest import Manifest
from core.extensions.loading.records import ExtensionRecord, ExtensionStatus
from core.kernel.scale.placement import Placement, apply_role, node_name, placement_of


def _records(tmp_path: Path) -> dict[str, ExtensionRecord]:
    """telegram (a channel that depends on kv), kv, scheduler, and one that failed to load."""
    specs = {
        "telegram": ([Capability.CHANNEL], ["kv"]),
        "kv": ([Capability.TOOL], []),
        "scheduler": ([Capability.TOOL, Capability.SERVICE], []),
    }
    records = {}
    for ext_id, (capabilities, depends_on) in specs.items():
        record = ExtensionRecord(ext_id, tmp_path / ext_id)
        record.manifest = Manifest(
            id=ext_id, name=ext_id, entrypoint="main:Ext", depends_on=depends_on
        )
        record.instance, record.capabilities = object(), capabilities
        records[ext_id] = record
    return records


def _running(records: dict[str, ExtensionRecord]) -> set[str]:
    return {i for i, r in records.items() if r.status is ExtensionStatus.ACTIVE}


def test_each_role_runs_its_share_of_the_extensions(tmp_path):
    node = "host-1"
    for role, expected in (
        ("all", {"telegram", "kv", "scheduler"}),
        ("workers", {"kv", "scheduler"}),  # channels run in a channels process
        ("channels", {"telegram", "kv"}),  # and what they depend on
    ):
        records = _records(tmp_path)
        apply_role(Placement(role, node), records.values())
        assert _running(records) == expected, role
    records = _records(tmp_path)
    apply_role(Placement("workers", node), records.values())
    assert records["telegram"].error == "kernel.role workers: runs in another process"


def test_replies_are_bound_to_the_node_that_owns_the_channel(tmp_path):
    settings = Settings(paths={"data": str(tmp_path / "a")})
    alone = placement_of(settings.storage, settings.kernel, settings.data_dir)
    assert alone == Placement("all", None) and not alone.shared
    assert alone.reply_subscription == ("system.reply", "kernel.reply")
    assert alone.reply_topic("elsewhere") == "system.reply"

    settings = Settings(
        paths={"data": str(tmp_path / "a")},
        storage={"backend": "postgres", "postgres_dsn": "postgresql://h/db"},
        kernel={"role": "channels"},
    )
    shared = placement_of(settings.storage, settings.kernel, settings.data_dir)
    node = shared.node
    assert node == node_name(tmp_path / "a") != node_name(tmp_path / "b")  # stable, distinct
    assert shared.reply_subscription == (f"system.reply.{node}", f"kernel.reply.{node}")
    assert shared.reply_topic("other-node") == "system.reply.other-node"
    assert shared.notify_subscriber == f"kernel.notify.{node}"
    assert shared.runs_channels and not shared.runs_workers


def _worker_scale(tmp_path: Path, bus, name: str = "worker", role: str = "all"):
    """The ``Scale`` of a node sharing PostgreSQL (not opened: nothing here needs the pool)."""
    import asyncio

    from core.kernel.scale.scale_out import ScaleOut

    settings = Settings(
        paths={"data": str(tmp_path / name)},
        storage={"backend": "postgres", "postgres_dsn": "postgresql://h/db"},
        kernel={"role": role},
    )
    locks: dict[str, asyncio.Lock] = {}
    return ScaleOut(settings, bus, lambda key: locks.setdefault(key, asyncio.Lock()))


def test_one_process_forwards_nothing_and_runs_every_handler(tmp_path):
    """SQLite: the null object; no node, the single reply topic, no waiting, no forwarding."""
    from core.kernel.phases import scale_of
    from core.kernel.scale.seam import LocalScale

    scale = scale_of(Settings(paths={"data": str(tmp_path / "a")}), None, lambda key: None)
    assert isinstance(scale, LocalScale)
    assert scale.placement.node is None and scale.roster is None
    assert scale.reply_subscription == ("system.reply", "kernel.reply", 8)
    assert not scale.answered_elsewhere("another-node")
    assert not scale.sent_elsewhere("telegram")


async def test_a_worker_hands_replies_to_the_process_that_runs_the_channel(tmp_path):
    from core.events import EventBus, SQLiteJournal
    from core.kernel.conversations.ledger import StoredReply
    from core.kernel.turns.outbox import ReplyOutbox
    from support.harness import wait_for

    bus = EventBus(SQLiteJournal(tmp_path / "events.db"))  # stands for the shared journal
    seen: list[tuple[str, dict]] = []

    async def record(event):
        seen.append((event.topic, event.payload))

    bus.subscribe("system.*", record, "test.all")
    sent: list[tuple[str, str]] = []

    class Local:
        async def send_to_user(self, user_id, text):
            sent.append((user_id, text))

    scale = _worker_scale(tmp_path, bus)
    outbox = ReplyOutbox(bus, {"cli": Local()}.get, send_timeout_s=5, scale=scale)
    await bus.start()
    try:
        # the message came through another node's telegram channel: journaled for it
        await outbox.deliver(7, StoredReply("7@1", "telegram", "42", "hi"), origin="front-1")
        # a reply naming no node (a resumed turn) for a channel another process runs
        await outbox.deliver(8, StoredReply("8@1", "telegram", "42", "later"))
        # this node's own channel: sent at once
        own = scale.placement.node
        await outbox.deliver(9, StoredReply("9@1", "cli", "u1", "here"), origin=own)
        await wait_for(lambda: len(seen) >= 2)
    finally:
        await bus.stop()
    assert sent == [("u1", "here")]
    assert seen == [
        (
            "system.reply.front-1",
            {
                "message_id": 7,
                "channel_id": "telegram",
                "user_id": "42",
                "text": "hi",
                "stream": True,  # the channel's node ends the message's stream with it
            },
        ),
        ("system.user.notify", {"text": "later", "channel_id": "telegram", "user_id": "42"}),
    ]


async def test_a_channels_node_ends_the_messages_stream_with_a_reply_another_node_sent(tmp_path):
    """Issue 41: the CLI waits for its reply through the message's stream. A reply a
    worker forwarded reaches a streaming channel as a stream (started, ended with the
    text, as from a turn here that streamed nothing); a plain channel gets it whole."""
    from core.events import EventBus, SQLiteJournal
    from core.kernel.conversations.ledger import StoredReply
    from core.kernel.turns.outbox import ReplyOutbox
    from support.harness import wait_for

    bus = EventBus(SQLiteJournal(tmp_path / "events.db"))  # stands for the shared journal
    calls: list[tuple[str, ...]] = []

    class Cli:
        async def send_to_user(self, user_id, message):
            calls.append(("cli.send_to_user", user_id, message))

        async def send_message(self, message):
            calls.append(("cli.send_message", message))

        async def on_stream_start(self, user_id):
            calls.append(("cli.on_stream_start", user_id))

        async def on_stream_chunk(self, user_id, chunk):
            calls.append(("cli.on_stream_chunk", user_id, chunk))

        async def on_stream_status(self, user_id, status):
            calls.append(("cli.on_stream_status", user_id, status))

        async def on_stream_end(self, user_id, full_text):
            calls.append(("cli.on_stream_end", user_id, full_text))

    class Plain:
        async def send_to_user(self, user_id, message):
            calls.append(("plain.send_to_user", user_id, message))

        async def send_message(self, message):
            calls.append(("plain.send_message", message))

    front = _worker_scale(tmp_path, bus, "front", "channels")
    channels = {"cli_channel": Cli(), "plain": Plain()}
    ReplyOutbox(bus, channels.get, send_timeout_s=5, scale=front).subscribe()
    worker = ReplyOutbox(bus, {}.get, send_timeout_s=5, scale=_worker_scale(tmp_path, bus))
    node = front.placement.node
    await bus.start()
    try:
        await worker.deliver(1, StoredReply("1@1", "cli_channel", "me", "one", "#tag"), origin=node)
        await wait_for(lambda: len(calls) >= 3)
        await worker.deliver(2, StoredReply("2@1", "plain", "you", "two"), origin=node)
        await wait_for(lambda: len(calls) >= 4)
    finally:
        await bus.stop()
    assert calls == [
        ("cli.on_stream_start", "me"),
        ("cli.on_stream_end", "me", "one"),
        ("cli.send_to_user", "me", "#tag"),  # a follow-up comes after, as from a local turn
        ("plain.send_to_user", "you", "two"),
    ]
