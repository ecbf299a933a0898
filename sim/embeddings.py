"""POST /v1/embeddings for the simulated endpoint: OpenAI's request and response shapes,
and the fixed latency it answers after (ttft_ms plus embed_token_ms per input token), so a
benchmark of an embeddings deployment has a ground truth to be checked against."""

from __future__ import annotations

import math
from typing import Final

import msgspec

from sim.wire import RequestError, prompt_words

#: Length of the vectors returned when the request names no `dimensions`: small, since only
#: their arrival is measured.
EMBEDDING_DIM: Final = 8
MAX_DIMENSIONS: Final = 4096


class EmbeddingsRequest(msgspec.Struct):
    """The body of POST /v1/embeddings: `input` is a text, a list of texts, token ids, or a
    list of token id lists (each id one token)."""

    # One union of item types: msgspec takes a single array type in a union.
    input: str | list[str | int | list[int]]
    model: str | None = None
    encoding_format: str | None = None
    dimensions: int | None = None
    user: str | None = None


_decoder: Final = msgspec.json.Decoder(EmbeddingsRequest)
_encode: Final = msgspec.json.Encoder().encode


def decode_embeddings(body: bytes) -> EmbeddingsRequest:
    """Parse an embeddings body or raise RequestError with a readable reason."""
    if not body.strip():
        raise RequestError("request body is empty: send a JSON object")
    try:
        req = _decoder.decode(body)
    except msgspec.DecodeError as exc:
        raise RequestError(f"invalid request body: {exc}") from None
    if isinstance(req.input, list) and not req.input:
        raise RequestError("input must not be empty")
    if req.encoding_format not in (None, "float"):
        raise RequestError("encoding_format must be 'float' (the simulator sends no base64)")
    if req.dimensions is not None and not 1 <= req.dimensions <= MAX_DIMENSIONS:
        raise RequestError(f"dimensions must be in 1..{MAX_DIMENSIONS}")
    return req


def input_tokens(req: EmbeddingsRequest) -> list[int]:
    """Tokens of each input (a word or a token id is one token; at least one each)."""
    items = req.input
    if isinstance(items, str):
        return [max(1, len(items.split()))]
    if all(isinstance(i, int) for i in items):
        return [len(items)]
    counts: list[int] = []
    for item in items:
        if isinstance(item, str):
            counts.append(max(1, len(prompt_words(item))))
        elif isinstance(item, list):
            counts.append(max(1, len(item)))
        else:
            raise RequestError("input mixes token ids with texts or token id lists")
    return counts


def latency_s(ttft_ms: float, embed_token_ms: float, tokens: int) -> float:
    """How long the simulator takes to answer: ttft_ms, plus embed_token_ms per input token."""
    return (ttft_ms + embed_token_ms * tokens) / 1000.0


def response_body(model: str, counts: list[int], dimensions: int | None) -> bytes:
    """The answer: one unit vector per input (each the same, of `dimensions` or
    EMBEDDING_DIM floats) and usage.prompt_tokens (= total_tokens) over all inputs."""
    dim = dimensions or EMBEDDING_DIM
    vector = [1.0 / math.sqrt(dim)] * dim
    total = sum(counts)
    return _encode(
        {
            "object": "list",
            "data": [
                {"object": "embedding", "index": i, "embedding": vector} for i in range(len(counts))
            ],
            "model": model,
            "usage": {"prompt_tokens": total, "total_tokens": total},
        }
    )
