"""Tool calls and structured output (workload.features "tools", "structured"): what requests
carry, and whether what came back is valid.

A request of the `tools` feature carries TOOLS (two functions of the kind a support assistant
calls) and a `tool_choice`; one of the `structured` feature asks for an answer in
STRUCTURED_SCHEMA through `response_format` (type json_schema, strict). A dataset item may
carry its own tools and schema instead. What came back is judged once the level has ended
(never per event): a call is valid when it names one of the request's tools and its arguments
parse as JSON and match that tool's parameters schema; an answer is valid when it parses as
JSON and matches the schema asked for.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from jsonschema import Draft202012Validator

#: The tools a `tools` request offers (OpenAI's function-calling shape).
TOOLS: Final[list[dict[str, Any]]] = [
    {
        "type": "function",
        "function": {
            "name": "get_order_status",
            "description": "The status of one of the customer's orders.",
            "parameters": {
                "type": "object",
                "properties": {
                    "order_id": {"type": "string", "description": "The order number"},
                    "include_items": {"type": "boolean"},
                },
                "required": ["order_id"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "search_products",
            "description": "Search the catalogue.",
            "parameters": {
                "type": "object",
                "properties": {
                    "query": {"type": "string"},
                    "category": {"type": "string", "enum": ["books", "garden", "kitchen"]},
                    "max_results": {"type": "integer", "minimum": 1, "maximum": 20},
                },
                "required": ["query", "max_results"],
                "additionalProperties": False,
            },
        },
    },
]

#: The schema a `structured` request asks its answer to follow.
STRUCTURED_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "sentiment": {"type": "string", "enum": ["positive", "neutral", "negative"]},
        "confidence": {"type": "number", "minimum": 0, "maximum": 1},
        "topics": {"type": "array", "items": {"type": "string"}, "maxItems": 5},
    },
    "required": ["sentiment", "confidence", "topics"],
    "additionalProperties": False,
}


def response_format(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The `response_format` that asks for an answer following `schema`."""
    return {
        "type": "json_schema",
        "json_schema": {"name": "answer", "schema": dict(schema), "strict": True},
    }


@dataclass(frozen=True, slots=True)
class Verdict:
    """What came back, judged: calls made and how many were valid, with why the others were
    not (`not_json`, `schema`, `unknown_tool`); for a structured answer, calls is 1."""

    calls: int
    valid: int
    why: tuple[str, ...] = ()


class Judge:
    """Validators for a level's tools and schema, built once and used for every request."""

    def __init__(
        self,
        tools: Sequence[Mapping[str, Any]] | None = None,
        schema: Mapping[str, Any] | None = None,
    ) -> None:
        self._tools = {
            str(t["function"]["name"]): Draft202012Validator(t["function"].get("parameters") or {})
            for t in tools or ()
        }
        self._schema = None if schema is None else Draft202012Validator(dict(schema))
        #: Whether answers are judged for tool calls, and for a structured answer.
        self.tools = tools is not None
        self.structured = schema is not None

    def calls(self, calls: Sequence[tuple[str, str]]) -> Verdict:
        """The tool calls of one answer, each (name, argument text)."""
        valid = 0
        why: list[str] = []
        for name, arguments in calls:
            validator = self._tools.get(name)
            if validator is None:
                why.append("unknown_tool")
                continue
            reason = _invalid(validator, arguments)
            if reason is None:
                valid += 1
            else:
                why.append(reason)
        return Verdict(len(calls), valid, tuple(why))

    def answer(self, text: str) -> Verdict:
        """One structured answer against the schema asked for."""
        if self._schema is None:
            return Verdict(0, 0)
        reason = _invalid(self._schema, text)
        return Verdict(1, 1 if reason is None else 0, () if reason is None else (reason,))


#: What may follow where the parser stopped when the text ended inside a value: the start
#: or rest of a number (`-`, `0.`, `1e`), or the start of true, false or null.
_PARTIAL_VALUE = re.compile(r"-?(\d+)?(\.\d*)?([eE][+-]?\d*)?|t(r(u)?)?|f(a(l(s)?)?)?|n(u(l)?)?")


def _ended_inside(text: str, exc: json.JSONDecodeError) -> bool:
    """Whether `text` is JSON cut short rather than malformed: the parser ran out at its end,
    inside a string (an unterminated string runs to the end: a raw line break is another
    error), or inside a number or a literal that the end cut off."""
    if not text.strip():
        return False
    tail = text[exc.pos :].rstrip()
    return (
        not tail
        or exc.msg.startswith("Unterminated string")
        or _PARTIAL_VALUE.fullmatch(tail) is not None
    )


def _invalid(validator: Draft202012Validator, text: str) -> str | None:
    """None when `text` is JSON that `validator` accepts; else `cut_short` (JSON that the text
    ended inside of: an answer stopped by max_tokens, say), `not_json` or `schema`."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        return "cut_short" if _ended_inside(text, exc) else "not_json"
    except ValueError:
        return "not_json"
    return None if validator.is_valid(value) else "schema"
