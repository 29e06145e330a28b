"""A provider (or a proxy before it) that echoes the API key in its error: the
key reaches neither the user's reply nor anything the kernel stores (the
conversation in ``sessions.db``, the journal in ``events.db``, or the same
tables on PostgreSQL), and the apology names the model and provider that
failed and the status."""

from __future__ import annotations

from pathlib import Path

import asyncpg
import pytest

from support.fake_openai import Failure, FakeOpenAIServer, models_section
from support.harness import CAPTURE_CHANNEL, CAPTURE_MANIFEST, running_kernel, wait_for

KEY = "sk-hearth-test-7f3a9c1e5b2d4f60"


def files_holding(root: Path, secret: str) -> list[str]:
    """Every file under ``root`` (databases with their -wal/-journal) whose bytes hold
    ``secret``."""
    return sorted(
        str(path.relative_to(root))
        for path in root.rglob("*")
        if path.is_file() and secret.encode() in path.read_bytes()
    )


async def rows_holding(dsn: str, secret: str) -> list[str]:
    """Every table of the PostgreSQL database at ``dsn`` with a row whose text holds
    ``secret``."""
    conn = await asyncpg.connect(dsn)
    try:
        tables = await conn.fetch(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
        )
        found = []
        for (table,) in tables:
            query = f'SELECT count(*) FROM "{table}" t WHERE t::text LIKE $1'
            if await conn.fetchval(query, f"%{secret}%"):
                found.append(table)
        return found
    finally:
        await conn.close()


async def turn_against(path: Path) -> str:
    """One message through the capture channel; the reply it got."""
    async with running_kernel(path) as kernel:
        capture = kernel.loader.instance("capture")
        await capture.say("hello")
        replies = await wait_for(lambda: [m for k, _, m in capture._log() if k == "reply"])
    return str(replies[0])


@pytest.mark.parametrize(
    ("status", "said"),
    [
        (401, f"Incorrect API key provided: {KEY}. You can find your API key at ..."),
        (400, f"bad request from key {KEY}: unknown parameter temprature"),
    ],
)
async def test_a_provider_echoing_the_key_never_puts_it_in_a_reply_or_storage(
    make_ext, settings_file, tmp_path, status, said
):
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    with FakeOpenAIServer() as server:
        server.script(Failure(status, said))
        path = settings_file(
            channels={"default": "capture"},
            models=models_section(server.base_url, max_retries=0, api_key=KEY),
        )
        reply = await turn_against(path)
    assert KEY not in reply, reply
    assert f"the model fake-model at provider local refused the request ({status})" in reply
    assert "***" in reply  # the provider's words are kept, the key masked
    assert files_holding(tmp_path / "data", KEY) == []


async def test_on_postgresql_the_stored_turn_holds_no_key(make_ext, settings_file, postgres_dsn):
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    with FakeOpenAIServer() as server:
        server.script(Failure(401, f"Incorrect API key provided: {KEY}."))
        path = settings_file(
            channels={"default": "capture"},
            models=models_section(server.base_url, max_retries=0, api_key=KEY),
            storage={"backend": "postgres", "postgres_dsn": postgres_dsn},
        )
        reply = await turn_against(path)
    assert KEY not in reply and "refused the request (401)" in reply
    assert await rows_holding(postgres_dsn, KEY) == []
