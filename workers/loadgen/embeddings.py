"""One request to an OpenAI-compatible embeddings route (`api: openai-embeddings`).

An embeddings answer is one JSON body, not a stream: the request's E2E latency ends when
the whole body has arrived, its prompt tokens come from `usage.prompt_tokens`, and it
succeeds when at least one vector came back. It carries no tokens out, so TTFT, TPOT, ITL
and output throughput do not exist for it (infercost.figures.metrics says so in the run).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import msgspec

from infercost.engines.reader import excerpt
from workers.loadgen.transport import read_whole

if TYPE_CHECKING:
    import httpx

    from workers.loadgen.stream import RawRequest

EMBEDDINGS_API: Final = "openai-embeddings"
ROUTE: Final = "/embeddings"


class _Embedding(msgspec.Struct):
    # A list of floats, or a base64 text when a server ignores encoding_format.
    embedding: list[float] | str = []


class _Usage(msgspec.Struct):
    prompt_tokens: int | None = None


class _Response(msgspec.Struct):
    data: list[_Embedding] = []
    usage: _Usage | None = None
    error: Any = None


_decode: Final = msgspec.json.Decoder(_Response).decode
_encode: Final = msgspec.json.Encoder().encode


def embeddings_body(model: str, text: str) -> bytes:
    """The JSON body embedding one text, vectors asked as floats."""
    return _encode({"model": model, "input": text, "encoding_format": "float"})


async def read_embeddings(response: httpx.Response, rec: RawRequest) -> tuple[str, str] | None:
    """Read a 2xx embeddings answer into `rec` (its end, prompt tokens); returns the error
    class and reason of a malformed or empty answer, None when it succeeded."""
    body, rec.t_first_byte, rec.t_end = await read_whole(response)
    try:
        answer = _decode(body)
    except msgspec.DecodeError as exc:
        return "protocol", f"malformed response body: {str(exc)[:200]}"
    if answer.error is not None:
        # The server's own message only (capped), never the rest of what it sent.
        error = answer.error
        said = error.get("message") if isinstance(error, dict) else error
        if not isinstance(said, str) or not said:
            return "protocol", "the server sent an error without a message"
        return "protocol", f"the server sent an error: {excerpt(said)}"
    if answer.usage is not None and answer.usage.prompt_tokens is not None:
        rec.n_in = answer.usage.prompt_tokens
        rec.count_source = "usage"
    if not answer.data or not all(item.embedding for item in answer.data):
        return "empty", "the response carried no embedding vector"
    return None
