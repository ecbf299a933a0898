"""OpenAI wire format for the simulator: request shapes, token counting, pre-encoded events.

Counting rule (the ground truth the tests and the benchmark compare against): a prompt has
one token per whitespace-separated word, at least 1; a response has exactly the requested
number of tokens, each a short word with a leading space, so re-counting its text by words
gives the same number.
"""

from __future__ import annotations

import base64
import re
import zlib
from typing import Annotated, Any, Final, TypeVar

import msgspec

from sim.config import MAX_MODEL_LEN

_T = TypeVar("_T")

MaxTokens = Annotated[int, msgspec.Meta(ge=1, le=MAX_MODEL_LEN)]


class RequestError(ValueError):
    """A request body the simulator rejects with 400 invalid_request_error."""


class ImageUrl(msgspec.Struct):
    """An image part's `image_url`: a data URL (or any URL, taken as an image of unknown
    size)."""

    url: str


class ContentPart(msgspec.Struct):
    """One part of a multi-part chat message: `text` parts count as prompt tokens by their
    words, `image_url` parts by their size (image_sizes)."""

    type: str
    text: str | None = None
    image_url: ImageUrl | None = None


class ChatMessage(msgspec.Struct):
    """A chat message; `role` and other fields are accepted and ignored."""

    content: str | list[ContentPart] | None = None


class StreamOptions(msgspec.Struct):
    """`stream_options`: include_usage, and vLLM's continuous_usage_stats (usage on every
    chunk; honoured with usage style "requested")."""

    include_usage: bool | None = None
    continuous_usage_stats: bool | None = None


class ChatRequest(msgspec.Struct):
    """POST /v1/chat/completions body, reduced to what the simulator honors."""

    messages: list[ChatMessage]
    model: str | None = None
    max_tokens: MaxTokens | None = None
    max_completion_tokens: MaxTokens | None = None
    stream: bool | None = None
    stream_options: StreamOptions | None = None
    user: str | None = None  # names the request in GET /stats `writes` (record_writes)
    ignore_eos: bool | None = None
    # transformers serve: a JSON string of GenerationConfig keyword arguments.
    generation_config: str | None = None
    # Tools offered and whether to call one; the answer's format (a json_schema).
    tools: list[dict[str, Any]] | None = None
    tool_choice: Any = None
    response_format: dict[str, Any] | None = None
    # llama.cpp: where reasoning goes ("none": in content, between think tags).
    reasoning_format: str | None = None


class CompletionRequest(msgspec.Struct):
    """POST /v1/completions body; `prompt` is a string, or a list of strings or token ids."""

    prompt: str | list[str | int]
    model: str | None = None
    max_tokens: MaxTokens | None = None
    stream: bool | None = None
    stream_options: StreamOptions | None = None
    user: str | None = None  # names the request in GET /stats `writes` (record_writes)
    ignore_eos: bool | None = None
    generation_config: str | None = None


class GenerationConfig(msgspec.Struct):
    """The parts of a transformers GenerationConfig the simulator honours."""

    min_new_tokens: int | None = None
    max_new_tokens: int | None = None


_generation_config_decoder: Final = msgspec.json.Decoder(GenerationConfig)


def decode_generation_config(text: str) -> GenerationConfig:
    """`generation_config` as transformers serve reads it: a JSON object in a string."""
    try:
        return _generation_config_decoder.decode(text)
    except msgspec.DecodeError as exc:
        raise RequestError(f"generation_config is not a GenerationConfig: {exc}") from None


def unknown_fields(body: bytes, accepted: frozenset[str]) -> list[str]:
    """The top-level fields of a JSON object body that are not in `accepted`, sorted."""
    try:
        decoded = msgspec.json.decode(body)
    except msgspec.DecodeError:
        return []  # the typed decode says what is wrong with it
    if not isinstance(decoded, dict):
        return []
    return sorted(k for k in decoded if k not in accepted)


def transformers_refusal(fields: list[str]) -> bytes:
    """transformers serve's 422 body for unexpected fields (FastAPI's `detail`, a Python set
    in its words)."""
    listed = ", ".join(repr(f) for f in fields)
    return encode({"detail": f"Unexpected fields in the request: {{{listed}}}"})


def openai_refusal(fields: list[str]) -> bytes:
    """The OpenAI API's 400 body for an argument it does not know."""
    return error_body(
        400, f"Unrecognized request argument supplied: {fields[0]}", "invalid_request_error"
    )


def multiline_crlf(body: bytes) -> bytes:
    """Server-sent events rewritten with CRLF line ends and each `data:` line of JSON split
    in two after a comma near its middle: the same events to a client that follows the
    standard (it joins the two with a newline, which JSON takes as space)."""
    out = []
    for block in body.split(b"\n\n"):
        if not block:
            continue
        lines = []
        for line in block.split(b"\n"):
            # `,"` opens the next key: never inside a string, where a quote is escaped.
            cut = line.find(b',"', len(line) // 2) if line.startswith(b"data: {") else -1
            if cut > 0:
                lines.append(line[: cut + 1])
                lines.append(b"data:" + line[cut + 1 :])
            else:
                lines.append(line)
        out.append(b"\r\n".join(lines) + b"\r\n\r\n")
    return b"".join(out)


class TokenizeRequest(msgspec.Struct):
    """POST /tokenize body: vLLM's shape, `prompt` or `messages` (and return_token_strs)."""

    prompt: str | None = None
    messages: list[ChatMessage] | None = None
    model: str | None = None
    return_token_strs: bool | None = None


class LlamaTokenizeRequest(msgspec.Struct):
    """llama-server's POST /tokenize body (tools/server: `content`, `add_special` default
    false, `with_pieces`); a body without `content` gets `{"tokens": []}`."""

    content: str | list[str | int] | None = None
    add_special: bool = False
    with_pieces: bool = False


class SglangTokenizeRequest(msgspec.Struct):
    """SGLang's POST /tokenize and /v1/tokenize body (entrypoints/openai/protocol.py):
    `prompt` a string or a list of strings."""

    prompt: str | list[str]
    model: str | None = None
    add_special_tokens: bool = True


class TgiTokenizeRequest(msgspec.Struct):
    """TGI's POST /tokenize body: a GenerateRequest (router/src/lib.rs), `inputs` and
    optional `parameters` (ignored)."""

    inputs: str
    parameters: dict[str, object] | None = None


_chat_decoder: Final = msgspec.json.Decoder(ChatRequest)
_completion_decoder: Final = msgspec.json.Decoder(CompletionRequest)
_tokenize_decoder: Final = msgspec.json.Decoder(TokenizeRequest)
_llama_tokenize_decoder: Final = msgspec.json.Decoder(LlamaTokenizeRequest)
_sglang_tokenize_decoder: Final = msgspec.json.Decoder(SglangTokenizeRequest)
_tgi_tokenize_decoder: Final = msgspec.json.Decoder(TgiTokenizeRequest)
encode: Final = msgspec.json.Encoder().encode


def _decode(decoder: msgspec.json.Decoder[_T], body: bytes) -> _T:
    if not body.strip():
        raise RequestError("request body is empty: send a JSON object")
    try:
        return decoder.decode(body)
    except msgspec.DecodeError as exc:
        raise RequestError(f"invalid request body: {exc}") from None


def decode_chat(body: bytes) -> ChatRequest:
    """Parse a chat completion body or raise RequestError with a readable reason."""
    return _decode(_chat_decoder, body)


def decode_completion(body: bytes) -> CompletionRequest:
    """Parse a completion body or raise RequestError with a readable reason."""
    return _decode(_completion_decoder, body)


def decode_tokenize(body: bytes) -> TokenizeRequest:
    """Parse a tokenize body; it must carry `prompt` or `messages`."""
    req = _decode(_tokenize_decoder, body)
    if req.prompt is None and req.messages is None:
        raise RequestError("Object missing required field `prompt` or `messages`")
    return req


def decode_llama_tokenize(body: bytes) -> LlamaTokenizeRequest:
    """Parse a llama-server tokenize body."""
    return _decode(_llama_tokenize_decoder, body)


def decode_sglang_tokenize(body: bytes) -> SglangTokenizeRequest:
    """Parse an SGLang tokenize body."""
    return _decode(_sglang_tokenize_decoder, body)


def decode_tgi_tokenize(body: bytes) -> TgiTokenizeRequest:
    """Parse a TGI tokenize body."""
    return _decode(_tgi_tokenize_decoder, body)


def message_words(messages: list[ChatMessage]) -> list[str]:
    """All whitespace-separated words in the messages' text content, in order."""
    words: list[str] = []
    for message in messages:
        content = message.content
        if isinstance(content, str):
            words.extend(content.split())
        elif content is not None:
            for part in content:
                if part.text is not None:
                    words.extend(part.text.split())
    return words


#: The size taken for an image whose size cannot be read (a URL, not a PNG data URL).
UNKNOWN_IMAGE_SIZE: Final = (512, 512)


def image_sizes(messages: list[ChatMessage]) -> list[tuple[int, int]]:
    """(width, height) of every image part, read from a PNG data URL's header (the first
    bytes of its base64 are enough)."""
    sizes: list[tuple[int, int]] = []
    for message in messages:
        if isinstance(message.content, str) or message.content is None:
            continue
        for part in message.content:
            if part.image_url is None:
                continue
            url = part.image_url.url
            _, comma, data = url.partition(",")
            size = UNKNOWN_IMAGE_SIZE
            if comma and url.startswith("data:image/png"):
                head = base64.b64decode(data[:44] + "=" * (-len(data[:44]) % 4))
                if head[12:16] == b"IHDR":
                    size = (int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big"))
            sizes.append(size)
    return sizes


def prompt_words(prompt: str | list[str | int]) -> list[str]:
    """Words of a completion prompt; a token id in a list counts as one word."""
    if isinstance(prompt, str):
        return prompt.split()
    words: list[str] = []
    for item in prompt:
        if isinstance(item, str):
            words.extend(item.split())
        else:
            words.append(str(item))
    return words


def token_ids(words: list[str]) -> list[int]:
    """Stable fake token ids (one per word, 1 = BOS for an empty prompt) for /tokenize."""
    if not words:
        return [1]
    return [3 + zlib.crc32(word.encode()) % 31997 for word in words]


# The words responses are made of, cycled; each one token.
TOKEN_TEXTS: Final = (
    " the", " sim", " says", " each", " token", " arrives", " right", " on",
    " time", " so", " every", " figure", " can", " be", " checked", " exactly",
)  # fmt: skip


def response_text(n: int) -> str:
    """The full text of an n-token response (what the stream's deltas concatenate to)."""
    k = len(TOKEN_TEXTS)
    return "".join(TOKEN_TEXTS[i % k] for i in range(n))


def _choice(body: bytes) -> bytes:
    return b'{"index":0,' + body + b',"logprobs":null,"finish_reason":null}'


# Pre-encoded `choices[0]` objects, so an event is prefix + choice + suffix and nothing more.
CHAT_ROLE_CHOICE: Final = _choice(b'"delta":{"role":"assistant","content":""}')
CHAT_TOKEN_CHOICES: Final = tuple(
    _choice(b'"delta":{"content":' + encode(t) + b"}") for t in TOKEN_TEXTS
)
CHAT_FINISH_CHOICE: Final = b'{"index":0,"delta":{},"logprobs":null,"finish_reason":"length"}'
COMPLETION_TOKEN_CHOICES: Final = tuple(_choice(b'"text":' + encode(t)) for t in TOKEN_TEXTS)
COMPLETION_FINISH_CHOICE: Final = b'{"index":0,"text":"","logprobs":null,"finish_reason":"length"}'
EVENT_SUFFIX: Final = b"]}\n\n"
DONE_EVENT: Final = b"data: [DONE]\n\n"


def event_prefix(object_name: str, request_id: str, created: int, model_json: bytes) -> bytes:
    """`data: {...,"choices":[` for one stream; every event of that stream starts with it."""
    return b'data: {"id":"%s","object":"%s","created":%d,"model":%s,"choices":[' % (
        request_id.encode(),
        object_name.encode(),
        created,
        model_json,
    )


def usage_json(
    prompt_tokens: int,
    completion_tokens: int,
    cached_tokens: int | None = None,
    reasoning_tokens: int | None = None,
    image_tokens: int | None = None,
) -> bytes:
    """The OpenAI `usage` object, pre-encoded; with `prompt_tokens_details.cached_tokens`
    unless `cached_tokens` is None, `completion_tokens_details.reasoning_tokens` unless
    `reasoning_tokens` is None."""
    base = b'{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d' % (
        prompt_tokens,
        completion_tokens,
        prompt_tokens + completion_tokens,
    )
    details = []
    if cached_tokens is not None:
        details.append(b'"cached_tokens":%d' % cached_tokens)
    if image_tokens is not None:
        details.append(b'"image_tokens":%d' % image_tokens)
    if details:
        base += b',"prompt_tokens_details":{' + b",".join(details) + b"}"
    if reasoning_tokens is not None:
        base += b',"completion_tokens_details":{"reasoning_tokens":%d}' % reasoning_tokens
    return base + b"}"


def usage_event(prefix: bytes, prompt_tokens: int, completion_tokens: int) -> bytes:
    """The include_usage event: empty `choices` and the usage numbers."""
    return prefix + b'],"usage":' + usage_json(prompt_tokens, completion_tokens) + b"}\n\n"


def error_body(status: int, message: str, error_type: str) -> bytes:
    """OpenAI/llama.cpp error JSON: {"error": {"message", "type", "code"}}."""
    return encode({"error": {"message": message, "type": error_type, "code": status}})


# -- engine dialects of the stream (issue 10)

BOS_ID: Final = 1
LLAMACPP_FINGERPRINT: Final = "b1-infercost-sim"


def _llama_choice(body: bytes, reason: bytes = b"null") -> bytes:
    return b'{"finish_reason":' + reason + b',"index":0,' + body + b"}"


class StreamFormat:
    """Pre-encoded pieces of one kind of stream (chat or completion) in one engine's dialect.

    An event is `prefix + choice + b"]" + extras + b"}\n\n"`, extras being `,"usage":...`
    and the like; llama.cpp's chat choices have no `logprobs` and its role chunk carries
    `content: null` (as in shared/fixtures/llama-server/chat-stream-*.sse), and its chunks a
    `system_fingerprint`.
    """

    __slots__ = (
        "chat",
        "fingerprint",
        "finish",
        "llamacpp",
        "object_name",
        "reasoning",
        "role",
        "tokens",
    )

    def __init__(self, *, chat: bool, llamacpp: bool, reasoning_field: str = "reasoning") -> None:
        self.chat = chat
        self.llamacpp = llamacpp
        self.object_name = "chat.completion.chunk" if chat else "text_completion"
        self.fingerprint = (
            b',"system_fingerprint":' + encode(LLAMACPP_FINGERPRINT) if llamacpp else b""
        )
        reasons = ("length", "stop", "tool_calls")
        if chat and llamacpp:
            self.role = _llama_choice(b'"delta":{"role":"assistant","content":null}')
            self.tokens = tuple(
                _llama_choice(b'"delta":{"content":' + encode(t) + b"}") for t in TOKEN_TEXTS
            )
            self.finish = {r: _llama_choice(b'"delta":{}', encode(r)) for r in reasons}
            self.reasoning = tuple(
                _llama_choice(b'"delta":{"%s":%s}' % (reasoning_field.encode(), encode(t)))
                for t in TOKEN_TEXTS
            )
        elif chat:
            self.role = CHAT_ROLE_CHOICE
            self.tokens = CHAT_TOKEN_CHOICES
            self.reasoning = tuple(
                _choice(b'"delta":{"%s":%s}' % (reasoning_field.encode(), encode(t)))
                for t in TOKEN_TEXTS
            )
            self.finish = {
                r: b'{"index":0,"delta":{},"logprobs":null,"finish_reason":%s}' % encode(r)
                for r in reasons
            }
        else:
            self.role = b""
            self.reasoning = ()
            self.tokens = COMPLETION_TOKEN_CHOICES
            self.finish = {
                r: b'{"index":0,"text":"","logprobs":null,"finish_reason":%s}' % encode(r)
                for r in reasons
            }

    def delta(self, body: Any) -> bytes:
        """A chat choice whose delta is `body` (encoded here), in this dialect."""
        if self.llamacpp:
            return _llama_choice(b'"delta":' + encode(body))
        return _choice(b'"delta":' + encode(body))

    def prefix(self, request_id: str, created: int, model_json: bytes) -> bytes:
        """`data: {...,"choices":[` for one stream."""
        return b'data: {"id":"%s","object":"%s","created":%d,"model":%s%s,"choices":[' % (
            request_id.encode(),
            self.object_name.encode(),
            created,
            model_json,
            self.fingerprint,
        )


def event(prefix: bytes, choice: bytes, extras: bytes = b"") -> bytes:
    """One SSE data event: the stream's prefix, a choice (b"" for `choices: []`) and extras
    (`,"usage":{...}` ...)."""
    return prefix + choice + b"]" + extras + b"}\n\n"


def error_event(message: str, *, engine: str = "default") -> bytes:
    """A stream failing mid-way: an SSE `event: error` with an OpenAI error object; from
    transformers serve a plain data event whose `error` is a string."""
    if engine == "transformers":
        return b"data: " + encode({"error": message}) + b"\n\n"
    body = encode({"error": {"message": message, "type": "server_error", "code": 500}})
    return b"event: error\ndata: " + body + b"\n\n"


def timings_json(*, cache_n: int, prompt_n: int, prompt_ms: float, predicted_n: int,
                 predicted_ms: float) -> bytes:  # fmt: skip
    """llama-server's `timings` object. As in the captured streams, the per-token figures of
    generation divide by predicted_n - 1 (the first token's time belongs to the prompt):
    42.313 ms for 8 tokens is 6.0447 ms per token and 165.43 tokens/s. A quotient without
    a denominator (no prompt time, a single token) is 0."""
    gaps = predicted_n - 1
    return encode(
        {
            "cache_n": cache_n,
            "prompt_n": prompt_n,
            "prompt_ms": prompt_ms,
            "prompt_per_token_ms": prompt_ms / prompt_n if prompt_n else 0.0,
            "prompt_per_second": 1000.0 * prompt_n / prompt_ms if prompt_ms > 0 else 0.0,
            "predicted_n": predicted_n,
            "predicted_ms": predicted_ms,
            "predicted_per_token_ms": predicted_ms / gaps if gaps > 0 else 0.0,
            "predicted_per_second": 1000.0 * gaps / predicted_ms if predicted_ms > 0 else 0.0,
        }
    )


def word_spans(text: str) -> list[tuple[int, int]]:
    """(start, stop) character offsets of each whitespace-separated word: TGI's tokens."""
    return [(m.start(), m.end()) for m in _WORD.finditer(text)]


_WORD: Final = re.compile(r"\S+")
