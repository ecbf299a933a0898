"""The simulated OpenAI-compatible endpoint as an ASGI app.

One request path for both modes: parse, admission, then a stream (or one answer) in the
configured engine's shape (role chunk, usage, finish, faults, timings, prefix cache; see
SimConfig and ENGINE_PROFILES). The mode (sim.modes) supplies only the timing
model: fixed mode takes its timings from the config, gpu mode emits tokens as the modelled
GPU engine (sim.gpu) does. GET /metrics writes the app's own prometheus_client
registry (sim.metrics).

Plain ASGI under uvicorn rather than Litestar: with hundreds of concurrent streams the event
path must cost one bytes concatenation and one `send` per token, with no router, response
class or middleware in between; eight routes dispatch on a dict.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import random
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from typing import Any, Final

from infercost.engines.catalog import OPENAI_FIELDS
from sim import answers, wire
from sim.config import MAX_MODEL_LEN, SimConfig, served_model_speeds
from sim.embeddings import decode_embeddings, input_tokens, latency_s, response_body
from sim.gpu import GpuEngine
from sim.lateness import Lateness
from sim.metrics import FamiliesCollector, SimMetrics, exposition, registry
from sim.modes import FixedMode, Generation, GpuMode, Inflight, Job, Mode
from sim.prefix_cache import PrefixCache

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
Handler = Callable[[Scope, Receive, Send, float], Awaitable[None]]

MAX_BODY_BYTES: Final = 32 * 1024 * 1024

_JSON_HEADERS: Final = ((b"content-type", b"application/json"),)
_SSE_HEADERS: Final = (
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache"),
)
_METRICS_HEADERS: Final = ((b"content-type", b"text/plain; version=0.0.4; charset=utf-8"),)
# What llama-server's (cpp-httplib's) responses say, although it closes after a stream.
_KEEP_ALIVE_HEADERS: Final = (
    (b"connection", b"keep-alive"),
    (b"keep-alive", b"timeout=5, max=100"),
)
#: Scope key the app sets on a response after which the server closes the connection
#: (read by sim.server's protocol).
CLOSE_AFTER_RESPONSE: Final = "sim.close_after_response"


class _ClientGoneError(Exception):
    """The client disconnected before its request body arrived."""


class _BodyTooLargeError(Exception):
    """The request body exceeds MAX_BODY_BYTES."""


async def _read_body(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise _ClientGoneError
        chunk: bytes = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise _BodyTooLargeError
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


async def _send_bytes(
    send: Send, status: int, body: bytes, headers: tuple[tuple[bytes, bytes], ...]
) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [*headers, (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body, "more_body": False})


def _multiline_crlf(send: Send) -> Send:
    """`send` with every body piece of a stream rewritten as multi-line CRLF events
    (SimConfig.sse_multiline_crlf)."""

    async def rewritten(message: Message) -> None:
        if message["type"] == "http.response.body" and message.get("body"):
            message = {**message, "body": wire.multiline_crlf(message["body"])}
        await send(message)

    return rewritten


async def _send_error(send: Send, status: int, message: str, error_type: str) -> None:
    await _send_bytes(send, status, wire.error_body(status, message, error_type), _JSON_HEADERS)


def _unused_key(taken: dict[str, list[float]], key: str) -> str:
    """`key`, or `key#2`, `key#3`, ... when a request was recorded under it already."""
    if key not in taken:
        return key
    n = 2
    while f"{key}#{n}" in taken:
        n += 1
    return f"{key}#{n}"


class SimApp:
    """ASGI app of the simulated endpoint; `metrics` exposes its live state in-process too."""

    def __init__(self, config: SimConfig) -> None:
        self.config = config
        self.metrics = SimMetrics()
        # Reproducible fault injection (--error-rate, --seed), not a security decision.
        self._rng = random.Random(config.seed)  # noqa: S311
        self._inflight: set[Inflight] = set()
        self._closing = False
        self._model_json = wire.encode(config.model)
        # served_models: more names beside config.model, each at its own speed (fixed mode).
        self._speeds = {
            name: (ttft_ms / 1000.0, itl_ms / 1000.0)
            for name, (ttft_ms, itl_ms) in served_model_speeds(config.served_models).items()
        }
        self._model_jsons = {name: wire.encode(name) for name in self._speeds}
        # Which answers of tools and response formats are cut short (sim.answers.Share).
        self._invalid_calls = answers.Share(config.tool_call_invalid_share)
        self._invalid_json = answers.Share(config.structured_invalid_share)
        self._tool_turn = 0
        llamacpp = config.engine == "llamacpp"
        self._formats = {
            True: wire.StreamFormat(
                chat=True, llamacpp=llamacpp, reasoning_field=config.reasoning_field
            ),
            False: wire.StreamFormat(chat=False, llamacpp=llamacpp),
        }
        self._sse_headers = _SSE_HEADERS + (_KEEP_ALIVE_HEADERS if llamacpp else ())
        self.prefix_cache = (
            PrefixCache(config.prefix_cache_tokens, config.prefix_cache_block)
            if config.prefix_cache
            else None
        )
        # Fixed mode: how late each write went out against its schedule (GET /stats).
        self.lateness = Lateness()
        # record_writes: each request's arrival and content writes, by `user` or else by the
        # first word of its prompt.
        self.writes: dict[str, list[float]] | None = {} if config.record_writes else None
        # record_writes: every generation request in arrival order, with its prompt's tokens
        # and those its prefix cache served (a replay's prompts share their first words).
        self.received: list[tuple[float, Job]] | None = [] if config.record_writes else None
        self.engine: GpuEngine | None = None
        self.mode: Mode
        if config.mode == "gpu":
            gpu = GpuMode(config, self._remember)
            self.mode, self.engine = gpu, gpu.engine
        else:
            self.mode = FixedMode(config, self.metrics, self.lateness, self._remember)
        # GET /metrics: this app's registry (not prometheus_client's global one).
        self.registry = registry(
            FamiliesCollector(config.metrics, config.model, self._synced_metrics),
            *self.mode.collectors(config),
        )
        created = int(time.time())
        self._models_body = wire.encode(
            {
                "object": "list",
                "data": [
                    {
                        "id": name,
                        "object": "model",
                        "created": created,
                        "owned_by": "infercost-sim",
                        "root": config.model,
                        "max_model_len": MAX_MODEL_LEN,
                    }
                    for name in (config.model, *self._speeds)
                ],
            }
        )
        self._routes: dict[str, dict[str, Handler]] = {
            "/v1/chat/completions": {"POST": self._chat},
            "/v1/completions": {"POST": self._completions},
            "/v1/models": {"GET": self._models},
            "/v1/embeddings": {"POST": self._embeddings},
            "/tokenize": {"POST": self._tokenize},
            "/metrics": {"GET": self._metrics},
            "/health": {"GET": self._health},
            "/stats": {"GET": self._stats},
            "/stats/reset": {"POST": self._stats_reset},
        }
        if config.tokenize == "sglang":  # SGLang serves both paths
            self._routes["/v1/tokenize"] = {"POST": self._tokenize}
        if config.tokenize == "none":
            del self._routes["/tokenize"]
        if config.metrics == "none":
            del self._routes["/metrics"]
        # strict_fields: the request fields taken (generation_config where it is honoured).
        self._accepted = OPENAI_FIELDS | (
            {"generation_config"} if config.generation_config else set()
        )

    def close(self) -> None:
        """End every in-flight generation now (streams stop, waiting ones get 503): called
        when the server shuts down, so it need not wait out long streams."""
        self._closing = True
        for inflight in self._inflight:
            inflight.stop()
        self.mode.stop()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """ASGI entry: the arrival time is taken first, before the body is read."""
        if scope["type"] == "http":
            arrival = asyncio.get_running_loop().time()
            self.mode.on_request()
            # Yield once, so that when a burst of requests is parsed in one loop iteration
            # every one of them takes its arrival time before any does its setup work.
            await asyncio.sleep(0)
            methods = self._routes.get(scope["path"])
            if methods is None:
                await _send_error(send, 404, f"no route for {scope['path']}", "not_found_error")
                return
            handler = methods.get(scope["method"])
            if handler is None:
                await _send_error(
                    send,
                    405,
                    f"{scope['method']} is not allowed on {scope['path']}",
                    "invalid_request_error",
                )
                return
            try:
                await handler(scope, receive, send, arrival)
            except _ClientGoneError:
                return
            except _BodyTooLargeError:
                await _send_error(
                    send,
                    413,
                    f"request body is larger than {MAX_BODY_BYTES} bytes",
                    "invalid_request_error",
                )
        elif scope["type"] == "lifespan":
            await self._lifespan(receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _health(self, scope: Scope, receive: Receive, send: Send, arrival: float) -> None:
        await _send_bytes(send, 200, b'{"status":"ok"}', _JSON_HEADERS)

    async def _stats(self, scope: Scope, receive: Receive, send: Send, arrival: float) -> None:
        """The simulator's own lateness against its schedule (fixed mode) since the last reset."""
        stats: dict[str, Any] = {
            "lateness": self.lateness.summary(),
            # Fixed mode: the most requests served at once since the last reset, so a test
            # can hold a client's cap on requests in flight against it.
            "running_peak": self.metrics.running_peak,
        }
        if self.writes is not None:
            stats["writes"] = self.writes
        if self.received is not None:
            stats["received"] = [
                {
                    "arrival": arrival,
                    "prompt_tokens": job.prompt_tokens,
                    "output_tokens": job.n,
                    "cached_tokens": job.cached,
                }
                for arrival, job in self.received
            ]
        await _send_bytes(send, 200, wire.encode(stats), _JSON_HEADERS)

    async def _stats_reset(
        self, scope: Scope, receive: Receive, send: Send, arrival: float
    ) -> None:
        self.lateness.reset()
        self.metrics.running_peak = 0
        if self.writes is not None:
            self.writes.clear()
        if self.received is not None:
            self.received.clear()
        await _send_bytes(send, 200, b'{"status":"ok"}', _JSON_HEADERS)

    async def _models(self, scope: Scope, receive: Receive, send: Send, arrival: float) -> None:
        await _send_bytes(send, 200, self._models_body, _JSON_HEADERS)

    async def _metrics(self, scope: Scope, receive: Receive, send: Send, arrival: float) -> None:
        await _send_bytes(send, 200, exposition(self.registry), _METRICS_HEADERS)

    def _synced_metrics(self) -> SimMetrics:
        """The live counters, brought up to date from the prefix cache and the mode."""
        metrics = self.metrics
        cache = self.prefix_cache
        if cache is not None:
            metrics.prefix_queries = cache.queries_tokens
            metrics.prefix_hits = cache.hits_tokens
        self.mode.sync(metrics)
        return metrics

    def _unknown_model(self, model: str | None) -> str | None:
        if model is None or model == self.config.model or model in self._speeds:
            return None
        return f"The model `{model}` does not exist."

    # -- /tokenize, in each engine's shape

    async def _tokenize(self, scope: Scope, receive: Receive, send: Send, arrival: float) -> None:
        body = await _read_body(receive)
        flavor = self.config.tokenize
        payload: Any
        try:
            if flavor == "llamacpp":
                payload = _tokenize_llamacpp(wire.decode_llama_tokenize(body))
            elif flavor == "sglang":
                payload = _tokenize_sglang(wire.decode_sglang_tokenize(body))
            elif flavor == "tgi":
                payload = _tokenize_tgi(wire.decode_tgi_tokenize(body))
            else:
                req = wire.decode_tokenize(body)
                if (problem := self._unknown_model(req.model)) is not None:
                    await _send_error(send, 404, problem, "not_found_error")
                    return
                payload = _tokenize_vllm(req, with_strs=flavor == "vllm")
        except wire.RequestError as exc:
            # SGLang (FastAPI) and TGI (axum) reject a body of the wrong shape with 422.
            status = 422 if flavor in ("sglang", "tgi") else 400
            await _send_error(send, status, str(exc), "invalid_request_error")
            return
        await _send_bytes(send, 200, wire.encode(payload), _JSON_HEADERS)

    # -- /v1/embeddings

    async def _embeddings(self, scope: Scope, receive: Receive, send: Send, arrival: float) -> None:
        """Vectors after a fixed latency (ttft_ms + embed_token_ms per input token, counted
        from arrival, in either mode), with the same faults and model check as generation."""
        try:
            req = decode_embeddings(await _read_body(receive))
        except wire.RequestError as exc:
            await _send_error(send, 400, str(exc), "invalid_request_error")
            return
        if (problem := self._unknown_model(req.model)) is not None:
            await _send_error(send, 404, problem, "not_found_error")
            return
        rate = self.config.error_rate
        if rate > 0.0 and self._rng.random() < rate:
            await _send_error(send, 500, "simulated server failure (--error-rate)", "server_error")
            return
        try:
            counts = input_tokens(req)
        except wire.RequestError as exc:
            await _send_error(send, 400, str(exc), "invalid_request_error")
            return
        self.metrics.requests_total += 1
        self.metrics.prompt_tokens += sum(counts)
        loop = asyncio.get_running_loop()
        due = arrival + latency_s(self.config.ttft_ms, self.config.embed_token_ms, sum(counts))
        await asyncio.sleep(max(0.0, due - loop.time()))
        body = response_body(self.config.model, counts, req.dimensions)
        await _send_bytes(send, 200, body, _JSON_HEADERS)

    # -- generation

    async def _chat(self, scope: Scope, receive: Receive, send: Send, arrival: float) -> None:
        await self._complete(scope, receive, send, arrival, chat=True)

    async def _completions(
        self, scope: Scope, receive: Receive, send: Send, arrival: float
    ) -> None:
        await self._complete(scope, receive, send, arrival, chat=False)

    async def _complete(
        self, scope: Scope, receive: Receive, send: Send, arrival: float, *, chat: bool
    ) -> None:
        """Parse a chat or completion body, then generate; a bad body gets a 400."""
        body = await _read_body(receive)
        req: wire.ChatRequest | wire.CompletionRequest
        try:
            req = wire.decode_chat(body) if chat else wire.decode_completion(body)
            forced = self._forced(req)
        except wire.RequestError as exc:
            await _send_error(send, 400, str(exc), "invalid_request_error")
            return
        if self.config.strict_fields and (unknown := wire.unknown_fields(body, self._accepted)):
            await self._refuse_fields(send, unknown)
            return
        images: list[tuple[int, int]] = []
        if isinstance(req, wire.ChatRequest):
            words = wire.message_words(req.messages)
            images = wire.image_sizes(req.messages)
            asked = req.max_completion_tokens or req.max_tokens
        else:
            words = wire.prompt_words(req.prompt)
            asked = req.max_tokens
        if asked is None and forced[1] is not None:
            asked = forced[1]  # generation_config's max_new_tokens
        options = req.stream_options
        include_usage = bool(options is not None and options.include_usage)
        usage = self.config.usage
        n = asked or self.config.max_tokens_default
        reason = "length" if asked else self.config.finish_reason_default
        eos = self.config.eos_after_tokens
        if eos is not None and eos < n and not (forced[0] is not None and forced[0] >= n):
            # The length was not forced: the model reaches its end of sequence first.
            n, reason = max(eos, forced[0] or 0), "stop"
        patch = self.config.image_patch_px
        image_tokens = sum(-(-w // patch) * -(-h // patch) for w, h in images)
        job = Job(
            chat=chat,
            prompt_tokens=max(1, len(words) + image_tokens),
            images=len(images),
            image_tokens=image_tokens,
            image_s=len(images) * self.config.image_prefill_ms / 1000.0,
            n=n,
            reason=reason,
            stream=bool(req.stream),
            include_usage=include_usage,
            continuous_usage=usage == "continuous"
            or (
                usage == "requested"
                and include_usage
                and options is not None
                and bool(options.continuous_usage_stats)
            ),
            keys=self.prefix_cache.keys(words) if self.prefix_cache is not None else [],
            n_out=n,
            reasoning=min(self.config.reasoning_tokens, n - 1) if chat else 0,
            speed=self._speeds.get(req.model or ""),
            model=req.model if req.model in self._speeds else None,
        )
        if isinstance(req, wire.ChatRequest):
            if job.reasoning and self.config.engine == "llamacpp":
                form = req.reasoning_format or self.config.reasoning_format
                job.inline_reasoning = form == "none"
            self._shape_answer(req, job)
        if job.stream and self.config.stream_end in ("abrupt", "error"):
            after = self.config.fault_after_tokens
            job.n_out = n if after is None else min(after, n)
        if self.writes is not None and (key := req.user or (words[0] if words else None)):
            job.writes = self.writes[_unused_key(self.writes, key)] = [arrival]
        if self.received is not None:
            self.received.append((arrival, job))
        await self._generate(
            scope=scope, receive=receive, send=send, arrival=arrival, job=job, model=req.model
        )

    async def _refuse_fields(self, send: Send, unknown: list[str]) -> None:
        """Refuse a body's unknown fields as the engine does (transformers: 422; the others
        an OpenAI-style 400)."""
        if self.config.engine == "transformers":
            await _send_bytes(send, 422, wire.transformers_refusal(unknown), _JSON_HEADERS)
        else:
            await _send_bytes(send, 400, wire.openai_refusal(unknown), _JSON_HEADERS)

    def _shape_answer(self, req: wire.ChatRequest, job: Job) -> None:
        """An answer of one tool call (the request offers tools) or of JSON (its
        response_format has a json_schema), after any reasoning: its n - reasoning tokens
        are the pieces of that text."""
        tools = req.tools if req.tool_choice != "none" else None
        schema = None
        if req.response_format and req.response_format.get("type") == "json_schema":
            schema = (req.response_format.get("json_schema") or {}).get("schema") or {}
        fmt = self._formats[True]
        cycle = len(fmt.tokens)
        thinking = [fmt.reasoning[j % cycle] for j in range(job.reasoning)]
        if job.inline_reasoning:
            text = wire.response_text(job.reasoning)
            words = [text[a:b] for a, b in _token_spans(job.reasoning)]
            words[0], words[-1] = "<think>" + words[0], words[-1] + "</think>"
            thinking = [fmt.delta({"content": word}) for word in words]
        if not tools and schema is None:
            if job.inline_reasoning:
                job.pieces = [
                    *thinking,
                    *(fmt.tokens[j % cycle] for j in range(job.reasoning, job.n)),
                ]
            return
        length = job.n - job.reasoning
        if tools:
            tool = tools[self._tool_turn % len(tools)].get("function") or {}
            self._tool_turn += 1
            name = str(tool.get("name", ""))
            text = answers.answer_text(
                tool.get("parameters") or {}, invalid=self._invalid_calls.next()
            )
            parts = answers.pieces(text, length)
            call_id = f"call_{uuid.uuid4().hex[:24]}"
            first = {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": call_id,
                        "type": "function",
                        "function": {"name": name, "arguments": parts[0]},
                    }
                ]
            }
            rest = [
                fmt.delta({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})
                for piece in parts[1:]
            ]
            job.pieces = [*thinking, fmt.delta(first), *rest]
            job.call, job.reason = (name, text), "tool_calls"
        else:
            text = answers.answer_text(schema or {}, invalid=self._invalid_json.next())
            itl_ms = self.config.structured_itl_ms
            if itl_ms is not None:
                # Guided decoding's slower steps: its own gap, the model's own TTFT.
                ttft_s = self.config.ttft_ms / 1000.0 if job.speed is None else job.speed[0]
                job.speed = (ttft_s, itl_ms / 1000.0)
            job.pieces = [
                *thinking,
                *(fmt.delta({"content": p}) for p in answers.pieces(text, length)),
            ]
            job.json_text = text

    def _forced(
        self, req: wire.ChatRequest | wire.CompletionRequest
    ) -> tuple[int | None, int | None]:
        """(the fewest tokens the answer may have, generation_config's max_new_tokens): an
        honoured ignore_eos forces every asked token; an honoured generation_config its
        min_new_tokens."""
        least: int | None = None
        most: int | None = None
        if req.ignore_eos and not self.config.strict_fields:
            least = MAX_MODEL_LEN
        if self.config.generation_config and req.generation_config is not None:
            config = wire.decode_generation_config(req.generation_config)
            if config.min_new_tokens is not None:
                least = max(least or 0, config.min_new_tokens)
            most = config.max_new_tokens
        return least, most

    async def _generate(
        self,
        *,
        scope: Scope,
        receive: Receive,
        send: Send,
        arrival: float,
        job: Job,
        model: str | None,
    ) -> None:
        """The one request path: checks, admission, then a stream or an answer, timed by
        the mode."""
        if (problem := self._unknown_model(model)) is not None:
            await _send_error(send, 404, problem, "not_found_error")
            return
        rate = self.config.error_rate
        if rate > 0.0 and self._rng.random() < rate:
            await _send_error(send, 500, "simulated server failure (--error-rate)", "server_error")
            return
        if self._overloaded():
            await self._send_overload(send)
            return
        self.metrics.requests_total += 1
        mode = self.mode
        async with mode.admitted(arrival) as start:
            if self._closing:
                await _send_error(send, 503, "the simulator is shutting down", "server_error")
                return
            problem = mode.rejection(job)
            if problem is not None:
                await _send_error(send, 400, problem, "invalid_request_error")
                return
            self._lookup(job)
            async with self._tracked(receive) as inflight:
                generation = mode.begin(job, start, inflight)
                try:
                    if job.stream:
                        if self.config.sse_multiline_crlf:
                            send = _multiline_crlf(send)
                        done = await self._stream(scope, send, inflight, generation, job)
                    else:
                        done = await self._respond(send, inflight, generation, job)
                    if done:
                        self._finished(job, *generation.times())
                finally:
                    generation.close()

    def _overloaded(self) -> bool:
        """Whether --max-queue requests already wait (gpu mode: not yet admitted)."""
        limit = self.config.max_queue
        return limit is not None and self.mode.overloaded(limit)

    async def _send_overload(self, send: Send) -> None:
        """429 or 503 with Retry-After; TGI's body is its own `{"error", "error_type"}`."""
        status = self.config.overload_status
        if self.config.engine == "tgi":
            body = wire.encode({"error": "Model is overloaded", "error_type": "overloaded"})
        else:
            body = wire.error_body(
                status,
                f"the simulator's queue is full ({self.config.max_queue} waiting): retry later",
                "server_error" if status == 503 else "rate_limit_error",
            )
        headers = (*_JSON_HEADERS, (b"retry-after", str(self.config.retry_after_s).encode()))
        await _send_bytes(send, status, body, headers)

    def _lookup(self, job: Job) -> None:
        """Set the job's cached tokens from the prefix cache (at admission, when prefill starts)."""
        if self.prefix_cache is not None:
            job.cached = self.prefix_cache.lookup(job.keys, job.prompt_tokens)
        self.metrics.cached_tokens += job.cached

    def _remember(self, job: Job) -> None:
        """The job's prompt is prefilled: later requests may reuse it."""
        if self.prefix_cache is not None:
            self.prefix_cache.insert(job.keys)

    def _finished(self, job: Job, prompt_s: float, predicted_s: float) -> None:
        metrics = self.metrics
        metrics.finished(job.reason)
        metrics.prompt_seconds += prompt_s
        metrics.predicted_seconds += predicted_s
        metrics.n_tokens_max = max(metrics.n_tokens_max, job.prompt_tokens + job.n)

    @contextlib.asynccontextmanager
    async def _tracked(self, receive: Receive) -> AsyncIterator[Inflight]:
        """An in-flight request: stopped by shutdown (close) or by its client leaving."""
        inflight = Inflight()
        self._inflight.add(inflight)
        watcher = asyncio.create_task(inflight.watch(receive))
        try:
            yield inflight
        finally:
            self._inflight.discard(inflight)
            watcher.cancel()

    # -- the stream's bytes, shared by both modes

    def _prefix(self, job: Job) -> bytes:
        fmt = self._formats[job.chat]
        # llama-server names completion streams chatcmpl-... too (completions-stream-usage.sse).
        kind = "chatcmpl" if job.chat or self.config.engine == "llamacpp" else "cmpl"
        model_json = self._model_json if job.model is None else self._model_jsons[job.model]
        return fmt.prefix(f"{kind}-{uuid.uuid4().hex}", int(time.time()), model_json)

    async def _start_stream(self, send: Send, prefix: bytes, job: Job) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self._sse_headers})
        if job.chat and self.config.role_chunk == "arrival":
            # The role event goes out on arrival and carries no text (not the first token).
            body = self._role_event(prefix, job)
            await send({"type": "http.response.body", "body": body, "more_body": True})

    def _usage_extra(self, job: Job, completion_tokens: int) -> bytes:
        return b',"usage":' + wire.usage_json(
            job.prompt_tokens,
            completion_tokens,
            self._cached_report(job),
            self._reasoning_report(job, completion_tokens),
            self._image_report(job),
        )

    def _image_report(self, job: Job) -> int | None:
        """prompt_tokens_details.image_tokens, or None to leave it out: a request with images,
        with image_usage."""
        return job.image_tokens if job.images and self.config.image_usage else None

    def _reasoning_report(self, job: Job, completion_tokens: int) -> int | None:
        """usage's completion_tokens_details.reasoning_tokens, or None to leave it out: only
        with reasoning_usage, for a chat answer of a reasoning model (reasoning_tokens)."""
        if not (job.chat and self.config.reasoning_usage and self.config.reasoning_tokens):
            return None
        return min(job.reasoning, completion_tokens)

    def _cached_report(self, job: Job) -> int | None:
        """prompt_tokens_details.cached_tokens, or None to leave it out: llama.cpp always
        reports it; the others when the prefix cache hit."""
        if self.config.engine == "llamacpp":
            return job.cached
        return job.cached if job.cached > 0 else None

    def _role_event(self, prefix: bytes, job: Job) -> bytes:
        extras = self._usage_extra(job, 0) if job.continuous_usage else b""
        return wire.event(prefix, self._formats[job.chat].role, extras)

    async def _send_tokens(self, send: Send, prefix: bytes, job: Job, k: int, end: int) -> None:
        """Write content events k..end-1 in one write (the role chunk first when due); a
        reasoning model's first job.reasoning tokens are reasoning text."""
        fmt = self._formats[job.chat]
        tokens = fmt.tokens
        cycle = len(tokens)
        if job.pieces is not None:
            choices = job.pieces[k:end]
        elif k < job.reasoning:
            side = (fmt.reasoning, tokens)
            choices = [side[j >= job.reasoning][j % cycle] for j in range(k, end)]
        else:
            choices = [tokens[j % cycle] for j in range(k, end)]
        if job.continuous_usage:
            body = b"".join(
                wire.event(prefix, choice, self._usage_extra(job, j + 1))
                for j, choice in zip(range(k, end), choices, strict=True)
            )
        elif len(choices) == 1:
            body = prefix + choices[0] + wire.EVENT_SUFFIX
        else:
            suffix = wire.EVENT_SUFFIX
            body = b"".join([prefix + choice + suffix for choice in choices])
        if k == 0 and job.chat:
            role = self.config.role_chunk
            if role == "separate":
                first = self._role_event(prefix, job)
                await send({"type": "http.response.body", "body": first, "more_body": True})
            elif role == "joined":
                body = self._role_event(prefix, job) + body
        await send({"type": "http.response.body", "body": body, "more_body": True})

    def _timings(self, job: Job, prompt_s: float, predicted_s: float) -> bytes:
        return wire.timings_json(
            cache_n=job.cached,
            prompt_n=job.prompt_tokens - job.cached,
            prompt_ms=prompt_s * 1000.0,
            predicted_n=job.n,
            predicted_ms=predicted_s * 1000.0,
        )

    def _tail(self, prefix: bytes, job: Job, prompt_s: float, predicted_s: float) -> bytes:
        """The finish event, the usage event if any, timings on the last of them, [DONE]."""
        usage = self.config.usage
        fmt = self._formats[job.chat]
        # llama.cpp puts a completion's usage on its finish chunk, asked or not.
        llama_completion = self.config.engine == "llamacpp" and not job.chat
        usage_on_finish = usage == "finish" or job.continuous_usage or llama_completion
        usage_event = not llama_completion and (
            usage == "continuous" or (usage == "requested" and job.include_usage)
        )
        timings = b',"timings":' + self._timings(job, prompt_s, predicted_s)
        finish_extras = self._usage_extra(job, job.n) if usage_on_finish else b""
        if self.config.timings and not usage_event:
            finish_extras += timings
        tail = wire.event(prefix, fmt.finish[job.reason], finish_extras)
        if usage_event:
            extras = self._usage_extra(job, job.n)
            if self.config.timings:
                extras += timings
            tail += wire.event(prefix, b"", extras)
        if self.config.stream_end == "done":
            tail += wire.DONE_EVENT
        return tail

    async def _end_stream(
        self,
        *,
        scope: Scope,
        send: Send,
        prefix: bytes,
        job: Job,
        prompt_s: float,
        predicted_s: float,
    ) -> bool:
        """Send the stream's end as configured; True when it ended properly."""
        end = self.config.stream_end
        if end == "error":
            body = wire.error_event(
                "simulated failure in the middle of the stream (--stream-end)",
                engine=self.config.engine,
            )
        elif end == "abrupt":
            body = b""
        else:
            body = self._tail(prefix, job, prompt_s, predicted_s)
        if self.config.close_after_response:
            scope[CLOSE_AFTER_RESPONSE] = True
        await send({"type": "http.response.body", "body": body})
        return end in ("done", "no_done")

    # -- streaming and answering, timed by the mode

    async def _stream(
        self, scope: Scope, send: Send, inflight: Inflight, generation: Generation, job: Job
    ) -> bool:
        """Send one event per token (or per burst) as the mode makes them due; False if
        stopped early."""
        prefix = self._prefix(job)
        await self._start_stream(send, prefix, job)
        emit = functools.partial(self._send_tokens, send, prefix, job)
        if not await generation.stream(inflight, emit):
            if not inflight.client_gone:  # shutting down: end the body, no [DONE]
                await send({"type": "http.response.body", "body": b""})
            return False
        prompt_s, predicted_s = generation.times()
        return await self._end_stream(
            scope=scope,
            send=send,
            prefix=prefix,
            job=job,
            prompt_s=prompt_s,
            predicted_s=predicted_s,
        )

    async def _respond(
        self, send: Send, inflight: Inflight, generation: Generation, job: Job
    ) -> bool:
        """Answer once, when a stream would have ended; False if stopped early."""
        if not await generation.complete(inflight):
            if not inflight.client_gone:
                await _send_error(send, 503, "the simulator is shutting down", "server_error")
            return False
        body = self._completion_body(job, *generation.times())
        await _send_bytes(send, 200, body, _JSON_HEADERS)
        generation.answered()
        return True

    def _model_name(self, job: Job) -> str:
        """The model name an answer gives: the one asked for, of those served."""
        return job.model or self.config.model

    def _message(self, job: Job, text: str) -> dict[str, Any]:
        """A whole chat answer's message: its reasoning text apart, when it reasoned; its
        tool call or JSON when the request asked for one."""
        cut = len(wire.response_text(job.reasoning))
        message: dict[str, Any] = {"role": "assistant", "content": text[cut:]}
        if job.inline_reasoning:
            message["content"] = f"<think>{text[:cut]}</think>{text[cut:]}"
        elif job.reasoning:
            message[self.config.reasoning_field] = text[:cut]
        if job.json_text is not None:
            message["content"] = job.json_text
        if job.call is not None:
            name, arguments = job.call
            message["content"] = None
            message["tool_calls"] = [
                {
                    "id": f"call_{uuid.uuid4().hex[:24]}",
                    "type": "function",
                    "function": {"name": name, "arguments": arguments},
                }
            ]
        return message

    def _completion_body(self, job: Job, prompt_s: float, predicted_s: float) -> bytes:
        """The non-streaming response to a request for n tokens."""
        text = wire.response_text(job.n)
        usage: dict[str, Any] = {
            "prompt_tokens": job.prompt_tokens,
            "completion_tokens": job.n,
            "total_tokens": job.prompt_tokens + job.n,
        }
        cached = self._cached_report(job)
        if cached is not None:
            usage["prompt_tokens_details"] = {"cached_tokens": cached}
        image_tokens = self._image_report(job)
        if image_tokens is not None:
            usage.setdefault("prompt_tokens_details", {})["image_tokens"] = image_tokens
        reasoning = self._reasoning_report(job, job.n)
        if reasoning is not None:
            usage["completion_tokens_details"] = {"reasoning_tokens": reasoning}
        created = int(time.time())
        payload: dict[str, Any]
        if job.chat:
            payload = {
                "id": f"chatcmpl-{uuid.uuid4().hex}",
                "object": "chat.completion",
                "created": created,
                "model": self._model_name(job),
                "choices": [
                    {
                        "index": 0,
                        "message": self._message(job, text),
                        "logprobs": None,
                        "finish_reason": job.reason,
                    }
                ],
                "usage": usage,
            }
        else:
            payload = {
                "id": f"cmpl-{uuid.uuid4().hex}",
                "object": "text_completion",
                "created": created,
                "model": self._model_name(job),
                "choices": [
                    {"index": 0, "text": text, "logprobs": None, "finish_reason": job.reason}
                ],
                "usage": usage,
            }
        if self.config.engine == "llamacpp":  # as shared/fixtures/llama-server/chat-nostream.json
            payload["system_fingerprint"] = wire.LLAMACPP_FINGERPRINT
            if job.chat:
                del payload["choices"][0]["logprobs"]
        body = wire.encode(payload)
        if self.config.timings:  # appended pre-encoded, as the stream's events are
            body = body[:-1] + b',"timings":' + self._timings(job, prompt_s, predicted_s) + b"}"
        return body


# -- /tokenize answers. Shapes read from the engines' sources: vLLM's TokenizeResponse
# (vllm/entrypoints/openai/protocol.py: count, max_model_len, tokens, token_strs), SGLang's
# serving_tokenize.py (tokens, count, max_model_len; lists for a list of prompts),
# TGI's router/src/server.rs `tokenize` (a list of SimpleToken id, text, start, stop) and
# llama-server's tokenize handler (`{"tokens": [...]}`, or `{"id", "piece"}` objects with
# with_pieces; no `content` gives an empty list).


def _token_spans(n: int) -> list[tuple[int, int]]:
    """(start, stop) of each of the first n tokens in wire.response_text(n)."""
    spans = []
    at = 0
    for i in range(n):
        size = len(wire.TOKEN_TEXTS[i % len(wire.TOKEN_TEXTS)])
        spans.append((at, at + size))
        at += size
    return spans


def _tokenize_vllm(req: wire.TokenizeRequest, *, with_strs: bool) -> dict[str, Any]:
    words = req.prompt.split() if req.prompt is not None else wire.message_words(req.messages or [])
    ids = wire.token_ids(words)
    if not with_strs:  # the simulator's original answer
        return {"tokens": ids, "count": len(ids), "max_model_len": MAX_MODEL_LEN}
    strs = (words or [""]) if req.return_token_strs else None
    return {"count": len(ids), "max_model_len": MAX_MODEL_LEN, "tokens": ids, "token_strs": strs}


def _tokenize_llamacpp(req: wire.LlamaTokenizeRequest) -> dict[str, Any]:
    content = req.content
    if content is None:
        return {"tokens": []}
    items: list[tuple[int, str]] = []
    for part in [content] if isinstance(content, str) else content:
        if isinstance(part, int):  # llama-server passes token ids in a mixed list through
            items.append((part, ""))
        else:
            words = part.split()
            items.extend(zip(wire.token_ids(words), words, strict=True) if words else [])
    if req.add_special:
        items.insert(0, (wire.BOS_ID, "<s>"))
    if req.with_pieces:
        return {"tokens": [{"id": i, "piece": piece} for i, piece in items]}
    return {"tokens": [i for i, _ in items]}


def _tokenize_sglang(req: wire.SglangTokenizeRequest) -> dict[str, Any]:
    def ids(text: str) -> list[int]:
        words = text.split()
        return wire.token_ids(words) if words else []

    if isinstance(req.prompt, str):
        tokens = ids(req.prompt)
        return {"tokens": tokens, "count": len(tokens), "max_model_len": MAX_MODEL_LEN}
    lists = [ids(p) for p in req.prompt]
    return {"tokens": lists, "count": [len(t) for t in lists], "max_model_len": MAX_MODEL_LEN}


def _tokenize_tgi(req: wire.TgiTokenizeRequest) -> list[dict[str, Any]]:
    text = req.inputs
    spans = wire.word_spans(text)
    ids = wire.token_ids([text[a:b] for a, b in spans]) if spans else []
    return [
        {"id": i, "text": text[a:b], "start": a, "stop": b}
        for i, (a, b) in zip(ids, spans, strict=True)
    ]
