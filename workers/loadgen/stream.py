"""One request to an OpenAI-compatible endpoint, timed per docs/figures.md.

This is the hot path. Timestamps come from `time.perf_counter_ns` as bytes arrive and nothing
is logged per event. Every streamed body, whatever brought it, is read by one loop
(`_read_events`) feeding one reader (infercost/engines/reader.py, which the endpoint check
uses too): the loop takes stamped reads, `(stamps, pieces)`, from wherever the bytes come.

- On a slot's connection (workers/loadgen/transport.py) a streamed request is written
  straight to the connection (`_direct`: no httpx request or response) and each piece of
  the body keeps the stamp of the socket read that brought it, taken in the transport's data
  callback, not when this coroutine got round to it.
- Through the shared pool, a proxy or a compressed body, httpx hands the body on and each
  piece is stamped as it comes out (`_HttpxReads`).

The request's body comes from infercost/engines/requests.py, the one builder of generation
requests, and a refusal is explained by infercost/engines/diagnosis.py, as the check explains
it.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import zlib
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass
from time import perf_counter_ns
from typing import Any, Protocol, cast

import httpx
import msgspec

from infercost.engines.catalog import engine_of
from infercost.engines.diagnosis import connect_diagnosis, http_diagnosis
from infercost.engines.reader import (
    RawRequest,
    RequestFailure,
    StreamReader,
    decode_event,
    judge,
    on_event,
    settle_timings,
)
from infercost.engines.requests import generation_body
from infercost.figures.metrics import ServerTimings
from infercost.net.redact import CREDENTIALS, Redactor
from workers.loadgen.embeddings import EMBEDDINGS_API, embeddings_body, read_embeddings
from workers.loadgen.embeddings import ROUTE as EMBEDDINGS_ROUTE
from workers.loadgen.transport import (
    CONNECT_TIMEOUT_S,
    READS,
    SLOT,
    LoadClient,
    SlotBody,
    read_whole,
)

__all__ = ["RawRequest", "Target", "open_connections", "read_stream", "request_body", "send"]


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
    # Masks the endpoint's secrets in whatever the server sends back (infercost/net/redact.py):
    # every request's error passes it before it is kept.
    redact: Redactor = CREDENTIALS

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
        # identity: a compressed stream could not be stamped read by read.
        headers = {
            "Content-Type": "application/json",
            "Accept": "text/event-stream",
            "Accept-Encoding": "identity",
        }
        if api == EMBEDDINGS_API:
            route, headers["Accept"] = EMBEDDINGS_ROUTE, "application/json"
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        return cls(
            base_url.rstrip("/") + route,
            base_url,
            api,
            model,
            headers,
            timeout_s,
            engine,
            Redactor.for_endpoint(api_key),
        )

    @property
    def continuous_usage(self) -> bool:
        """Whether usage is asked for on every event (vLLM's `continuous_usage_stats`): only
        engines that know the option, since others may refuse a field they do not know."""
        known = engine_of(self.engine)
        return known is not None and known.continuous_usage


async def open_connections(client: httpx.AsyncClient, target: Target, count: int) -> None:
    """Open the connections of slots 0..count-1 before a level's clock starts.

    Each is a GET of the OpenAI `/models` route on that slot. Connection setup (and the
    client's first-use costs) then never shows up as the level's queue delay or TTFT.
    Failures are ignored: the level's own requests report them with their error class.
    """
    url = target.base_url.rstrip("/") + "/models"
    headers = {k: v for k, v in target.headers.items() if k in ("Authorization", "Host")}
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
    model: str | None = None,
    features: dict[str, Any] | None = None,
) -> bytes:
    """The JSON body for one request (infercost/engines/requests.py): usage asked for in the
    stream, an exact length asked the engine's way when `ignore_eos`. Chat endpoints get
    `messages` when given (a dataset's chat item), else `prompt` as one user message. An
    embeddings endpoint gets `prompt` as its one input. `model` (one of workload.models)
    replaces the endpoint's."""
    if target.api == EMBEDDINGS_API:
        return embeddings_body(model or target.model, prompt)
    return generation_body(
        api=target.api,
        model=model or target.model,
        engine=target.engine,
        prompt=prompt,
        max_tokens=max_tokens,
        stream=stream,
        exact_length=ignore_eos,
        temperature=temperature,
        messages=messages,
        features=features,
    )


def _connect_reason(exc: BaseException, base_url: str) -> str:
    tls = connect_diagnosis(exc, base_url)
    if tls is not None:
        return tls
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


class _Reads(Protocol):
    """A body as stamped reads: the pieces that arrived since the last call, each with the
    perf_counter_ns of its read; None once the body is whole."""

    async def next_reads(self) -> tuple[list[int], list[bytes]] | None: ...


class _HttpxReads:
    """A body as httpx hands it on (the shared pool, a proxy, a decompressed body), each
    piece stamped as it comes out."""

    __slots__ = ("_chunks",)

    def __init__(self, chunks: AsyncIterator[bytes]) -> None:
        self._chunks = chunks

    async def next_reads(self) -> tuple[list[int], list[bytes]] | None:
        try:
            chunk = await anext(self._chunks)
        except StopAsyncIteration:
            return None
        return [perf_counter_ns()], [chunk]


class _Inflated:
    """A slot's body with a content-encoding, inflated piece by piece (stamps kept): servers
    that compress although asked for identity."""

    __slots__ = ("_body", "_inflate")

    def __init__(self, body: _Reads, encoding: str) -> None:
        if encoding not in ("gzip", "deflate", "x-gzip"):
            raise RequestFailure(
                "protocol",
                f"the server compressed the stream with {encoding} although asked for "
                "identity: infercost reads gzip and deflate only",
            )
        self._body = body
        # 32 + MAX_WBITS: a gzip or a zlib header, whichever it is.
        self._inflate = zlib.decompressobj(32 + zlib.MAX_WBITS)

    async def next_reads(self) -> tuple[list[int], list[bytes]] | None:
        batch = await self._body.next_reads()
        if batch is None:
            return None
        stamps, pieces = batch
        try:
            return stamps, [self._inflate.decompress(p) for p in pieces]
        except zlib.error as exc:
            reason = f"a compressed body that does not inflate: {exc}"
            raise RequestFailure("protocol", reason) from None


async def _read_events(reads: _Reads, reader: StreamReader) -> None:
    """The one read loop: every stamped read into the reader until the body ends."""
    while (batch := await reads.next_reads()) is not None:
        stamps, pieces = batch
        reader.feed_reads(stamps, pieces)
    reader.finish(perf_counter_ns())


#: TGI's timing headers (ms, whole numbers), sent with responses that are not streamed.
_TGI_TIMING_HEADER = "x-time-per-token"
_TGI_HEADERS = frozenset({b"x-time-per-token", b"x-queue-time", b"x-generated-tokens"})


def _tgi_timings(value: Any) -> ServerTimings:
    """The server's own timings from TGI's response headers (`value(name)` reads one): time
    in its queue, time per generated token, tokens generated; each None when its header is
    absent or not a number."""

    def number(name: str) -> float | None:
        text = value(name)
        try:
            return None if text is None else float(text)
        except ValueError:
            return None

    generated = number("x-generated-tokens")
    return ServerTimings(
        source="tgi",
        per_token_ms=number(_TGI_TIMING_HEADER),
        queue_ms=number("x-queue-time"),
        n_out=None if generated is None else int(generated),
    )


def _refusal(
    status: int,
    body: bytes,
    target: Target,
    location: str | None = None,
    content_type: str | None = None,
) -> RequestFailure:
    """The failure for a non-2xx answer, explained as the endpoint check explains it."""
    if status < 400:
        # Redirects are not followed: a benchmark must time the server that answers.
        # The new address, cut short: a header is the upstream's text too.
        where = (location or "elsewhere")[:200]
        reason = f"HTTP {status}: redirected to {where}; register that URL"
        return RequestFailure("http_4xx", reason)
    # Masked before it is read and cut short: an upstream may echo the key it was sent.
    reason = http_diagnosis(
        status,
        target.redact.raw(body),
        engine=target.engine,
        model=target.model,
        content_type=content_type,
    ).reason
    return RequestFailure("http_4xx" if status < 500 else "http_5xx", reason)


async def _direct(
    client: LoadClient, target: Target, body: bytes, rec: RawRequest, slot: int
) -> bool:
    """Send a streamed request straight on slot `slot`'s connection and read its answer;
    False (nothing sent) when a proxy applies to the URL or the slot is busy."""
    head = client.direct_head(target.url, target.headers)
    if head is None:
        return False
    conn_slot = client.slots.direct(slot)
    if conn_slot is None:
        return False

    def stamp() -> None:
        # t_send: just before the request is written (a re-send stamps it again).
        rec.t_send = perf_counter_ns()

    rec.t_send = perf_counter_ns()  # until the write stamps it
    conn = await conn_slot.open(head.origin, head.payload(body), CONNECT_TIMEOUT_S, None, stamp)
    reads = SlotBody(conn_slot, conn, None)
    try:
        rec.status = status = conn.parser.get_status_code()
        encoding = content_type = None
        for name, value in conn.headers:
            lowered = name.lower()
            if lowered == b"content-type":
                content_type = value.decode("latin-1").split(";")[0].strip()
            elif lowered == b"content-encoding":
                encoding = value.decode("latin-1").strip().lower()
            elif lowered in _TGI_HEADERS and rec.server is None:
                found = {n.lower().decode("latin-1"): v.decode("latin-1") for n, v in conn.headers}
                rec.server = _tgi_timings(found.get)
        if status >= 300:
            detail = bytearray()
            while (batch := await reads.next_reads()) is not None:
                for piece in batch[1]:
                    detail += piece
            rec.t_end = perf_counter_ns()
            location = next(
                (v.decode("latin-1") for n, v in conn.headers if n.lower() == b"location"), None
            )
            raise _refusal(status, bytes(detail), target, location, content_type)
        source: _Reads = reads if encoding in (None, "identity") else _Inflated(reads, encoding)
        await _read_events(source, StreamReader(rec, content_type=content_type))
    finally:
        await reads.aclose()
    return True


async def _read_whole(response: httpx.Response, rec: RawRequest) -> None:
    """Consume a non-streamed JSON body: the whole text arrives at once, at the read that
    completed it (on a slot's connection; else when httpx has it all), and its first byte
    at the first read."""
    body, rec.t_first_byte, rec.t_end = await read_whole(response)
    try:
        event = decode_event(body)
    except msgspec.DecodeError as exc:
        raise RequestFailure("protocol", f"malformed response body: {str(exc)[:200]}") from None
    if rec.parts is not None:
        rec.parts.take(event)
    on_event(event, judge(event, rec.text), rec, rec.t_end)
    settle_timings(rec)


async def _exchange(
    client: httpx.AsyncClient,
    target: Target,
    body: bytes,
    rec: RawRequest,
    *,
    stream: bool,
    slot: int | None,
) -> None:
    """Send through httpx, check the status, read the body; failures raise."""

    async def trace(event: str, _info: object) -> None:
        # httpcore announces each step; t_send is "just before the request is written to the
        # connection" (docs/figures.md), so time spent waiting for the pool or for this process's
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
            detail = await response.aread()
            rec.t_end = perf_counter_ns()
            raise _refusal(
                response.status_code,
                detail,
                target,
                response.headers.get("location"),
                response.headers.get("content-type"),
            )
        if target.api == EMBEDDINGS_API:
            # One JSON body and no tokens out: no event to wait for (embeddings.py).
            failed = await read_embeddings(response, rec)
            if failed is not None:
                raise RequestFailure(*failed)
            return
        if _TGI_TIMING_HEADER in response.headers:
            rec.server = _tgi_timings(response.headers.get)
        if stream:
            await read_stream(response, rec)
        else:
            await _read_whole(response, rec)


async def read_stream(response: httpx.Response, rec: RawRequest) -> None:
    """Read a 2xx streamed answer that came through httpx into `rec`: on a slot's connection
    as its stamped reads, else (the shared pool, a proxy, a compressed body) stamped as httpx
    hands each piece on. RequestFailure when the stream failed."""
    reads = response.extensions.get(READS)
    content_type = response.headers.get("content-type", "").split(";")[0].strip() or None
    if isinstance(reads, SlotBody) and "content-encoding" not in response.headers:
        await _read_events(reads, StreamReader(rec, content_type=content_type))
        return
    chunks = cast(AsyncGenerator[bytes, None], response.aiter_bytes())
    async with contextlib.aclosing(chunks):
        await _read_events(_HttpxReads(chunks), StreamReader(rec, content_type=content_type))


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
            if not (
                stream
                and slot is not None
                and target.api != EMBEDDINGS_API
                and isinstance(client, LoadClient)
                and await _direct(client, target, body, rec, slot)
            ):
                await _exchange(client, target, body, rec, stream=stream, slot=slot)
        if not rec.chunk_ns and target.api != EMBEDDINGS_API:
            raise RequestFailure("empty", "the response carried no tokens")
    except RequestFailure as failure:
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
    if rec.error is not None:
        # Whatever the failure quotes (the server's words, a URL, an exception's text), no
        # secret of the endpoint's leaves here.
        rec.error = target.redact.text(rec.error)
    if rec.t_end is None and rec.error_class is not None:
        rec.t_end = perf_counter_ns()
    if rec.count_source != "usage":
        # Counted from the events for now; the runner may replace it with the endpoint's
        # tokenizer count of `rec.text` after the level, off the timed path.
        rec.n_out = len(rec.chunk_ns)
        rec.count_source = "events"
    if len(rec.chunk_tokens) != len(rec.chunk_ns):
        del rec.chunk_tokens[:]  # only some events said how many tokens they carried
    if rec.n_in is None:
        rec.n_in = fallback_in
