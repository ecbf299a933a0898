"""Loopback servers that answer each engine's tokenizer request the way its source does.

One counting rule stands in for every engine's tokenizer (the ground truth tests compare
against): a run of digits is a token per three digits, any other word a token per four
characters, rounded up. A completion prompt adds BOS; a chat prompt adds the engine's
chat template (CHAT_TEMPLATE tokens, BOS included). Routes and shapes per engine:

- vllm: POST /tokenize, `prompt` (+ add_special_tokens, default true) or `messages`,
  answer {"count", "max_model_len", "tokens"}; nothing under /v1/tokenize.
- sglang: POST /tokenize and /v1/tokenize, `prompt` only (a `messages` body gets 422).
- tgi: POST /tokenize `inputs` (BOS always), answer a list of {id, text, start, stop};
  POST /chat_tokenize `messages`, answer {"tokenize_response", "templated_text"}.
- llamacpp: POST /tokenize `content` (+ add_special, default false), answer {"tokens"},
  shaped like /work/shared/fixtures/llama-server/tokenize.json; any other body gets
  {"tokens": []}, as llama-server answers it.
- none: no tokenizer route.

Generation routes answer chat and completion requests, streamed or not, with usage unless
`usage=False`; every generation request's prompt is recorded with its true token count.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from tests.asgi import Receive, Send, read_body, send_json

BOS = 1
CHAT_TEMPLATE = {"vllm": 7, "sglang": 11, "tgi": 9, "llamacpp": 13, "none": 5}
FIXTURE = Path("/work/shared/fixtures/llama-server/tokenize.json")
#: Token ids as llama-server sent them (cycled for longer texts).
_IDS: list[int] = (
    json.loads(FIXTURE.read_text())["tokens"]
    if FIXTURE.exists()
    else [12027, 7420, 278, 4328, 1546, 758, 5589, 322, 21822, 29889]
)


def word_tokens(word: str) -> int:
    """Digits in groups of three; other words one token per 4 characters, rounded up."""
    if word.isdigit():
        return -(-len(word) // 3)
    return -(-len(word) // 4)


def text_tokens(text: str) -> int:
    """The tokens of `text` alone."""
    return sum(word_tokens(w) for w in text.split())


def prompt_tokens(engine: str, text: str, *, chat: bool) -> int:
    """What the server counts for a prompt of `text`: chat template or BOS included."""
    return text_tokens(text) + (CHAT_TEMPLATE[engine] if chat else BOS)


def _ids(n: int) -> list[int]:
    return [_IDS[i % len(_IDS)] for i in range(n)]


@dataclass
class EngineApp:
    """An ASGI app answering `engine`'s tokenizer routes and OpenAI generation routes."""

    engine: str
    usage: bool = True
    chat_tokenize: bool = True
    # Seconds before a generation response starts (to keep a level running a while).
    delay_s: float = 0.0
    tokenize_bodies: list[dict[str, Any]] = field(default_factory=list)
    # (chat or not, the prompt's text, its true token count) of each generation request.
    prompts: list[tuple[bool, str, int]] = field(default_factory=list)

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        raw = await read_body(receive)
        path: str = scope["path"]
        if path.endswith("/chat/completions") or path.endswith("/completions"):
            await self._generate(
                send, msgspec.json.decode(raw), chat=path.endswith("/chat/completions")
            )
            return
        if path in ("/tokenize", "/v1/tokenize", "/chat_tokenize") and raw:
            body = msgspec.json.decode(raw)
            self.tokenize_bodies.append({"path": path, **body})
            status, answer = self._tokenize(path, body)
        else:
            status, answer = 404, {"detail": "Not Found"}
        await send_json(send, status, answer)

    def _tokenize(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        engine = self.engine
        if engine == "vllm" and path == "/tokenize":
            if "messages" in body:
                n = prompt_tokens(engine, body["messages"][0]["content"], chat=True)
            elif "prompt" in body:
                special = body.get("add_special_tokens", True)
                n = text_tokens(body["prompt"]) + (BOS if special else 0)
            else:
                return 400, {"error": {"message": "prompt or messages required"}}
            return 200, {"count": n, "max_model_len": 4096, "tokens": _ids(n)}
        if engine == "sglang" and path in ("/tokenize", "/v1/tokenize"):
            if not isinstance(body.get("prompt"), str):
                return 422, {"detail": [{"loc": ["body", "prompt"], "msg": "Field required"}]}
            n = text_tokens(body["prompt"]) + (BOS if body.get("add_special_tokens", True) else 0)
            return 200, {"tokens": _ids(n), "count": n, "max_model_len": 4096}
        if engine == "tgi" and path == "/tokenize":
            if not isinstance(body.get("inputs"), str):
                return 422, {"error": "missing field `inputs`", "error_type": "validation"}
            n = BOS + text_tokens(body["inputs"])
            return 200, [{"id": i, "text": "x", "start": 0, "stop": 1} for i in _ids(n)]
        if engine == "tgi" and path == "/chat_tokenize" and self.chat_tokenize:
            text = body["messages"][0]["content"]
            n = prompt_tokens(engine, text, chat=True)
            tokens = [{"id": i, "text": "x", "start": 0, "stop": 1} for i in _ids(n)]
            return 200, {"tokenize_response": tokens, "templated_text": f"<s>[INST] {text}"}
        if engine == "llamacpp" and path == "/tokenize":
            if "content" not in body:
                return 200, {"tokens": []}
            n = text_tokens(body["content"]) + (BOS if body.get("add_special", False) else 0)
            return 200, {"tokens": _ids(n)}
        return 404, {"detail": "Not Found"}

    async def _generate(self, send: Send, body: dict[str, Any], *, chat: bool) -> None:
        text = body["messages"][-1]["content"] if chat else body["prompt"]
        n_in = prompt_tokens(self.engine, text, chat=chat)
        self.prompts.append((chat, text, n_in))
        n_out = int(body.get("max_tokens") or 4)
        usage = {"prompt_tokens": n_in, "completion_tokens": n_out, "total_tokens": n_in + n_out}
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if not body.get("stream"):
            message = {"role": "assistant", "content": " w" * n_out}
            choice: dict[str, Any] = {"index": 0, "finish_reason": "length"}
            choice.update({"message": message} if chat else {"text": " w" * n_out})
            answer: dict[str, Any] = {"choices": [choice]}
            if self.usage:
                answer["usage"] = usage
            await send_json(send, 200, answer)
            return
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream")],
            }
        )
        for _ in range(n_out):
            delta: dict[str, Any] = {"delta": {"content": " w"}} if chat else {"text": " w"}
            event = {"choices": [{"index": 0, "finish_reason": None, **delta}]}
            chunk = b"data: " + msgspec.json.encode(event) + b"\n\n"
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        if self.usage and (body.get("stream_options") or {}).get("include_usage"):
            chunk = b"data: " + msgspec.json.encode({"choices": [], "usage": usage}) + b"\n\n"
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b"data: [DONE]\n\n"})
