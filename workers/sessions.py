"""Multi-turn sessions: closed-loop users replaying conversations with their real answers.

Every conversation starts with the same system prompt (so prefix caching is exercised),
then sends turn after turn: the whole history so far (earlier user messages and the
model's actual answers) plus the next user message. A finished request puts its
conversation back in a pool; the next request a user sends continues a conversation from
that pool, or starts a new one when the pool is empty, so `concurrency` users keep
`concurrency` conversations going.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Message = dict[str, Any]

#: Characters per token assumed for a local prompt count (English text, common tokenizers);
#: the server's usage.prompt_tokens replaces it whenever the server sends usage.
CHARS_PER_TOKEN = 4.0


def estimate_tokens(chars: int) -> int:
    """A local estimate of a prompt's tokens from its length in characters (at least 1)."""
    return max(1, round(chars / CHARS_PER_TOKEN))


@dataclass(slots=True)
class Script:
    """A conversation to replay: what to send before each turn's answer, and max_tokens.

    `turns[k]` holds the messages that come before the k-th answer (a user message, and
    any system messages before it); recorded answers are left out, the model writes them.
    """

    turns: list[list[Message]]
    max_tokens: int | None = None


def script_of(messages: list[Message] | None, prompt: str, max_tokens: int | None) -> Script:
    """A dataset item as a script: one turn per user message (a prompt is one turn)."""
    if messages is None:
        return Script([[{"role": "user", "content": prompt}]], max_tokens)
    turns: list[list[Message]] = []
    pending: list[Message] = []
    for message in messages:
        if message["role"] == "assistant":
            continue
        pending.append(message)
        if message["role"] == "user":
            turns.append(pending)
            pending = []
    return Script(turns, max_tokens)


@dataclass(slots=True)
class Conversation:
    """One conversation in progress: its history and the turns still to send."""

    script: Script
    history: list[Message]
    turn: int = 0
    # The messages sent on the turn in flight (history plus this turn's new ones).
    sent: list[Message] = field(default_factory=list)


class Sessions:
    """The conversations of one level: which one request `seq` continues, what it sends,
    and what its answer adds to the history."""

    def __init__(
        self, turns: int, system_prompt: str | None, new_script: Callable[[int], Script]
    ) -> None:
        self.turns = turns
        self.system = [{"role": "system", "content": system_prompt}] if system_prompt else []
        self.new_script = new_script
        self.started = 0
        self.ready: deque[Conversation] = deque()
        self.in_flight: dict[int, Conversation] = {}

    def next(self, seq: int) -> tuple[list[Message], int | None, int]:
        """Request `seq`'s messages, its script's max_tokens (None: draw one) and a local
        estimate of its prompt tokens."""
        if self.ready:
            conversation = self.ready.popleft()
        else:
            conversation = Conversation(self.new_script(self.started), list(self.system))
            self.started += 1
        conversation.sent = conversation.history + conversation.script.turns[conversation.turn]
        self.in_flight[seq] = conversation
        chars = sum(len(str(m["content"])) for m in conversation.sent)
        return (
            conversation.sent,
            conversation.script.max_tokens,
            estimate_tokens(chars),
        )

    def done(self, seq: int, answer: str | None) -> None:
        """Request `seq` ended with `answer` (None: it failed, and its conversation ends
        there; the history must hold real answers only)."""
        conversation = self.in_flight.pop(seq, None)
        if conversation is None or answer is None:
            return
        conversation.history = [*conversation.sent, {"role": "assistant", "content": answer}]
        conversation.turn += 1
        if conversation.turn < min(self.turns, len(conversation.script.turns)):
            self.ready.append(conversation)
