"""OpenAI wire format for the simulator: request shapes, token counting, pre-encoded events.

Counting rule (the ground truth the tests and the benchmark compare against): a prompt has
one token per whitespace-separated word, at least 1; a response has exactly the requested
number of tokens, each a short word with a leading space, so re-counting its text by words
gives the same number.
"""

from __future__ import annotations

import zlib
from typing import Annotated, Final, TypeVar

import msgspec

from infercost.sim.config import MAX_MODEL_LEN

_T = TypeVar("_T")

MaxTokens = Annotated[int, msgspec.Meta(ge=1, le=MAX_MODEL_LEN)]


class RequestError(ValueError):
    """A request body the simulator rejects with 400 invalid_request_error."""


class ContentPart(msgspec.Struct):
    """One part of a multi-part chat message; only `text` parts count as prompt tokens."""

    type: str
    text: str | None = None


class ChatMessage(msgspec.Struct):
    """A chat message; `role` and other fields are accepted and ignored."""

    content: str | list[ContentPart] | None = None


class StreamOptions(msgspec.Struct):
    """`stream_options`: only include_usage changes what the simulator sends."""

    include_usage: bool | None = None


class ChatRequest(msgspec.Struct):
    """POST /v1/chat/completions body, reduced to what the simulator honors."""

    messages: list[ChatMessage]
    model: str | None = None
    max_tokens: MaxTokens | None = None
    max_completion_tokens: MaxTokens | None = None
    stream: bool | None = None
    stream_options: StreamOptions | None = None


class CompletionRequest(msgspec.Struct):
    """POST /v1/completions body; `prompt` is a string, or a list of strings or token ids."""

    prompt: str | list[str | int]
    model: str | None = None
    max_tokens: MaxTokens | None = None
    stream: bool | None = None
    stream_options: StreamOptions | None = None


class TokenizeRequest(msgspec.Struct):
    """POST /tokenize body: vLLM's shape, `prompt` or `messages`."""

    prompt: str | None = None
    messages: list[ChatMessage] | None = None
    model: str | None = None


_chat_decoder: Final = msgspec.json.Decoder(ChatRequest)
_completion_decoder: Final = msgspec.json.Decoder(CompletionRequest)
_tokenize_decoder: Final = msgspec.json.Decoder(TokenizeRequest)
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


def usage_json(prompt_tokens: int, completion_tokens: int) -> bytes:
    """The OpenAI `usage` object, pre-encoded."""
    return b'{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}' % (
        prompt_tokens,
        completion_tokens,
        prompt_tokens + completion_tokens,
    )


def usage_event(prefix: bytes, prompt_tokens: int, completion_tokens: int) -> bytes:
    """The include_usage event: empty `choices` and the usage numbers."""
    return prefix + b'],"usage":' + usage_json(prompt_tokens, completion_tokens) + b"}\n\n"


def error_body(status: int, message: str, error_type: str) -> bytes:
    """OpenAI/llama.cpp error JSON: {"error": {"message", "type", "code"}}."""
    return encode({"error": {"message": message, "type": error_type, "code": status}})
