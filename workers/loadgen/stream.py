"""One request to an OpenAI-compatible endpoint, timed per METRICS.md.

This is the hot path: timestamps come from `time.perf_counter_ns` as bytes arrive, events are
decoded into small typed structs (unknown fields skipped), and nothing is logged per event.
On a slot's connection each event takes the stamp of the socket read that completed it
(taken in the transport's data callback, workers/loadgen/transport.py), not the moment this
coroutine got round to it; through the shared pool or a proxy, it takes the moment its bytes
came out of httpx.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
from collections.abc import AsyncGenerator, Iterable
from dataclasses import dataclass
from time import perf_counter_ns
from typing import Any, cast

import httpx
import msgspec

from infercost.figures.metrics import RequestTiming, ServerTimings
from workers.loadgen.embeddings import EMBEDDINGS_API, embeddings_body, read_embeddings
from workers.loadgen.embeddings import ROUTE as EMBEDDINGS_ROUTE
from workers.loadgen.transport import READS, SLOT, SlotBody, read_whole

_NS = 1e-9


class _Delta(msgspec.Struct):
    content: str | None = None
    reasoning_content: str | None = None
    reasoning: str | None = None


class _Choice(msgspec.Struct):
    delta: _Delta | None = None
    message: _Delta | None = None
    text: str | None = None
    finish_reason: str | None = None


class _PromptDetails(msgspec.Struct):
    cached_tokens: int | None = None


class _Usage(msgspec.Struct):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    prompt_tokens_details: _PromptDetails | None = None


class _Timings(msgspec.Struct):
    """llama.cpp's own per-request timings, sent with the final events (its server's
    `timings` object): prompt_n tokens prefilled (cached ones excluded) in prompt_ms,
    predicted_n tokens generated, predicted_per_token_ms = predicted_ms / (predicted_n - 1),
    cache_n prompt tokens served from its cache."""

    prompt_n: int | None = None
    prompt_ms: float | None = None
    predicted_n: int | None = None
    predicted_ms: float | None = None
    predicted_per_token_ms: float | None = None
    cache_n: int | None = None


class _Event(msgspec.Struct):
    choices: list[_Choice] = []
    usage: _Usage | None = None
    timings: _Timings | None = None
    error: Any = None


_decode_event = msgspec.json.Decoder(_Event).decode
# All the events of one read decoded in one call (see _parse_all).
_decode_events = msgspec.json.Decoder(list[_Event]).decode


class RawRequest:
    """One request's observations in perf_counter_ns, filled in place on the hot path."""

    __slots__ = (
        "cached_tokens",
        "chunk_ns",
        "chunk_tokens",
        "count_source",
        "error",
        "error_class",
        "finished",
        "keep_answer",
        "llamacpp_timings",
        "n_in",
        "n_in_target",
        "n_out",
        "seq",
        "server",
        "status",
        "t_content",
        "t_end",
        "t_first_byte",
        "t_last_read",
        "t_sched",
        "t_send",
        "t_slot",
        "text",
        "tokens_at_chunk",
        "warmup",
    )

    def __init__(
        self,
        seq: int,
        warmup: bool,
        t_sched: int,
        n_in_local: int,
        *,
        keep_text: bool = False,
        keep_answer: bool = False,
    ) -> None:
        self.seq = seq
        self.warmup = warmup
        self.t_sched = t_sched
        self.t_send = t_sched
        # When a load.max_concurrency slot let it go (open loop with a cap); None without one.
        self.t_slot: int | None = None
        self.t_first_byte: int | None = None
        # The stamp of the body's latest read: its end when no [DONE] came.
        self.t_last_read: int | None = None
        self.t_content: int | None = None
        self.t_end: int | None = None
        self.chunk_ns: list[int] = []
        # Tokens per content event from continuous usage; emptied unless every event said.
        self.chunk_tokens: list[int] = []
        self.tokens_at_chunk = 0
        self.n_in: int | None = n_in_local
        self.n_in_target = n_in_local
        self.n_out = 0
        self.count_source = "events"
        self.status: int | None = None
        self.error_class: str | None = None
        self.error: str | None = None
        # A choice's finish_reason arrived: the stream ended properly even without [DONE].
        self.finished = False
        # Prompt tokens the server says came from its prefix cache (usage or its timings).
        self.cached_tokens: int | None = None
        # The server's own timings of this request, where it reports them (ServerTimings);
        # llama.cpp's come in its events, kept as sent until the body ends (_settle_timings).
        self.server: ServerTimings | None = None
        self.llamacpp_timings: _Timings | None = None
        # The received text, kept only to count it with the endpoint's tokenizer when the
        # server sent no usage (dropped by the first event that carries usage); None: not
        # collected.
        # keep_answer keeps the text even with usage: a multi-turn session sends it back as
        # the assistant's message of the next turn.
        self.keep_answer = keep_answer
        self.text: list[str] | None = [] if keep_text or keep_answer else None

    def timing(self, origin_ns: int) -> RequestTiming:
        """The request in seconds from `origin_ns`, as the metric definitions take it."""
        return RequestTiming(
            seq=self.seq,
            warmup=self.warmup,
            t_sched=(self.t_sched - origin_ns) * _NS,
            t_send=(self.t_send - origin_ns) * _NS,
            cap_wait=None if self.t_slot is None else (self.t_slot - self.t_sched) * _NS,
            t_first_byte=None
            if self.t_first_byte is None
            else (self.t_first_byte - origin_ns) * _NS,
            t_end=None if self.t_end is None else (self.t_end - origin_ns) * _NS,
            chunk_times=[(t - origin_ns) * _NS for t in self.chunk_ns],
            n_in=self.n_in,
            n_out=self.n_out,
            count_source=self.count_source,
            status=self.status,
            error_class=self.error_class,
            error=self.error,
            t_first_content=None if self.t_content is None else (self.t_content - origin_ns) * _NS,
            chunk_tokens=list(self.chunk_tokens) if self.chunk_tokens else None,
            n_in_target=self.n_in_target,
            cached_tokens=self.cached_tokens,
            server=self.server,
        )


_DONE = b"[DONE]"


#: What an event carries (`_scan`): no text, reasoning text only, or visible content; and,
#: as a flag beside it, whether a choice finished (carried a finish_reason).
_NO_TEXT, _REASONING, _CONTENT = 0, 1, 2
_TEXT, _FINISHED = 3, 4


def _scan(event: _Event, keep: list[str] | None) -> int:
    """What text an event carries: content (chat) or text (completions) is visible output,
    reasoning_content / reasoning is reasoning; `| _FINISHED` when a choice has a
    finish_reason. Its text is appended to `keep` when given."""
    kind = _NO_TEXT
    finished = 0
    for choice in event.choices:
        if choice.finish_reason:
            finished = _FINISHED
        if choice.text:
            kind = _CONTENT
            if keep is not None:
                keep.append(choice.text)
            continue
        part = choice.delta or choice.message
        if part is None:
            continue
        reasoning = part.reasoning_content or part.reasoning
        if reasoning:
            kind = kind or _REASONING
            if keep is not None:
                keep.append(reasoning)
        if part.content:
            kind = _CONTENT
            if keep is not None:
                keep.append(part.content)
    return kind | finished


@dataclass(frozen=True, slots=True)
class Target:
    """Where and how to send: the full URL of the generation route, headers, limits."""

    url: str
    base_url: str
    api: str
    model: str
    headers: dict[str, str]
    timeout_s: float
    engine: str | None = None

    @classmethod
    def for_endpoint(
        cls,
        base_url: str,
        api: str,
        model: str,
        api_key: str | None,
        timeout_s: float,
        *,
        engine: str | None = None,
    ) -> Target:
        """The target for a registered endpoint (base_url ends before /chat/completions)."""
        route = "/chat/completions" if api == "openai-chat" else "/completions"
        # identity: a compressed stream could not be stamped read by read (_read_stream).
        headers = {
            "Content-Type": "application/json",
            "Accept": "text/event-stream",
            "Accept-Encoding": "identity",
        }
        if api == EMBEDDINGS_API:
            route, headers["Accept"] = EMBEDDINGS_ROUTE, "application/json"
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        return cls(base_url.rstrip("/") + route, base_url, api, model, headers, timeout_s, engine)

    @property
    def continuous_usage(self) -> bool:
        """Whether to ask for usage on every event (vLLM's `continuous_usage_stats`): only
        vLLM knows the option, and other servers may reject a field they do not know."""
        return (self.engine or "").strip().lower() == "vllm"


async def open_connections(client: httpx.AsyncClient, target: Target, count: int) -> None:
    """Open the connections of slots 0..count-1 before a level's clock starts.

    Each is a GET of the OpenAI `/models` route on that slot. Connection setup (and the
    client's first-use costs) then never shows up as the level's queue delay or TTFT.
    Failures are ignored: the level's own requests report them with their error class.
    """
    url = target.base_url.rstrip("/") + "/models"
    headers = {k: v for k, v in target.headers.items() if k == "Authorization"}
    timeout = httpx.Timeout(5.0)

    async def one(slot: int) -> None:
        with contextlib.suppress(httpx.HTTPError):
            response = await client.get(
                url, headers=headers, timeout=timeout, extensions={SLOT: slot}
            )
            await response.aclose()

    await asyncio.gather(*(one(slot) for slot in range(count)))


def request_body(
    target: Target,
    prompt: str,
    max_tokens: int,
    *,
    stream: bool,
    ignore_eos: bool,
    temperature: float | None,
    messages: list[dict[str, Any]] | None = None,
) -> bytes:
    """The JSON body for one request, asking for usage in the stream (on every event too,
    where the engine is vLLM, so an event that carries several tokens says how many).
    Chat endpoints get `messages` when given (a dataset's chat item), else `prompt` as
    one user message. An embeddings endpoint gets `prompt` as its one input."""
    if target.api == EMBEDDINGS_API:
        return embeddings_body(target.model, prompt)
    body: dict[str, Any] = {"model": target.model, "max_tokens": max_tokens, "stream": stream}
    if target.api == "openai-chat":
        body["messages"] = messages or [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    if stream:
        options: dict[str, bool] = {"include_usage": True}
        if target.continuous_usage:
            options["continuous_usage_stats"] = True
        body["stream_options"] = options
    if ignore_eos:
        body["ignore_eos"] = True
    if temperature is not None:
        body["temperature"] = temperature
    return msgspec.json.encode(body)


class _Failure(Exception):
    """A request that failed in a known way: an error class of METRICS.md and a reason."""

    def __init__(self, error_class: str, reason: str) -> None:
        super().__init__(reason)
        self.error_class = error_class
        self.reason = reason


def _connect_reason(exc: BaseException, base_url: str) -> str:
    cause: BaseException | None = exc
    while cause is not None:
        if (
            isinstance(cause, ConnectionRefusedError)
            or getattr(cause, "errno", None) == errno.ECONNREFUSED
        ):
            return f"connection refused at {base_url}"
        cause = cause.__cause__ or cause.__context__
    text = str(exc) or type(exc).__name__
    if "refused" in text.lower() or "all connection attempts failed" in text.lower():
        return f"connection refused at {base_url}"
    return f"cannot connect to {base_url}: {text}"


def _http_reason(status: int, body: bytes) -> str:
    message = body[:300].decode("utf-8", "replace").strip()
    try:
        parsed = msgspec.json.decode(body)
        if isinstance(parsed, dict) and isinstance(parsed.get("error"), dict):
            message = str(parsed["error"].get("message") or message)
        elif isinstance(parsed, dict) and "detail" in parsed:
            message = str(parsed["detail"])
    except msgspec.DecodeError:
        pass
    return f"HTTP {status}: {message[:300]}" if message else f"HTTP {status}"


async def _read_stream(response: httpx.Response, rec: RawRequest, ns: list[int]) -> None:
    """Consume an SSE body; `ns` collects content-event arrival times (perf_counter_ns).

    After [DONE] the rest of the body is drained unparsed: a body left unread makes httpx
    close the connection, and a new connection per request would cost the client dearly.
    A body that ends without [DONE] or a choice's finish_reason broke off (METRICS.md).
    """
    reads = response.extensions.get(READS)
    if isinstance(reads, SlotBody) and "content-encoding" not in response.headers:
        error_event = await _read_stamped(reads, rec, ns)
    else:
        # The shared pool, a proxy, or a compressed body: stamped as httpx hands it on.
        error_event = await _read_chunks(response, rec, ns)
    _settle_timings(rec)
    if rec.t_end is None:
        # No [DONE]: the body ended with its last read (or now, when nothing came).
        rec.t_end = rec.t_last_read or perf_counter_ns()
        if error_event:
            raise _Failure("protocol", "the server sent an error event and closed the stream")
        if not rec.finished:
            raise _Failure(
                "stream_broken",
                "the stream ended without [DONE] or a finish_reason (the body just stopped)",
            )


async def _read_stamped(reads: SlotBody, rec: RawRequest, ns: list[int]) -> bool:
    """The body as the slot's stamped reads: each event gets the stamp of the read that
    completed it. Returns whether an `event: error` still waited for its data line."""
    pending = b""
    error_event = False
    while (batch := await reads.next_reads()) is not None:
        if rec.t_end is not None:
            continue
        stamps, pieces = batch
        if rec.t_first_byte is None:
            rec.t_first_byte = stamps[0]
        rec.t_last_read = stamps[-1]
        i, count = 0, len(stamps)
        while i < count and rec.t_end is None:
            now = stamps[i]
            j = i + 1
            # Pieces of one read (HTTP chunks) are parsed together, as one read.
            while j < count and stamps[j] == now:
                j += 1
            chunk = pieces[i] if j == i + 1 else b"".join(pieces[i:j])
            i = j
            read = pending + chunk if pending else chunk
            lines = read.split(b"\n")
            pending = lines.pop()
            if error_event or b"event:" in read:
                # Named events are rare (an engine's `event: error`): a slower path reads them.
                error_event = _feed_named(lines, rec, ns, now, error_event)
            else:
                _feed(lines, rec, ns, now)
    return error_event


async def _read_chunks(response: httpx.Response, rec: RawRequest, ns: list[int]) -> bool:
    """The body as httpx hands it on, each piece stamped as it comes out. Returns whether
    an `event: error` still waited for its data line."""
    pending = b""
    error_event = False
    body = cast(AsyncGenerator[bytes, None], response.aiter_bytes())
    async with contextlib.aclosing(body) as chunks:
        async for chunk in chunks:
            now = perf_counter_ns()
            if rec.t_end is not None:
                continue
            if rec.t_first_byte is None:
                rec.t_first_byte = now
            rec.t_last_read = now
            read = pending + chunk if pending else chunk
            lines = read.split(b"\n")
            pending = lines.pop()
            if error_event or b"event:" in read:
                error_event = _feed_named(lines, rec, ns, now, error_event)
            else:
                _feed(lines, rec, ns, now)
    return error_event


def _feed(lines: list[bytes], rec: RawRequest, ns: list[int], now: int) -> None:
    """Handle the complete lines of one read, all arrived at `now`; [DONE] sets t_end."""
    if len(lines) <= 2:  # one event and its blank line: the usual read at a steady pace
        for line in lines:
            if line.startswith(b"data:"):
                payload = line[5:].strip()
                if payload == _DONE:
                    rec.t_end = now
                    return
                _on_event(_parse(payload), rec, ns, now)
        return
    payloads = [line[5:].strip() for line in lines if line.startswith(b"data:")]
    done = _DONE in payloads
    if done:
        del payloads[payloads.index(_DONE) :]
    for event in _parse_all(payloads):
        _on_event(event, rec, ns, now)
    if done:
        rec.t_end = now


def _feed_named(
    lines: list[bytes], rec: RawRequest, ns: list[int], now: int, error_event: bool
) -> bool:
    """`_feed` for reads with SSE `event:` fields: the data of an `event: error` is the
    server's error, a `protocol` failure (METRICS.md); other event names are read as data.
    Returns whether an error event still waits for its data line."""
    for line in lines:
        if line.startswith(b"event:"):
            error_event = line[6:].strip() == b"error"
        elif not line.strip():
            error_event = False  # a blank line ends the event, and its name with it
        elif line.startswith(b"data:"):
            payload = line[5:].strip()
            if error_event:
                raise _Failure("protocol", f"the server sent an error event: {_excerpt(payload)}")
            if payload == _DONE:
                rec.t_end = now
                return False
            _on_event(_parse(payload), rec, ns, now)
    return error_event


def _excerpt(payload: bytes) -> str:
    """A short, printable excerpt of what a server sent, for an error message."""
    text = payload[:300].decode("utf-8", "replace")
    return "".join(ch if ch.isprintable() else " " for ch in text).strip()


def _parse_all(payloads: list[bytes]) -> Iterable[_Event]:
    """The events of one read, in order. One msgspec call for all of them costs far less
    than one per event when a read brings many (bench/loadgen.py); if that fails, or joins
    malformed pieces into a different number of events, each is parsed alone so the first
    bad one raises its own error after the good ones before it were counted."""
    if len(payloads) > 1:
        try:
            events = _decode_events(b"[" + b",".join(payloads) + b"]")
        except msgspec.DecodeError:
            pass
        else:
            if len(events) == len(payloads):
                for event in events:
                    if event.error is not None:
                        break
                else:
                    return events
    return map(_parse, payloads)


def _parse(payload: bytes) -> _Event:
    try:
        event = _decode_event(payload)
    except msgspec.DecodeError as exc:
        raise _Failure("protocol", f"malformed event: {str(exc)[:200]}") from None
    if event.error is not None:
        raise _Failure(
            "protocol", f"the server sent an error: {_excerpt(str(event.error).encode())}"
        )
    return event


def _on_event(event: _Event, rec: RawRequest, ns: list[int], now: int) -> None:
    scanned = _scan(event, rec.text)
    kind = scanned & _TEXT
    if kind:
        ns.append(now)
        if kind == _CONTENT and rec.t_content is None:
            rec.t_content = now
    if scanned & _FINISHED:
        rec.finished = True
    if event.timings is not None:
        # Kept as sent; turned into ServerTimings once, when the request ends.
        rec.llamacpp_timings = event.timings
    usage = event.usage
    if usage is not None:
        completion = usage.completion_tokens
        if completion is not None:
            if kind:
                # Continuous usage: the tokens this event carried (and any that came in
                # events without text since the last one that had text).
                rec.chunk_tokens.append(completion - rec.tokens_at_chunk)
                rec.tokens_at_chunk = completion
            rec.n_out = completion
            rec.count_source = "usage"
            if not rec.keep_answer:
                # Counted by the server: the text is no longer needed, and later events
                # skip collecting it.
                rec.text = None
        if usage.prompt_tokens is not None:
            rec.n_in = usage.prompt_tokens
        details = usage.prompt_tokens_details
        if details is not None and details.cached_tokens is not None:
            rec.cached_tokens = details.cached_tokens


def _settle_timings(rec: RawRequest) -> None:
    """At the body's end: llama.cpp's own timings of the request, from the last event that
    carried them, and its cached prompt tokens when usage did not say."""
    timings = rec.llamacpp_timings
    if timings is None:
        return
    rec.server = ServerTimings(
        source="llamacpp",
        prefill_ms=timings.prompt_ms,
        per_token_ms=timings.predicted_per_token_ms,
        n_out=timings.predicted_n,
        n_prefilled=timings.prompt_n,
    )
    if rec.cached_tokens is None and timings.cache_n is not None:
        rec.cached_tokens = timings.cache_n


async def _read_whole(response: httpx.Response, rec: RawRequest, ns: list[int]) -> None:
    """Consume a non-streamed JSON body: the whole text arrives at once, at the read that
    completed it (on a slot's connection; else when httpx has it all), and its first byte
    at the first read."""
    body, rec.t_first_byte, rec.t_end = await read_whole(response)
    try:
        event = _decode_event(body)
    except msgspec.DecodeError as exc:
        raise _Failure("protocol", f"malformed response body: {str(exc)[:200]}") from None
    _on_event(event, rec, ns, rec.t_end)
    _settle_timings(rec)


#: TGI's timing headers (ms, whole numbers), sent with responses that are not streamed.
_TGI_TIMING_HEADER = "x-time-per-token"


def _tgi_timings(headers: httpx.Headers) -> ServerTimings:
    """The server's own timings from TGI's response headers: time in its queue, time per
    generated token, tokens generated; each None when its header is absent or not a number."""

    def number(name: str) -> float | None:
        value = headers.get(name)
        try:
            return None if value is None else float(value)
        except ValueError:
            return None

    generated = number("x-generated-tokens")
    return ServerTimings(
        source="tgi",
        per_token_ms=number(_TGI_TIMING_HEADER),
        queue_ms=number("x-queue-time"),
        n_out=None if generated is None else int(generated),
    )


async def _status_failure(response: httpx.Response, rec: RawRequest) -> _Failure:
    """The failure for a non-2xx answer, with the server's own message."""
    detail = await response.aread()
    rec.t_end = perf_counter_ns()
    status = response.status_code
    if status < 400:
        # Redirects are not followed: a benchmark must time the server that answers.
        where = response.headers.get("location", "elsewhere")
        return _Failure("http_4xx", f"HTTP {status}: redirected to {where}; register that URL")
    return _Failure("http_4xx" if status < 500 else "http_5xx", _http_reason(status, detail))


async def _exchange(
    client: httpx.AsyncClient,
    target: Target,
    body: bytes,
    rec: RawRequest,
    *,
    stream: bool,
    slot: int | None,
) -> None:
    """Send, check the status, read the body; failures raise."""

    async def trace(event: str, _info: object) -> None:
        # httpcore announces each step; t_send is "just before the request is written to the
        # connection" (METRICS.md), so time spent waiting for the pool or for this process's
        # own event loop counts as queue delay, not as server latency.
        if event == "http11.send_request_headers.started":
            rec.t_send = perf_counter_ns()

    # Provisional, until the trace above fires.
    rec.t_send = perf_counter_ns()
    extensions = {"trace": trace, SLOT: slot}
    async with client.stream(
        "POST", target.url, content=body, headers=target.headers, extensions=extensions
    ) as response:
        rec.status = response.status_code
        if response.status_code >= 300:
            raise await _status_failure(response, rec)
        if target.api == EMBEDDINGS_API:
            # One JSON body and no tokens out: no event to wait for (embeddings.py).
            failed = await read_embeddings(response, rec)
            if failed is not None:
                raise _Failure(*failed)
            return
        if _TGI_TIMING_HEADER in response.headers:
            rec.server = _tgi_timings(response.headers)
        if stream:
            await _read_stream(response, rec, rec.chunk_ns)
        else:
            await _read_whole(response, rec, rec.chunk_ns)
    if not rec.chunk_ns:
        raise _Failure("empty", "the response carried no tokens")


async def send(
    client: httpx.AsyncClient,
    target: Target,
    body: bytes,
    rec: RawRequest,
    *,
    stream: bool,
    slot: int | None = None,
) -> None:
    """Send one request and fill `rec` in place; never raises for the request's own failures.

    `slot` picks the connection (see workers/loadgen/transport.py); None uses a shared pool.
    """
    fallback_in = rec.n_in
    rec.n_in = None
    try:
        async with asyncio.timeout(target.timeout_s):
            await _exchange(client, target, body, rec, stream=stream, slot=slot)
    except _Failure as failure:
        rec.error_class = failure.error_class
        rec.error = failure.reason
    except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
        rec.error_class = "connect"
        rec.error = _connect_reason(exc, target.base_url)
    except (TimeoutError, httpx.TimeoutException):
        rec.error_class = "timeout"
        rec.error = f"no complete response within {target.timeout_s:g} s"
    except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as exc:
        rec.error_class = "stream_broken"
        rec.error = f"the connection broke mid-response: {str(exc)[:200] or type(exc).__name__}"
    except httpx.HTTPError as exc:
        rec.error_class = "stream_broken"
        rec.error = f"{type(exc).__name__}: {str(exc)[:200]}"
    if rec.t_end is None and rec.error_class is not None:
        rec.t_end = perf_counter_ns()
    if rec.count_source != "usage":
        # Counted from the events for now; the runner may replace it with the endpoint's
        # tokenizer count of `rec.text` after the level, off the timed path.
        rec.n_out = len(rec.chunk_ns)
        rec.count_source = "events"
    if len(rec.chunk_tokens) != len(rec.chunk_ns):
        rec.chunk_tokens.clear()  # only some events said how many tokens they carried
    if rec.n_in is None:
        rec.n_in = fallback_in
