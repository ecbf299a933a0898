"""Answers the simulator writes for requests with tools or a response_format: JSON made from
the request's own schema, cut into exactly as many pieces as the answer has tokens.

An answer that the switches make invalid (SimConfig.tool_call_invalid_share,
structured_invalid_share) loses its last character (a closing brace): text that no longer
parses as JSON, as a model cut short or a grammar not enforced writes. Which answers are
invalid is decided by `Share`, exactly that share of every run of requests (request i is
invalid when floor((i + 1) x share) > floor(i x share)), so a test can hold a count to it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

#: A value of each simple type (objects, arrays and numbers with bounds are made in `example`).
_SIMPLE: dict[str, Any] = {"boolean": True, "null": None, "string": "sim"}


def example(schema: Mapping[str, Any]) -> Any:
    """A value that `schema` accepts (the subset of JSON Schema tools and response formats
    use: objects, arrays, enums, strings, numbers with bounds, booleans)."""
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type", "object")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    value: Any
    if kind == "object":
        value = {name: example(sub) for name, sub in (schema.get("properties") or {}).items()}
    elif kind == "array":
        value = [example(schema.get("items") or {"type": "string"})]
    elif kind == "integer":
        value = int(schema.get("minimum", 1))
    elif kind == "number":
        low, high = schema.get("minimum", 0.0), schema.get("maximum", 1.0)
        value = (float(low) + float(high)) / 2
    else:
        value = _SIMPLE.get(str(kind), "sim")
    return value


def answer_text(schema: Mapping[str, Any], *, invalid: bool) -> str:
    """The JSON text of an answer to `schema`, compact; cut short by one character when
    `invalid`."""
    text = json.dumps(example(schema), separators=(",", ":"))
    return text[:-1] if invalid else text


def pieces(text: str, n: int) -> list[str]:
    """`text` in exactly `n` pieces (n >= 1): as even as they come, or, for text shorter
    than n, one character each and spaces after (whitespace JSON allows)."""
    if n <= len(text):
        size = len(text) / n
        return [text[math.floor(i * size) : math.floor((i + 1) * size)] for i in range(n)]
    return [*text, *(" " for _ in range(n - len(text)))]


class Share:
    """Decides which requests, counted as they come, are made invalid: exactly `share` of
    every run of them."""

    def __init__(self, share: float) -> None:
        self.share = share
        self._count = 0

    def next(self) -> bool:
        """Whether the next request is one of the invalid ones."""
        i = self._count
        self._count += 1
        return math.floor((i + 1) * self.share) > math.floor(i * self.share)
