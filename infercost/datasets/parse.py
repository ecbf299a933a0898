"""Parse an uploaded dataset into items, or say which line is wrong and why.

JSONL (`jsonl`): one object a line, either a completion prompt `{"prompt": "...",
"max_tokens"?: n}` or chat `{"messages": [{"role", "content"}, ...], "max_tokens"?: n}`. A
chat item may carry request features of its own (FEATURE_FIELDS): "tools" (function
definitions) with "tool_choice", "response_format" (a json_schema) and "images" (image URLs,
data URLs included), sent with it and judged by them.
ShareGPT (`sharegpt`): a JSON array (or JSONL) of `{"conversations": [{"from": "human" |
"gpt" | "system", "value": "..."}]}`; conversations without a human turn are skipped (real
ShareGPT dumps hold empty ones), everything else malformed is refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import msgspec

from infercost.limits import MAX_JSON_DEPTH, MAX_TOKENS, too_deep

ROLES = ("system", "user", "assistant")
#: ShareGPT speakers and the chat role each becomes.
SHAREGPT_ROLES = {
    "system": "system",
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "chatgpt": "assistant",
    "bard": "assistant",
    "assistant": "assistant",
}
_BYTE = re.compile(r"\(byte (\d+)\)")
_MESSAGES = (
    '"messages" must be a non-empty list of {role, content} with role system, user or assistant'
)


class DatasetError(ValueError):
    """Malformed input: `where` is "line 7" or "item 3", `problem` what is wrong there."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"{where}: {problem}")
        self.where = where
        self.problem = problem


@dataclass(frozen=True, slots=True)
class Item:
    """One prompt (completions) or message list (chat), with its own max_tokens if given."""

    prompt: str | None = None
    messages: list[dict[str, str]] | None = None
    max_tokens: int | None = None
    # Request features of its own (FEATURE_FIELDS), as uploaded and checked; None: none.
    features: dict[str, Any] | None = None

    @property
    def user_turns(self) -> int:
        """How many user messages the item holds (a prompt is one)."""
        if self.messages is None:
            return 1
        return sum(1 for m in self.messages if m["role"] == "user")


@dataclass(slots=True)
class Parsed:
    """A parsed upload: its items and how many conversations were skipped."""

    items: list[Item] = field(default_factory=list)
    skipped: int = 0


_TOO_DEEP = (
    f"nested more than {MAX_JSON_DEPTH} levels deep (arrays and objects inside one another); "
    "a prompt or conversation needs a handful"
)


def _max_tokens(obj: dict[str, Any]) -> int | None:
    value = obj.get("max_tokens")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_TOKENS:
        raise ValueError(f'"max_tokens" must be a whole number from 1 to {MAX_TOKENS:,}')
    return value


#: Fields a chat item may carry beyond its messages: its own request features.
FEATURE_FIELDS = ("tools", "tool_choice", "response_format", "images")


def _features(obj: dict[str, Any]) -> dict[str, Any] | None:
    """An item's own request features, checked; None when it has none."""
    given = {k: obj[k] for k in FEATURE_FIELDS if k in obj}
    if not given:
        return None
    if "messages" not in obj:
        raise ValueError(f'"{next(iter(given))}" goes with chat items ("messages") only')
    tools = given.get("tools")
    if tools is not None and (
        not isinstance(tools, list)
        or not tools
        or not all(
            isinstance(t, dict)
            and isinstance(t.get("function"), dict)
            and isinstance(t["function"].get("name"), str)
            and isinstance(t["function"].get("parameters", {}), dict)
            for t in tools
        )
    ):
        raise ValueError(
            '"tools" must be a non-empty list of {"type": "function", "function": {"name", '
            '"parameters"}}'
        )
    if "tool_choice" in given and not isinstance(given["tool_choice"], str | dict):
        raise ValueError('"tool_choice" must be "auto", "required", "none" or an object')
    response = given.get("response_format")
    if response is not None and not (
        isinstance(response, dict) and isinstance(response.get("type"), str)
    ):
        raise ValueError('"response_format" must be an object with a "type"')
    images = given.get("images")
    if images is not None and (
        not isinstance(images, list)
        or not images
        or not all(isinstance(url, str) and url for url in images)
    ):
        raise ValueError('"images" must be a non-empty list of image URLs (data URLs too)')
    return given


def _jsonl_item(obj: Any) -> Item:
    if not isinstance(obj, dict):
        raise ValueError('expected an object with "prompt" or "messages"')
    unknown = set(obj) - {"prompt", "messages", "max_tokens", *FEATURE_FIELDS}
    if unknown:
        raise ValueError(
            f'unknown field "{sorted(unknown)[0]}"; expected "prompt" or "messages", '
            'and optionally "max_tokens" (and, with messages, "tools", "tool_choice", '
            '"response_format", "images")'
        )
    features = _features(obj)
    has_prompt, has_messages = "prompt" in obj, "messages" in obj
    if has_prompt == has_messages:
        raise ValueError('give exactly one of "prompt" (completions) or "messages" (chat)')
    if has_prompt:
        prompt = obj["prompt"]
        if not isinstance(prompt, str) or not prompt:
            raise ValueError('"prompt" must be a non-empty string')
        return Item(prompt=prompt, max_tokens=_max_tokens(obj))
    messages = obj["messages"]
    if not isinstance(messages, list) or not messages:
        raise ValueError(_MESSAGES)
    clean: list[dict[str, str]] = []
    for m in messages:
        if (
            not isinstance(m, dict)
            or set(m) != {"role", "content"}
            or m["role"] not in ROLES
            or not isinstance(m["content"], str)
        ):
            raise ValueError(_MESSAGES)
        clean.append({"role": m["role"], "content": m["content"]})
    if not any(m["role"] == "user" for m in clean):
        raise ValueError('"messages" needs at least one message with role "user"')
    return Item(messages=clean, max_tokens=_max_tokens(obj), features=features)


def _sharegpt_item(obj: Any) -> Item | None:
    """The conversation as chat messages; None when it has no human turn (skipped)."""
    turns = obj.get("conversations") if isinstance(obj, dict) else None
    if not isinstance(turns, list):
        raise ValueError('expected an object with "conversations": [{"from", "value"}, ...]')
    messages: list[dict[str, str]] = []
    for turn in turns:
        if not isinstance(turn, dict) or not isinstance(turn.get("value"), str):
            raise ValueError('each of "conversations" must be {"from": ..., "value": "text"}')
        role = SHAREGPT_ROLES.get(str(turn.get("from", "")).lower())
        if role is None:
            raise ValueError(f'"from" is {turn.get("from")!r}; expected "human", "gpt" or "system"')
        # Replies before the first human turn have nothing to answer: left out.
        if role == "assistant" and not any(m["role"] == "user" for m in messages):
            continue
        messages.append({"role": role, "content": turn["value"]})
    if not any(m["role"] == "user" for m in messages):
        return None
    return Item(messages=messages, max_tokens=_max_tokens(obj))


def _line_of(data: bytes, message: str) -> str:
    match = _BYTE.search(message)
    # Without a position the input ended early: the last line is where it went wrong.
    end = len(data.rstrip()) if match is None else int(match.group(1))
    line = data.count(b"\n", 0, end) + 1
    return f"line {line}"


def _parse_array(data: bytes, parsed: Parsed) -> None:
    """A ShareGPT JSON array; errors name the item (1-based), or the line of bad JSON."""
    if too_deep(data):
        raise DatasetError("line 1", _TOO_DEEP)
    try:
        array = msgspec.json.decode(data)
    except msgspec.DecodeError as exc:
        raise DatasetError(_line_of(data, str(exc)), f"not valid JSON ({exc})") from None
    for index, obj in enumerate(array, start=1):
        try:
            item = _sharegpt_item(obj)
        except ValueError as exc:
            raise DatasetError(f"item {index}", str(exc)) from None
        if item is None:
            parsed.skipped += 1
        else:
            parsed.items.append(item)


def _parse_lines(text: str, fmt: str, parsed: Parsed) -> None:
    """One JSON object a line (blank lines ignored); errors name the line (1-based)."""
    convert = _sharegpt_item if fmt == "sharegpt" else _jsonl_item
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        if too_deep(line):
            raise DatasetError(f"line {number}", _TOO_DEEP)
        try:
            obj = msgspec.json.decode(line)
        except msgspec.DecodeError:
            raise DatasetError(f"line {number}", "not a valid JSON object") from None
        try:
            item = convert(obj)
        except ValueError as exc:
            raise DatasetError(f"line {number}", str(exc)) from None
        if item is None:
            parsed.skipped += 1
        else:
            parsed.items.append(item)


def parse_dataset(data: bytes, fmt: str) -> Parsed:
    """The items of an upload in `fmt` ("jsonl" or "sharegpt"); DatasetError names the
    first bad line (JSONL) or item (a JSON array) and what is wrong with it."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise DatasetError(f"line {line}", "not UTF-8 text") from None
    nul = data.find(b"\\u0000")
    if nul >= 0:
        # Valid JSON, but Postgres stores no NUL character in text or JSONB.
        line = data.count(b"\n", 0, nul) + 1
        raise DatasetError(f"line {line}", "contains a NUL character (\\u0000): remove it")
    parsed = Parsed()
    if fmt == "sharegpt" and text.lstrip().startswith("["):
        _parse_array(data, parsed)
    else:
        _parse_lines(text, fmt, parsed)
    if not parsed.items:
        raise DatasetError("line 1", "the dataset holds no prompts")
    return parsed
