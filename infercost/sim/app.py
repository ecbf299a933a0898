"""The simulated OpenAI-compatible endpoint as an ASGI app.

Fixed mode takes its timings from the config; gpu mode streams tokens as the modelled GPU
engine (infercost.sim.gpu) emits them.

Plain ASGI under uvicorn rather than Litestar: with hundreds of concurrent streams the event
path must cost one bytes concatenation and one `send` per token, with no router, response
class or middleware in between; eight routes dispatch on a dict.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from typing import Any, Final

from infercost.sim import wire
from infercost.sim.config import MAX_MODEL_LEN, SimConfig
from infercost.sim.gpu import EngineRunner, GpuEngine, GpuRequest, escape_label, wake
from infercost.sim.lateness import Lateness

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
Handler = Callable[[Receive, Send, float], Awaitable[None]]

MAX_BODY_BYTES: Final = 32 * 1024 * 1024

_JSON_HEADERS: Final = ((b"content-type", b"application/json"),)
_SSE_HEADERS: Final = (
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache"),
)
_METRICS_HEADERS: Final = ((b"content-type", b"text/plain; version=0.0.4; charset=utf-8"),)


class _ClientGoneError(Exception):
    """The client disconnected before its request body arrived."""


class _BodyTooLargeError(Exception):
    """The request body exceeds MAX_BODY_BYTES."""


class SimMetrics:
    """Live counters behind GET /metrics (vLLM names, so telemetry code can read either).

    In gpu mode the engine owns running, waiting and the token counters; the app copies
    them here before each render.
    """

    __slots__ = ("generation_tokens", "prompt_tokens", "request_success", "running", "waiting")

    def __init__(self) -> None:
        self.running = 0
        self.waiting = 0  # requests queued behind --max-concurrency
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.request_success = 0

    def render(self, model: str) -> bytes:
        """Prometheus text exposition (format 0.0.4) of the current values."""
        label = f'{{model_name="{escape_label(model)}"}}'
        lines: list[str] = []
        for name, kind, help_text, attr in _METRIC_FAMILIES:
            lines.append(f"# HELP {name} {help_text}")
            lines.append(f"# TYPE {name} {kind}")
            lines.append(f"{name}{label} {float(getattr(self, attr))!r}")
        return ("\n".join(lines) + "\n").encode()


# (name, type, help, SimMetrics attribute), in the order vLLM lists them.
_METRIC_FAMILIES: Final = (
    ("vllm:num_requests_running", "gauge",
     "Number of requests in model execution batches.", "running"),
    ("vllm:num_requests_waiting", "gauge",
     "Number of requests waiting to be processed.", "waiting"),
    ("vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.", "prompt_tokens"),
    ("vllm:generation_tokens_total", "counter",
     "Number of generation tokens processed.", "generation_tokens"),
    ("vllm:request_success_total", "counter",
     "Count of successfully processed requests.", "request_success"),
)  # fmt: skip


class _Inflight:
    """One generating request: its current sleep, and whether to stop (client left or the
    server is shutting down), so streams end at once and the gauges stay true."""

    __slots__ = ("client_gone", "notified", "stopped", "waiter")

    def __init__(self) -> None:
        self.client_gone = False
        self.notified = False
        self.stopped = False
        self.waiter: asyncio.Future[None] | None = None

    def notify(self) -> None:
        """The engine emitted tokens (gpu mode); remembered until the next wait()."""
        self.notified = True
        if self.waiter is not None:
            wake(self.waiter)

    def stop(self) -> None:
        self.stopped = True
        if self.waiter is not None:
            wake(self.waiter)

    async def watch(self, receive: Receive) -> None:
        # After the body, uvicorn's receive() returns only when the client disconnects (or
        # the response completes, when nobody looks at the flag any more).
        while (await receive())["type"] != "http.disconnect":
            pass
        self.client_gone = True
        self.stop()

    async def sleep_until(self, loop: asyncio.AbstractEventLoop, when: float) -> None:
        """Sleep to an absolute loop time (overshoot never accumulates into drift), or
        until stop()."""
        self.waiter = fut = loop.create_future()
        handle = loop.call_at(when, wake, fut)
        try:
            await fut
        finally:
            handle.cancel()
            self.waiter = None

    async def wait(self, loop: asyncio.AbstractEventLoop) -> None:
        """Until notify() or stop(), or at once if either came since the last wait."""
        if not (self.notified or self.stopped):
            self.waiter = fut = loop.create_future()
            try:
                await fut
            finally:
                self.waiter = None
        self.notified = False


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


async def _send_error(send: Send, status: int, message: str, error_type: str) -> None:
    await _send_bytes(send, status, wire.error_body(status, message, error_type), _JSON_HEADERS)


class SimApp:
    """ASGI app of the simulated endpoint; `metrics` exposes its live state in-process too."""

    def __init__(self, config: SimConfig) -> None:
        self.config = config
        self.metrics = SimMetrics()
        # Reproducible fault injection (--error-rate, --seed), not a security decision.
        self._rng = random.Random(config.seed)  # noqa: S311
        self._inflight: set[_Inflight] = set()
        self._closing = False
        limit = config.max_concurrency
        self._admission = asyncio.Semaphore(limit) if limit is not None else None
        self._model_json = wire.encode(config.model)
        self._ttft_s = config.ttft_ms / 1000.0
        self._itl_s = config.itl_ms / 1000.0
        # Fixed mode: how late each write went out against its schedule (GET /stats).
        self.lateness = Lateness()
        self.engine: GpuEngine | None = None
        self._runner: EngineRunner | None = None
        if config.mode == "gpu":
            self.engine = GpuEngine.from_config(config)
            self._runner = EngineRunner(self.engine)
        created = int(time.time())
        self._models_body = wire.encode(
            {
                "object": "list",
                "data": [
                    {
                        "id": config.model,
                        "object": "model",
                        "created": created,
                        "owned_by": "infercost-sim",
                        "root": config.model,
                        "max_model_len": MAX_MODEL_LEN,
                    }
                ],
            }
        )
        self._routes: dict[str, dict[str, Handler]] = {
            "/v1/chat/completions": {"POST": self._chat},
            "/v1/completions": {"POST": self._completions},
            "/v1/models": {"GET": self._models},
            "/tokenize": {"POST": self._tokenize},
            "/metrics": {"GET": self._metrics},
            "/health": {"GET": self._health},
            "/stats": {"GET": self._stats},
            "/stats/reset": {"POST": self._stats_reset},
        }

    def close(self) -> None:
        """End every in-flight generation now (streams stop, waiting ones get 503): called
        when the server shuts down, so it need not wait out long streams."""
        self._closing = True
        for inflight in self._inflight:
            inflight.stop()
        if self._runner is not None:
            self._runner.stop()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """ASGI entry: the arrival time is taken first, before the body is read."""
        if scope["type"] == "http":
            arrival = asyncio.get_running_loop().time()
            if self._runner is not None:
                self._runner.start()  # the GPU clock (and its telemetry) starts on first contact
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
                await handler(receive, send, arrival)
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

    async def _health(self, receive: Receive, send: Send, arrival: float) -> None:
        await _send_bytes(send, 200, b'{"status":"ok"}', _JSON_HEADERS)

    async def _stats(self, receive: Receive, send: Send, arrival: float) -> None:
        """The simulator's own lateness against its schedule (fixed mode) since the last reset."""
        body = wire.encode({"lateness": self.lateness.summary()})
        await _send_bytes(send, 200, body, _JSON_HEADERS)

    async def _stats_reset(self, receive: Receive, send: Send, arrival: float) -> None:
        self.lateness.reset()
        await _send_bytes(send, 200, b'{"status":"ok"}', _JSON_HEADERS)

    async def _models(self, receive: Receive, send: Send, arrival: float) -> None:
        await _send_bytes(send, 200, self._models_body, _JSON_HEADERS)

    async def _metrics(self, receive: Receive, send: Send, arrival: float) -> None:
        metrics = self.metrics
        engine = self.engine
        if engine is None:
            body = metrics.render(self.config.model)
        else:
            metrics.running = len(engine.running)
            metrics.waiting = len(engine.waiting)
            metrics.prompt_tokens = engine.prompt_tokens_total
            metrics.generation_tokens = engine.generation_tokens_total
            now = asyncio.get_running_loop().time()
            body = (
                metrics.render(self.config.model)
                + engine.render_metrics(self.config.model, now).encode()
            )
        await _send_bytes(send, 200, body, _METRICS_HEADERS)

    def _unknown_model(self, model: str | None) -> str | None:
        if model is None or model == self.config.model:
            return None
        return f"The model `{model}` does not exist."

    async def _tokenize(self, receive: Receive, send: Send, arrival: float) -> None:
        body = await _read_body(receive)
        try:
            req = wire.decode_tokenize(body)
        except wire.RequestError as exc:
            await _send_error(send, 400, str(exc), "invalid_request_error")
            return
        if (problem := self._unknown_model(req.model)) is not None:
            await _send_error(send, 404, problem, "not_found_error")
            return
        if req.prompt is not None:
            words = req.prompt.split()
        else:
            words = wire.message_words(req.messages or [])
        ids = wire.token_ids(words)
        payload = {"tokens": ids, "count": len(ids), "max_model_len": MAX_MODEL_LEN}
        await _send_bytes(send, 200, wire.encode(payload), _JSON_HEADERS)

    async def _chat(self, receive: Receive, send: Send, arrival: float) -> None:
        await self._complete(receive, send, arrival, chat=True)

    async def _completions(self, receive: Receive, send: Send, arrival: float) -> None:
        await self._complete(receive, send, arrival, chat=False)

    async def _complete(self, receive: Receive, send: Send, arrival: float, *, chat: bool) -> None:
        """Parse a chat or completion body, then generate; a bad body gets a 400."""
        body = await _read_body(receive)
        req: wire.ChatRequest | wire.CompletionRequest
        try:
            req = wire.decode_chat(body) if chat else wire.decode_completion(body)
        except wire.RequestError as exc:
            await _send_error(send, 400, str(exc), "invalid_request_error")
            return
        if isinstance(req, wire.ChatRequest):
            words = wire.message_words(req.messages)
            asked = req.max_completion_tokens or req.max_tokens
        else:
            words = wire.prompt_words(req.prompt)
            asked = req.max_tokens
        options = req.stream_options
        await self._generate(
            receive,
            send,
            arrival,
            chat=chat,
            model=req.model,
            prompt_tokens=max(1, len(words)),
            n=asked or self.config.max_tokens_default,
            stream=bool(req.stream),
            include_usage=bool(options is not None and options.include_usage),
        )

    async def _generate(
        self,
        receive: Receive,
        send: Send,
        arrival: float,
        *,
        chat: bool,
        model: str | None,
        prompt_tokens: int,
        n: int,
        stream: bool,
        include_usage: bool,
    ) -> None:
        if (problem := self._unknown_model(model)) is not None:
            await _send_error(send, 404, problem, "not_found_error")
            return
        rate = self.config.error_rate
        if rate > 0.0 and self._rng.random() < rate:
            await _send_error(send, 500, "simulated server failure (--error-rate)", "server_error")
            return
        if self._runner is not None:
            await self._generate_gpu(
                receive,
                send,
                self._runner,
                chat=chat,
                prompt_tokens=prompt_tokens,
                n=n,
                stream=stream,
                include_usage=include_usage,
            )
            return
        metrics = self.metrics
        if self._admission is not None:
            # Queue behind --max-concurrency; the first token is due ttft after admission.
            metrics.waiting += 1
            try:
                await self._admission.acquire()
            finally:
                metrics.waiting -= 1
            arrival = asyncio.get_running_loop().time()
        try:
            await self._admitted(
                receive,
                send,
                arrival,
                chat=chat,
                prompt_tokens=prompt_tokens,
                n=n,
                stream=stream,
                include_usage=include_usage,
            )
        finally:
            if self._admission is not None:
                self._admission.release()

    async def _admitted(
        self,
        receive: Receive,
        send: Send,
        arrival: float,
        *,
        chat: bool,
        prompt_tokens: int,
        n: int,
        stream: bool,
        include_usage: bool,
    ) -> None:
        if self._closing:
            await _send_error(send, 503, "the simulator is shutting down", "server_error")
            return
        metrics = self.metrics
        metrics.running += 1
        metrics.prompt_tokens += prompt_tokens
        try:
            async with self._tracked(receive) as inflight:
                if stream:
                    done = await self._stream(
                        send=send,
                        inflight=inflight,
                        arrival=arrival,
                        chat=chat,
                        prompt_tokens=prompt_tokens,
                        n=n,
                        include_usage=include_usage,
                    )
                else:
                    done = await self._respond(
                        send=send,
                        inflight=inflight,
                        arrival=arrival,
                        chat=chat,
                        prompt_tokens=prompt_tokens,
                        n=n,
                    )
                if done:
                    metrics.request_success += 1
        finally:
            metrics.running -= 1

    @contextlib.asynccontextmanager
    async def _tracked(self, receive: Receive) -> AsyncIterator[_Inflight]:
        """An in-flight request: stopped by shutdown (close) or by its client leaving."""
        inflight = _Inflight()
        self._inflight.add(inflight)
        watcher = asyncio.create_task(inflight.watch(receive))
        try:
            yield inflight
        finally:
            self._inflight.discard(inflight)
            watcher.cancel()

    def _stream_parts(self, chat: bool) -> tuple[bytes, tuple[bytes, ...], bytes]:
        """This stream's event prefix, the per-token choices to cycle and the finish choice."""
        created = int(time.time())
        if chat:
            prefix = wire.event_prefix(
                "chat.completion.chunk", f"chatcmpl-{uuid.uuid4().hex}", created, self._model_json
            )
            return prefix, wire.CHAT_TOKEN_CHOICES, wire.CHAT_FINISH_CHOICE
        prefix = wire.event_prefix(
            "text_completion", f"cmpl-{uuid.uuid4().hex}", created, self._model_json
        )
        return prefix, wire.COMPLETION_TOKEN_CHOICES, wire.COMPLETION_FINISH_CHOICE

    async def _start_stream(self, send: Send, prefix: bytes, chat: bool) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": _SSE_HEADERS})
        if chat:
            # The role event goes out on arrival and carries no text (not the first token).
            role = prefix + wire.CHAT_ROLE_CHOICE + wire.EVENT_SUFFIX
            await send({"type": "http.response.body", "body": role, "more_body": True})

    async def _stream(
        self,
        *,
        send: Send,
        inflight: _Inflight,
        arrival: float,
        chat: bool,
        prompt_tokens: int,
        n: int,
        include_usage: bool,
    ) -> bool:
        """Send one event per token at arrival + ttft + k*itl; False if stopped early.

        With --burst B, tokens go out B events per write, each write when its last token is
        due (never early). Every write's lateness against that due time is recorded.
        """
        loop = asyncio.get_running_loop()
        prefix, choices, finish = self._stream_parts(chat)
        suffix = wire.EVENT_SUFFIX
        await self._start_stream(send, prefix, chat)
        metrics = self.metrics
        record = self.lateness.record
        first = arrival + self._ttft_s
        itl = self._itl_s
        burst = self.config.burst
        cycle = len(choices)
        k = 0
        while k < n:
            end = min(k + burst, n)
            due = first + (end - 1) * itl
            if due > loop.time():  # already due (behind, or itl 0): no timer to wait on
                await inflight.sleep_until(loop, due)
            if inflight.stopped:
                if not inflight.client_gone:  # shutting down: end the body, no [DONE]
                    await send({"type": "http.response.body", "body": b""})
                return False
            if end - k == 1:
                body = prefix + choices[k % cycle] + suffix
            else:
                body = b"".join([prefix + choices[j % cycle] + suffix for j in range(k, end)])
            record(loop.time() - due)
            await send({"type": "http.response.body", "body": body, "more_body": True})
            metrics.generation_tokens += end - k
            k = end
        tail = prefix + finish + suffix
        if include_usage:
            tail += wire.usage_event(prefix, prompt_tokens, n)
        await send({"type": "http.response.body", "body": tail + wire.DONE_EVENT})
        return True

    async def _respond(
        self,
        *,
        send: Send,
        inflight: _Inflight,
        arrival: float,
        chat: bool,
        prompt_tokens: int,
        n: int,
    ) -> bool:
        """Answer once at arrival + ttft + (n-1)*itl, when a stream would have ended."""
        loop = asyncio.get_running_loop()
        due = arrival + self._ttft_s + (n - 1) * self._itl_s
        await inflight.sleep_until(loop, due)
        if inflight.stopped:
            if not inflight.client_gone:
                await _send_error(send, 503, "the simulator is shutting down", "server_error")
            return False
        self.lateness.record(loop.time() - due)
        await _send_bytes(send, 200, self._completion_body(chat, prompt_tokens, n), _JSON_HEADERS)
        self.metrics.generation_tokens += n
        return True

    def _completion_body(self, chat: bool, prompt_tokens: int, n: int) -> bytes:
        """The non-streaming response to a request for n tokens."""
        text = wire.response_text(n)
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": n,
            "total_tokens": prompt_tokens + n,
        }
        created = int(time.time())
        payload: dict[str, Any]
        if chat:
            payload = {
                "id": f"chatcmpl-{uuid.uuid4().hex}",
                "object": "chat.completion",
                "created": created,
                "model": self.config.model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "logprobs": None,
                        "finish_reason": "length",
                    }
                ],
                "usage": usage,
            }
        else:
            payload = {
                "id": f"cmpl-{uuid.uuid4().hex}",
                "object": "text_completion",
                "created": created,
                "model": self.config.model,
                "choices": [
                    {"index": 0, "text": text, "logprobs": None, "finish_reason": "length"}
                ],
                "usage": usage,
            }
        return wire.encode(payload)

    # -- gpu mode

    async def _generate_gpu(
        self,
        receive: Receive,
        send: Send,
        runner: EngineRunner,
        *,
        chat: bool,
        prompt_tokens: int,
        n: int,
        stream: bool,
        include_usage: bool,
    ) -> None:
        """Queue the request in the engine and deliver its tokens as the engine emits them."""
        if self._closing:
            await _send_error(send, 503, "the simulator is shutting down", "server_error")
            return
        problem = runner.engine.rejection(prompt_tokens, n)
        if problem is not None:
            await _send_error(send, 400, problem, "invalid_request_error")
            return
        async with self._tracked(receive) as inflight:
            request = GpuRequest(prompt_tokens, n, on_progress=inflight.notify)
            try:
                runner.submit(request)
                if stream:
                    done = await self._stream_gpu(
                        send=send,
                        inflight=inflight,
                        request=request,
                        chat=chat,
                        include_usage=include_usage,
                    )
                else:
                    done = await self._respond_gpu(
                        send=send, inflight=inflight, request=request, chat=chat
                    )
                if done:
                    self.metrics.request_success += 1
            finally:
                runner.cancel(request)  # frees its KV if the client left early; else a no-op

    async def _stream_gpu(
        self,
        *,
        send: Send,
        inflight: _Inflight,
        request: GpuRequest,
        chat: bool,
        include_usage: bool,
    ) -> bool:
        """Send one event per token as the engine emits it; False if stopped early."""
        loop = asyncio.get_running_loop()
        prefix, choices, finish = self._stream_parts(chat)
        suffix = wire.EVENT_SUFFIX
        await self._start_stream(send, prefix, chat)
        cycle = len(choices)
        sent = 0
        while True:
            await inflight.wait(loop)
            if inflight.stopped:
                if not inflight.client_gone:  # shutting down: end the body, no [DONE]
                    await send({"type": "http.response.body", "body": b""})
                return False
            emitted = request.generated
            if emitted > sent:
                # Usually one token; more only when this task fell a step behind.
                body = b"".join(prefix + choices[k % cycle] + suffix for k in range(sent, emitted))
                sent = emitted
                await send({"type": "http.response.body", "body": body, "more_body": True})
            if request.done:
                break
        tail = prefix + finish + suffix
        if include_usage:
            tail += wire.usage_event(prefix, request.prompt_tokens, request.max_tokens)
        await send({"type": "http.response.body", "body": tail + wire.DONE_EVENT})
        return True

    async def _respond_gpu(
        self, *, send: Send, inflight: _Inflight, request: GpuRequest, chat: bool
    ) -> bool:
        """Answer once the engine emitted the last token; False if stopped early."""
        loop = asyncio.get_running_loop()
        while not request.done:
            await inflight.wait(loop)
            if inflight.stopped:
                if not inflight.client_gone:
                    await _send_error(send, 503, "the simulator is shutting down", "server_error")
                return False
        body = self._completion_body(chat, request.prompt_tokens, request.max_tokens)
        await _send_bytes(send, 200, body, _JSON_HEADERS)
        return True
