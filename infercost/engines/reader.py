"""The stream reader: one response's body, as stamped reads, into one request's observations.

Everything that reads an OpenAI-compatible stream uses it: the load generator for every
request of a job (workers/loadgen/stream.py, whatever transport brought the bytes) and the
endpoint check for its probe (infercost/endpoints/preflight.py), so a check and a job never
judge the same stream differently. Events are cut by the WHATWG rules
(infercost/engines/sse.py); what an event means follows docs/figures.md:

- an event's time is the stamp of the read that completed it (its blank line arrived);
- `data: [DONE]` ends the stream (t_end); a choice's `finish_reason` ends it properly too;
  a body that stops without either is `stream_broken`;
- an event of type `error`, or data holding an `error` object (vLLM, SGLang, llama.cpp) or
  string (transformers serve) or `"object": "error"` (older vLLM), is `protocol`, and so is
  data that is not JSON;
- content (chat `delta.content`, completions `text`), reasoning text (`reasoning_content`,
  `reasoning`) and tool-call deltas (a function's name or argument text) are output events.

Every event is decoded once into a struct of only what judges it (`Brief`: its choices'
text and finish_reason; usage, timings and errors left as raw bytes, unread), by msgspec's
C scanner, which skips everything else in the JSON; only an event whose raw usage, timings
or error is not null is decoded in full (`Event`). Byte scanning in Python was measured
first and cost more than that decode (bench/loadgen.py's parse section): 1.4 to 2.8 us a
190-byte event against 0.4 us. `decode_all` decodes every event in full, which tests use to
hold the brief decode to the full one. The structs are not tracked by the garbage collector
(they hold no cycles), so events leave no work for it.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from typing import Any, Final

import msgspec

from infercost.engines.diagnosis import MESSAGE_CHARS, server_message
from infercost.engines.sse import MESSAGE, SSEParser
from infercost.figures.metrics import RequestTiming, ServerTimings

_NS: Final = 1e-9


class RequestFailure(Exception):
    """A request that failed in a known way: an error class of docs/figures.md and a reason."""

    def __init__(self, error_class: str, reason: str) -> None:
        super().__init__(reason)
        self.error_class = error_class
        self.reason = reason


class _Function(msgspec.Struct, gc=False):
    name: str | None = None
    arguments: str | None = None


class _ToolCall(msgspec.Struct, gc=False):
    index: int | None = None
    function: _Function | None = None


class _Delta(msgspec.Struct, gc=False):
    content: str | None = None
    reasoning_content: str | None = None
    reasoning: str | None = None
    tool_calls: tuple[_ToolCall, ...] | None = None


class _Choice(msgspec.Struct, gc=False):
    delta: _Delta | None = None
    message: _Delta | None = None
    text: str | None = None
    finish_reason: str | None = None


class _PromptDetails(msgspec.Struct, gc=False):
    cached_tokens: int | None = None
    image_tokens: int | None = None


class _CompletionDetails(msgspec.Struct, gc=False):
    reasoning_tokens: int | None = None


class _Usage(msgspec.Struct, gc=False):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    prompt_tokens_details: _PromptDetails | None = None
    completion_tokens_details: _CompletionDetails | None = None


class LlamacppTimings(msgspec.Struct, gc=False):
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


class Event(msgspec.Struct):
    """The parts of a chunk (or of a whole answer) that any figure reads."""

    choices: tuple[_Choice, ...] = ()
    usage: _Usage | None = None
    timings: LlamacppTimings | None = None
    error: Any = None
    message: Any = None


#: The default of a Brief's raw fields: a key the event did not have leaves this very object
#: there (an `is` test), any value it had (null included) a Raw of its own.
_UNREAD: Final = msgspec.Raw(b"null")


class Brief(msgspec.Struct, gc=False):
    """What judges an event, and the rest unread: usage, timings, an error and a top-level
    message (older vLLM's `{"object": "error", "message"}`) as the raw bytes the server sent,
    `_UNREAD` itself when the event had no such key."""

    choices: tuple[_Choice, ...] = ()
    usage: msgspec.Raw = _UNREAD
    timings: msgspec.Raw = _UNREAD
    error: msgspec.Raw = _UNREAD
    message: msgspec.Raw = _UNREAD


decode_event: Final = msgspec.json.Decoder(Event).decode
_decode_brief: Final = msgspec.json.Decoder(Brief).decode
_decode_briefs: Final = msgspec.json.Decoder(list[Brief]).decode


class AnswerParts:
    """An answer's content and tool calls, put together from its events, for a request whose
    answer is judged after the level (workload.features tools, structured): collected only
    for such requests, from events that take the judged path (their text is kept)."""

    __slots__ = ("calls", "content")

    def __init__(self) -> None:
        self.content: list[str] = []
        # By the call's index: its name and its argument text, piece by piece.
        self.calls: dict[int, tuple[list[str], list[str]]] = {}

    def take(self, event: Event | Brief) -> None:
        """An event's answer text and tool-call deltas (reasoning left out)."""
        for choice in event.choices:
            part = choice.delta or choice.message
            if part is None:
                if choice.text:
                    self.content.append(choice.text)
                continue
            if part.content:
                self.content.append(part.content)
            for call in part.tool_calls or ():
                function = call.function
                if function is None:
                    continue
                name, arguments = self.calls.setdefault(call.index or 0, ([], []))
                if function.name:
                    name.append(function.name)
                if function.arguments:
                    arguments.append(function.arguments)

    def tool_calls(self) -> list[tuple[str, str]]:
        """Each call as (name, argument text), in index order."""
        return [("".join(n), "".join(a)) for _, (n, a) in sorted(self.calls.items())]


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
        "image_tokens",
        "keep_answer",
        "llamacpp_timings",
        "n_in",
        "n_in_target",
        "n_out",
        "n_reasoning",
        "parts",
        "reasoning_events",
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
        keep_parts: bool = False,
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
        # Arrays, not lists: numbers in an array are no objects for the garbage collector to
        # walk, and a level keeps thousands of requests alive until it ends.
        self.chunk_ns = array("q")
        # Tokens per content event from continuous usage; emptied unless every event said.
        self.chunk_tokens = array("q")
        self.tokens_at_chunk = 0
        self.n_in: int | None = n_in_local
        self.n_in_target = n_in_local
        self.n_out = 0
        # Events of reasoning text alone before the first answer content (reasoning models
        # think first), and the reasoning tokens usage reported
        # (completion_tokens_details.reasoning_tokens; None: it did not say).
        self.reasoning_events = 0
        self.n_reasoning: int | None = None
        self.count_source = "events"
        self.status: int | None = None
        self.error_class: str | None = None
        self.error: str | None = None
        # A choice's finish_reason arrived: the stream ended properly even without [DONE].
        self.finished = False
        # Prompt tokens the server says came from its prefix cache (usage or its timings).
        self.cached_tokens: int | None = None
        # Prompt tokens of its images, where usage says (prompt_tokens_details.image_tokens).
        self.image_tokens: int | None = None
        # The server's own timings of this request, where it reports them (ServerTimings);
        # llama.cpp's come in its events, kept as sent until the body ends (settle_timings).
        self.server: ServerTimings | None = None
        self.llamacpp_timings: LlamacppTimings | None = None
        # The received text, kept only to count it with the endpoint's tokenizer when the
        # server sent no usage (dropped by the first event that carries usage); None: not
        # collected. keep_answer keeps the text even with usage: a multi-turn session sends
        # it back as the assistant's message of the next turn.
        # keep_parts: the answer's content and tool calls apart (AnswerParts), judged after
        # the level; it keeps the text too, so every event takes the path that collects them.
        self.parts = AnswerParts() if keep_parts else None
        keep_answer = keep_answer or keep_parts
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
            image_tokens=self.image_tokens,
            server=self.server,
            **self._reasoning(origin_ns),
        )

    def _reasoning(self, origin_ns: int) -> dict[str, Any]:
        """The reasoning figures of the request (RequestTiming.n_reasoning and friends): its
        reasoning tokens from usage where the server counted them, else from its events of
        reasoning text (one token each, or what continuous usage said they carried)."""
        events = self.reasoning_events
        if not events and self.n_reasoning is None:
            return {}
        if self.n_reasoning is not None:
            tokens, source = self.n_reasoning, "usage"
        elif self.chunk_tokens and len(self.chunk_tokens) == len(self.chunk_ns):
            tokens, source = sum(self.chunk_tokens[:events]), "events"
        else:
            tokens, source = events, "events"
        return {
            "n_reasoning": min(tokens, self.n_out) if self.n_out else tokens,
            "reasoning_source": source,
            "t_first_reasoning": (self.chunk_ns[0] - origin_ns) * _NS if events else None,
        }


#: What an event carries: no text, reasoning text only, or visible content; and, as a flag
#: beside it, whether a choice finished (carried a finish_reason).
NO_TEXT, REASONING, CONTENT = 0, 1, 2
TEXT, FINISHED = 3, 4

_DONE: Final = b"[DONE]"
_ERROR_TYPE: Final = b"error"
_BRACE: Final = 0x7B  # "{"


def judge(event: Event | Brief, keep: list[str] | None) -> int:
    """What a decoded event carries; its text is appended to `keep` when given."""
    kind = NO_TEXT
    finished = 0
    for choice in event.choices:
        if choice.finish_reason:
            finished = FINISHED
        if choice.text:
            kind = CONTENT
            if keep is not None:
                keep.append(choice.text)
            continue
        part = choice.delta or choice.message
        if part is None:
            continue
        reasoning = part.reasoning_content or part.reasoning
        if reasoning:
            kind = kind or REASONING
            if keep is not None:
                keep.append(reasoning)
        if part.content:
            kind = CONTENT
            if keep is not None:
                keep.append(part.content)
        for call in part.tool_calls or ():
            function = call.function
            if function is not None and (function.name or function.arguments):
                kind = CONTENT
                if keep is not None and function.arguments:
                    keep.append(function.arguments)
    return kind | finished


def excerpt(payload: bytes | str) -> str:
    """A server's own error message, printable and cut short (ending in an ellipsis when cut),
    for an error message: only words the server meant as its message are quoted
    (infercost/engines/diagnosis.py keeps what an upstream's error may show)."""
    text = payload.decode("utf-8", "replace") if isinstance(payload, bytes) else payload
    text = "".join(ch if ch.isprintable() else " " for ch in text[: MESSAGE_CHARS + 1]).strip()
    return text if len(text) <= MESSAGE_CHARS else text[: MESSAGE_CHARS - 1] + "\u2026"


def parse(payload: bytes) -> Event:
    """An event's data decoded; RequestFailure("protocol") for data that is not a JSON
    object or that carries the server's error."""
    try:
        event = decode_event(payload)
    except msgspec.DecodeError as exc:
        if b"\xff" in payload or _invalid_utf8(payload):
            # The standard decodes the stream as UTF-8 with replacement characters.
            return parse(payload.decode("utf-8", "replace").encode())
        raise RequestFailure("protocol", f"malformed event: {str(exc)[:200]}") from None
    _raise_if_error(event.error, event.message, event.choices)
    return event


def _raise_if_error(error: Any, message: Any, choices: tuple[_Choice, ...]) -> None:
    """RequestFailure("protocol") for an event that is the server's error: an `error` that
    is not null (an object or a string), or a top-level `message` without choices (older
    vLLM's `{"object": "error", "message"}`)."""
    if error is not None:
        said = error.get("message") if isinstance(error, dict) else error
        if not isinstance(said, str) or not said:
            # An error object without a message: described, not quoted.
            raise RequestFailure("protocol", "the server sent an error without a message")
        raise RequestFailure("protocol", f"the server sent an error: {excerpt(said)}")
    if message is not None and not choices:
        said = excerpt(message) if isinstance(message, str) else "no message text"
        raise RequestFailure("protocol", f"the server sent an error: {said}")


_decode_any: Final = msgspec.json.Decoder().decode
_decode_usage: Final = msgspec.json.Decoder(_Usage | None).decode
_decode_timings: Final = msgspec.json.Decoder(LlamacppTimings | None).decode


def _carrying(brief: Brief) -> Event:
    """The whole event from its brief decode: the raw usage, timings, error and message read
    now (RequestFailure as `parse` would raise it)."""
    try:
        error = None if brief.error is _UNREAD else _decode_any(brief.error)
        message = None if brief.message is _UNREAD else _decode_any(brief.message)
        _raise_if_error(error, message, brief.choices)
        return Event(
            choices=brief.choices,
            usage=None if brief.usage is _UNREAD else _decode_usage(brief.usage),
            timings=None if brief.timings is _UNREAD else _decode_timings(brief.timings),
        )
    except msgspec.DecodeError as exc:
        raise RequestFailure("protocol", f"malformed event: {str(exc)[:200]}") from None


def _invalid_utf8(payload: bytes) -> bool:
    try:
        payload.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


def mark(kind: int, rec: RawRequest, now: int) -> None:
    """Record what an event of `kind` (from `judge`) arriving at `now` says of the request:
    text stamped (reasoning before the first content counted), the end of the answer."""
    if kind & TEXT:
        rec.chunk_ns.append(now)
        if rec.t_content is None:
            if kind & CONTENT:
                rec.t_content = now
            else:
                rec.reasoning_events += 1
    if kind & FINISHED:
        rec.finished = True


def on_event(event: Event, kind: int, rec: RawRequest, now: int) -> None:
    """Record a decoded event (its `kind` from `judge`) arriving at `now`."""
    mark(kind, rec, now)
    if event.timings is not None:
        # Kept as sent; turned into ServerTimings once, when the request ends.
        rec.llamacpp_timings = event.timings
    if event.usage is not None:
        _on_usage(event.usage, kind, rec)


def _on_usage(usage: _Usage, kind: int, rec: RawRequest) -> None:
    """Record what an event's usage says: output and prompt tokens, cached prompt tokens and
    reasoning tokens."""
    completion = usage.completion_tokens
    if completion is not None:
        if kind & TEXT:
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
    if details is not None:
        if details.cached_tokens is not None:
            rec.cached_tokens = details.cached_tokens
        if details.image_tokens is not None:
            rec.image_tokens = details.image_tokens
    completion_details = usage.completion_tokens_details
    if completion_details is not None and completion_details.reasoning_tokens is not None:
        rec.n_reasoning = completion_details.reasoning_tokens


def settle_timings(rec: RawRequest) -> None:
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


class StreamReader:
    """Reads one streamed body into `rec`: `feed` each read with its stamp, in order, then
    `finish` at the end of the body. Both raise RequestFailure for a failed request.

    After [DONE] the rest of the body is taken and ignored (a body left unread would cost
    the connection)."""

    __slots__ = ("_parser", "content_type", "decode_all", "rec")

    def __init__(
        self, rec: RawRequest, *, decode_all: bool = False, content_type: str | None = None
    ) -> None:
        self.rec = rec
        self.decode_all = decode_all
        self.content_type = content_type
        self._parser = SSEParser()

    def feed(self, chunk: bytes, now: int) -> None:  # noqa: PLR0912 - the hot path, one frame
        """One read of the body, which arrived at `now` (perf_counter_ns)."""
        rec = self.rec
        if rec.t_end is not None:
            return
        if rec.t_first_byte is None:
            rec.t_first_byte = now
        rec.t_last_read = now
        parsed = self._parser.feed_batch(chunk)
        if not parsed:
            return
        if isinstance(parsed, tuple):
            text, count, region = parsed
            if not self.decode_all:
                try:
                    if count == 1:
                        brief = _decode_brief(text)
                    else:
                        briefs = _decode_briefs(text)
                except msgspec.DecodeError:
                    pass  # a [DONE], or data that is no JSON object: event by event below
                else:
                    if count == 1:
                        self._briefs((brief,), now)
                        return
                    if len(briefs) == count:
                        self._briefs(briefs, now)
                        return
            parsed = self._parser.events_in(region)
        for kind, data, _lines in parsed:
            if self._one(kind, data, now):
                return

    def _one(self, kind: bytes, data: bytes, now: int) -> bool:
        """One event, read on its own; True when it ended the stream ([DONE])."""
        if kind is not MESSAGE and kind == _ERROR_TYPE:
            said = server_message(data)
            raise RequestFailure("protocol", f"the server sent an error event: {said}")
        if not data or data[0] != _BRACE:
            stripped = data.strip()
            if stripped == _DONE:
                self.rec.t_end = now
                return True
            if not stripped:
                return False  # an event with empty data carries nothing (a keep-alive)
        if self.decode_all:
            event = parse(data)
            if self.rec.parts is not None:
                self.rec.parts.take(event)
            on_event(event, judge(event, self.rec.text), self.rec, now)
            return False
        try:
            brief = _decode_brief(data)
        except msgspec.DecodeError:
            parse(data)  # says what is wrong with it
            raise  # pragma: no cover - what the brief refuses, parse refuses
        self._briefs((brief,), now)
        return False

    def _briefs(self, briefs: Sequence[Brief], now: int) -> None:
        """Events that arrived at `now`, judged from their brief decode; the raw parts of one
        that carries a figure or an error are decoded then (`_carrying`)."""
        rec = self.rec
        for brief in briefs:
            if (
                brief.usage is _UNREAD
                and brief.timings is _UNREAD
                and brief.error is _UNREAD
                and brief.message is _UNREAD
            ):
                if rec.text is None and len(brief.choices) == 1:
                    # The usual event, judged here (as `judge` does, without keeping text).
                    choice = brief.choices[0]
                    delta = choice.delta
                    if delta is not None and delta.content and not delta.tool_calls:
                        rec.chunk_ns.append(now)
                        if rec.t_content is None:
                            rec.t_content = now
                        if choice.finish_reason:
                            rec.finished = True
                        continue
                self._judged(brief, now)
            else:
                event = _carrying(brief)
                if rec.parts is not None:
                    rec.parts.take(event)
                on_event(event, judge(event, rec.text), rec, now)

    def _judged(self, brief: Brief, now: int) -> None:
        """An event without usage, timings or error, judged in full (`judge`): reasoning,
        tool calls, several choices, or text kept."""
        rec = self.rec
        what = judge(brief, rec.text)
        if rec.parts is not None:
            rec.parts.take(brief)
        mark(what, rec, now)

    def feed_reads(self, stamps: list[int], pieces: list[bytes]) -> None:
        """Reads as a slot's connection hands them on: each piece with its read's stamp."""
        for now, piece in zip(stamps, pieces, strict=True):
            self.feed(piece, now)

    def finish(self, now: int) -> None:
        """The body ended (at `now` when nothing came): its end, and whether it ended
        properly (docs/figures.md: [DONE] or a finish_reason; a body that just stops is
        stream_broken)."""
        rec = self.rec
        settle_timings(rec)
        if rec.t_end is not None:
            return
        rec.t_end = rec.t_last_read or now
        if rec.finished:
            return
        raise self._broken()

    def _broken(self) -> RequestFailure:
        """Why a body ended without [DONE] or a finish_reason, in the server's own terms where
        it left any."""
        parser = self._parser
        pending = parser.pending().strip()
        ignored = parser.ignored or {}
        if b"error" in ignored:
            return RequestFailure(
                "protocol",
                "the server wrote an error as an `error:` line, which server-sent events "
                f"ignore (older llama.cpp builds do): {server_message(ignored[b'error'])}",
            )
        if pending[:1] in (b"{", b"["):
            # No server-sent event starts so: the body is one JSON document.
            return self._not_a_stream(pending)
        if b"event: error" in pending or b"event:error" in pending:
            return RequestFailure(
                "protocol", "the server began an error event and closed the stream"
            )
        reason = "the stream ended without [DONE] or a finish_reason (the body just stopped)"
        if pending:
            reason += (
                f"; its last {len(pending)} bytes were never ended by a blank line, so they "
                "are no event"
            )
        return RequestFailure("stream_broken", reason)

    def _not_a_stream(self, body: bytes) -> RequestFailure:
        """A streamed request answered with one JSON document: the server's error, or an
        answer from a server that does not stream."""
        try:
            parse(body)
        except RequestFailure as failure:
            return failure
        kind = (self.content_type or "no content type")[:64]
        return RequestFailure(
            "protocol",
            f"asked to stream, the server answered {kind} with one whole answer: it does not "
            "stream, and jobs time the first token from the stream (set workload.stream "
            "false to measure end-to-end latency only)",
        )
