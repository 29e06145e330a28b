"""HTTP API channel: Hearth as an OpenAI-compatible model, and a web page (ADR 0024).

A ``ChannelProvider`` + ``StreamingChannelProvider`` + ``ServiceProvider``.
Each ``POST /v1/chat/completions`` journals the newest user message as a
``user.message`` from ``<conversation>#reply:<tag>``; the kernel runs the
turn in the conversation's history and answers the tagged address, which the
``ReplyBook`` hands back to the waiting request (whole, or as SSE deltas).
``Idempotency-Key`` derives the tag and the journal's key from the key, so a
retried POST is journaled once, run once and answered with the same reply.
Messages no request waits for are kept as notifications. Without a named
conversation the request's history and its caller say which one it
continues (``threads``, ADR 0056, 0075); a key sent again with another body
is refused (422); a retry without a key joins the turn it started
(``ReplyBook.running``); the turn's token usage comes with the reply
(``usage=``); questions a turn asks are answered by the client's next
request (``questions``, ADR 0057). ``/v1/responses`` runs the same path.

The server is bound in ``start()`` and answers 503 until the kernel is ready
(``run_background`` begins once it is) and again while stopping.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

from core.extensions.contract import (
    Event,
    ExtensionContext,
    KeptFile,
    PostProcessTopics,
    UserRequest,
    reply_address,
    split_reply_address,
)
from core.extensions.sdk import BaseExtension

from .app import build_app
from .auth import TOKEN_SECRET, TokenCheck
from .config import ApiConfig, host_port, parse_config
from .files import file_entry, file_line, files_route, keep_uploads
from .limits import LoginThrottle
from .mcp_route import McpEndpoint
from .notifications import Notifications
from .openai_shape import ApiError, Ask, key_reused, message_too_large
from .questions import Answer, OpenQuestions, waiting_text
from .replies import (
    PendingReply,
    ReplyBook,
    ReplyGoneError,
    idempotent_tag,
    is_idempotent,
    request_tag,
)
from .server import ApiServer
from .store import ApiStore
from .threads import Placement, after_reply, branch_text, digest, earlier, new_name, normalised
from .web import web_routes

STORE_FILE = "http_api.db"
# a post-processor token as the kernel reads one (docs/postprocessors.md)
POST_TOKEN = re.compile(
    r"(?:^|(?<=\s))#([A-Za-z][\w-]{0,31})(?::[\w-]+(?:\.[\w-]+)*)?(?=$|\s|[.,;!?)\]])",
    re.MULTILINE,
)


def tags_of(results: dict[str, Any]) -> list[dict[str, Any]]:
    """What a message's tag shows of each result: ``#name:param``, where it went, and
    whether it worked (the result itself is fetched when the tag is clicked)."""
    tags = []
    for name, result in results.items():
        got = result if isinstance(result, dict) else {}
        meta = got.get("metadata") if isinstance(got.get("metadata"), dict) else {}
        tags.append(
            {
                "name": name,
                "param": meta.get("param"),
                "output_target": got.get("output_target"),
                "success": bool(got.get("success")),
            }
        )
    return tags


class HttpApiSetupError(Exception):
    """The channel must not run as configured (no token)."""


class HttpApiChannel(BaseExtension):
    def __init__(self) -> None:
        self.config: ApiConfig | None = None
        self.tokens: TokenCheck | None = None
        self.logins = LoginThrottle()
        self.store: ApiStore | None = None
        self.notifications: Notifications | None = None
        self.server: ApiServer | None = None
        self.book = ReplyBook()
        self.questions = OpenQuestions()
        self.created = int(time.time())
        self._ready = False
        self._stopping = False
        self.mcp = McpEndpoint(self)  # /mcp (ADR 0059)

    # ------------------------------------------------------------ lifecycle

    async def initialize(self, context: ExtensionContext) -> None:
        await super().initialize(context)
        config = self.config = parse_config(context.get_config)
        token = context.get_secret(TOKEN_SECRET)
        if not token:  # a required secret: the loader skips the extension without it
            raise HttpApiSetupError(
                f"{TOKEN_SECRET} is not set: refusing to listen on {config.listen}"
            )
        context.subscribe_event(PostProcessTopics.RESULTS, self._on_post_results)
        self.store = ApiStore(context.data_dir / STORE_FILE)
        await self.store.open()
        self.tokens = TokenCheck(token, await self.store.revoked_sessions())
        await self.store.prune(config.notifications_keep)
        self.notifications = Notifications(self.store, config.notifications_keep, context.logger)
        web = web_routes(self, Path(__file__).parent / "web")
        app = build_app(self, [*web, self.mcp.route, files_route(self)])
        self.server = ApiServer(app, config, context.logger)

    async def start(self) -> None:
        """Listen now (a taken port fails here); requests get 503 until ready."""
        self._ready = self._stopping = False
        if self.notifications is not None:
            self.notifications.reopen()
        await self._server().start()

    async def run_background(self) -> None:
        """Runs once the kernel is ready: from now on requests are served."""
        server = self._server()
        if not server.running:
            await server.start()
        self._ready = True
        try:
            await server.wait()
        finally:
            self._ready = False
        if not self._stopping:
            raise RuntimeError("the HTTP server stopped by itself")

    async def stop(self) -> None:
        self._ready, self._stopping = False, True
        self.book.fail_all(ReplyGoneError("Hearth is stopping; the reply will not come here"))
        if self.notifications is not None:
            self.notifications.close()
        await self.mcp.close()
        if self.server is not None:
            await self.server.stop()

    async def destroy(self) -> None:
        if self.store is not None:
            await self.store.close()

    def health_check(self) -> bool:
        return self.server is not None and self.server.running

    # ------------------------------------------------------------ requests (ApiBackend)

    @property
    def ready(self) -> bool:
        return self._ready

    @property
    def in_flight(self) -> int:
        return self.book.in_flight

    @property
    def listening(self) -> str:
        """``HOST:PORT`` as bound (the port is known after ``start``)."""
        return host_port(self._config().host, self._server().port)

    @property
    def base_url(self) -> str:
        return f"http://{self.listening}"

    async def submit(self, ask: Ask) -> PendingReply:
        """Journal the newest message of ``ask`` (once per idempotency key; a retry of
        a request whose turn still runs joins it) and return what the request waits
        on; release it with ``release``. A typed answer to a question open in the
        conversation is passed on instead of being journaled (``questions``)."""
        key = ask.idempotency_key
        tag = idempotent_tag(ask.caller, ask.conversation or "", key) if key else request_tag()
        if key and await self._store().bind_key(tag, ask.body_hash) != ask.body_hash:
            raise key_reused(key)
        joined = self.book.join(tag) if key else self.book.running(ask.retry_key)
        if joined is not None:
            return joined  # a retry of a request still waiting: same reply
        place = await self._place(ask)
        if ask.extensions:
            place = Placement(
                place.conversation,
                await self._with_post_processors(place.conversation, place.text, ask.extensions),
            )
        if len(json.dumps(place.text).encode()) > self._config().max_message_bytes:
            raise message_too_large(self._config().max_message_bytes)
        pending = self.book.open(place.conversation, tag)
        pending.wants_stream = pending.wants_stream or ask.stream
        pending.turns = None if ask.conversation else normalised(ask.messages)
        pending.caller = ask.caller
        if key:
            known = self.book.remembered(tag) or await self._store().reply(tag)
            if known is not None:
                pending.finish(known)
                return pending
        else:
            self.book.started(pending, ask.retry_key)
        try:
            answers = self.questions.answers(place.conversation, ask.text)
            if self._on_page(place.conversation, ask.text) or (
                answers and place.conversation == self._config().web_conversation
            ):
                pending.on_page = True
                pending.chat_row = await self._store().add_chat(
                    place.conversation, "user", ask.text
                )
            if answers:
                await self._answer(answers, pending)
                return pending
            pending.expects_results = await self._asks_post_processors(
                place.conversation, place.text
            )
            kept = await keep_uploads(self.context, ask.uploads) if ask.uploads else []
            await self.context.on_user_message(
                place.text,
                reply_address(place.conversation, tag),
                idempotency_key=f"{self.context.extension_id}:{tag}" if key else None,
                files=kept,
            )
        except BaseException:
            self.book.drop(pending)
            raise
        return pending

    async def _place(self, ask: Ask) -> Placement:
        """The conversation ``ask`` goes to: the one it names, else the one its history
        continues, else a new one (``threads``, ADR 0056)."""
        if ask.conversation:
            return Placement(ask.conversation, ask.text)
        prefix = self._config().default_conversation
        before = earlier(normalised(ask.messages))
        if not before:
            return Placement(new_name(prefix), ask.text)
        known = await self._store().thread(digest(ask.caller, before))
        if known:
            return Placement(known, ask.text)
        branch = Placement(new_name(prefix), branch_text(before, ask.text))
        self.context.logger.info(
            "a request's %d earlier messages match %s: branched to %s",
            len(before),
            "no chat" if known is None else "two chats of callers alike",
            branch.conversation,
        )
        return branch

    async def _answer(self, answers: list[Answer], pending: PendingReply) -> None:
        """``yes`` / ``/approve ID`` … for questions open in the conversation: answered
        for the address each was asked at; the resumed turn's reply comes to ``pending``."""
        for answer in answers:
            asked = answer.question
            if asked.tag is not None:
                self.book.alias(asked.tag, pending)
            await self.context.answer_request(asked.request.id, answer.value, asked.asked_at)

    async def answered(self, pending: PendingReply, shown: str) -> None:
        """The client got ``shown``: remember the chat it now has (its next request
        continues this conversation) and, for the web page, the reply."""
        if pending.turns is not None:
            chat = after_reply(pending.caller, pending.turns, shown)
            await self._store().keep_thread(chat, pending.conversation)
        if pending.on_page:
            await self._store().add_chat(pending.conversation, "assistant", shown)

    def _on_page(self, conversation: str, text: str) -> bool:
        """Whether a message (and its reply) is part of the web page's chat; the
        page's own ``/reminders`` and ``/memories`` are not."""
        return conversation == self._config().web_conversation and not text.startswith("/")

    async def chat_history(self) -> list[dict[str, object]]:
        """The web page's conversation as it was shown, oldest first."""
        return await self._store().chat(self._config().web_conversation)

    def release(self, pending: PendingReply) -> None:
        self.book.release(pending)

    async def _asks_post_processors(self, conversation: str, text: str) -> bool:
        """Whether ``text`` names a post-processor the conversation has activated
        (``#json``, ``#decision:binary``): then its results come with the reply."""
        if "#" not in text:
            return False
        names = {name for name, _ in await self.context.list_post_processors(conversation)}
        asked = {m.group(1).lower() for m in POST_TOKEN.finditer(text)} & names
        rest = POST_TOKEN.sub(lambda m: "" if m.group(1).lower() in names else m.group(0), text)
        return bool(asked) and bool(rest.strip())  # tokens alone: nothing is processed

    async def _with_post_processors(
        self, conversation: str, text: str, asked: tuple[tuple[str, str | None], ...]
    ) -> str:
        """``text`` with a ``#name:param`` token for each of the request's ``extensions``
        the text does not name already (its own tokens win, as typed). A name the
        conversation has not activated is refused (400), naming those it has."""
        activated = [name for name, _ in await self.context.list_post_processors(conversation)]
        typed = {m.group(1).lower() for m in POST_TOKEN.finditer(text)}
        tokens = []
        for index, (name, param) in enumerate(asked):
            if name not in activated:
                raise ApiError(
                    400,
                    f"extensions[{index}].name: no post-processor #{name} is activated "
                    f"for this conversation; activated: {', '.join(activated) or 'none'} "
                    "(/ext activate NAME adds one)",
                    param=f"extensions[{index}].name",
                    code="unknown_post_processor",
                )
            if name not in typed:
                tokens.append(f"#{name}" if param is None else f"#{name}:{param}")
        return f"{text.rstrip()} {' '.join(tokens)}" if tokens else text

    async def _on_post_results(self, event: Event) -> None:
        """``postprocess.results`` of a turn of this channel: kept (``GET
        /v1/postprocess/{turn_id}``), then to the request it answers."""
        payload = event.payload
        if payload.get("channel_id") != self.context.extension_id:
            return
        results = payload.get("results")
        if not isinstance(results, dict):
            return
        conversation, tag = split_reply_address(str(payload.get("user_id")))
        turn_id = payload.get("turn_id")
        if isinstance(turn_id, str) and turn_id:
            body = {
                "object": "hearth.postprocess",
                "turn_id": turn_id,
                "conversation": conversation,
                "query": payload.get("query"),
                "results": results,
                "usage": payload.get("usage") or {},
            }
            await self._store().keep_post_results(turn_id, conversation, body)
            pending = self.book.find(tag)
            if pending is not None and pending.chat_row is not None:
                await self._store().tag_chat(pending.chat_row, turn_id, tags_of(results))
        self.book.results(tag, results, turn_id if isinstance(turn_id, str) else None)

    async def post_processors(self) -> dict[str, Any]:
        """The page's activations and the processors with metadata (``/web/postprocessors``)."""
        return await self.context.describe_post_processors(self._config().web_conversation)

    async def post_results(self, turn_id: str) -> dict[str, Any] | None:
        """The results kept for ``turn_id`` (``GET /v1/postprocess/{turn_id}``)."""
        return await self._store().post_results(turn_id)

    # ------------------------------------------------------------ the page (WebBackend)

    async def kernel_status(self) -> dict[str, Any]:
        return (await self.context.kernel_status()).to_json()

    async def end_session(self, session: str, expires_at: int) -> None:
        """Logging out: the session's cookie is refused from now on, also after a restart."""
        assert self.tokens is not None, "initialize() was not called"
        self.tokens.revoke(session)
        await self._store().revoke_session(session, expires_at)

    async def requeue(self, event_id: int) -> int:
        count = await self.context.requeue_dead_letter(event_id)
        self.context.logger.info("web page: requeued %d deliveries of event %d", count, event_id)
        return count

    # ------------------------------------------------------------ output

    async def send_to_user(
        self, user_id: str, message: str, usage: dict[str, int] | None = None
    ) -> None:
        await self._delivered(user_id, message, stream_end=False, usage=usage)

    async def send_file(self, user_id: str, file: KeptFile) -> None:
        """A tool's file (ADR 0096): with the reply the request waits for, else a
        notification naming its link."""
        conversation, tag = split_reply_address(user_id)
        pending = self.book.find(tag)
        if pending is not None and not pending.done:
            pending.files.append(file_entry(file))
        else:
            await self._notes().add(conversation, file_line(file))

    async def send_message(self, message: str) -> None:
        """A proactive message with no address: offered to every conversation."""
        await self._notes().add(None, message)

    async def on_stream_start(self, user_id: str) -> bool:
        """``False`` (no text as it comes; the reply still ends the stream) when no
        request waiting on the address reads SSE (issue 29, ADR 0065)."""
        return self.book.stream_started(split_reply_address(user_id)[1])

    async def on_stream_chunk(self, user_id: str, chunk: str) -> None:
        self.book.chunk(split_reply_address(user_id)[1], chunk)

    async def on_stream_status(self, user_id: str, status: str) -> None:
        return None  # OpenAI chunks have no place for "using a tool…"

    async def on_stream_end(
        self, user_id: str, full_text: str, usage: dict[str, int] | None = None
    ) -> None:
        if not full_text and usage is None:
            # the kernel ends the stream of a turn that paused for an approval
            # (outbox.end_stream): the question comes next (ask_user), then, once
            # answered, the reply through send_to_user
            self.book.stream_paused(split_reply_address(user_id)[1])
            return
        await self._delivered(user_id, full_text, stream_end=True, usage=usage)

    async def ask_user(self, user_id: str, request: UserRequest) -> None:
        """A question of the turn a request waits on: the request is answered with it
        (what waits, how to answer); a later request of the conversation answers."""
        question = self.questions.add(user_id, request)
        tag = question.tag
        if not self.book.question(tag, question.to_json()):
            conversation = question.conversation
            await self._notes().add(conversation, waiting_text([question.to_json()]))
            return
        pending = self.book.find(tag)
        if pending is not None and not pending.done:
            pending.finish(waiting_text(list(pending.questions.values())))

    async def close_request(self, user_id: str, request_id: str, outcome: str) -> None:
        self.questions.close(request_id)

    async def _delivered(
        self, user_id: str, text: str, *, stream_end: bool, usage: dict[str, int] | None = None
    ) -> None:
        """To the request waiting under the tag; else kept as a notification."""
        conversation, tag = split_reply_address(user_id)
        waiting = self.book.waiting(tag)
        taken = self.book.deliver(tag, text, stream_end=stream_end, usage=usage)
        if tag is not None and is_idempotent(tag) and (taken or not waiting):
            self.book.remember(tag, text)
            await self._store().keep_reply(tag, text)
        if not taken:
            await self._notes().add(conversation, text)

    # ------------------------------------------------------------ accessors

    def _config(self) -> ApiConfig:
        assert self.config is not None, "initialize() was not called"
        return self.config

    def _server(self) -> ApiServer:
        assert self.server is not None, "initialize() was not called"
        return self.server

    def _store(self) -> ApiStore:
        assert self.store is not None, "initialize() was not called"
        return self.store

    def _notes(self) -> Notifications:
        assert self.notifications is not None, "initialize() was not called"
        return self.notifications
