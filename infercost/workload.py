"""Synthetic workloads: token lengths drawn from distributions, prompts of about that length."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

# Common short English words: each is one token in the tokenizers of popular open models,
# so a prompt of n words is close to n tokens before calibration corrects the rest.
_WORDS = [
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "was",
    "for",
    "on",
    "are",
    "as",
    "with",
    "his",
    "they",
    "at",
    "be",
    "this",
    "from",
    "have",
    "or",
    "by",
    "one",
    "had",
    "not",
    "but",
    "what",
    "all",
    "were",
    "when",
    "we",
    "there",
    "can",
    "an",
    "your",
    "which",
    "their",
    "said",
    "if",
    "do",
    "will",
    "each",
    "about",
    "how",
    "up",
    "out",
    "them",
    "then",
    "she",
    "many",
    "some",
    "so",
    "these",
    "would",
    "other",
    "into",
    "has",
    "more",
    "her",
    "two",
    "like",
    "him",
    "see",
    "time",
    "could",
    "no",
    "make",
    "than",
    "first",
    "been",
    "its",
    "who",
    "now",
    "people",
    "my",
    "made",
    "over",
    "did",
    "down",
    "only",
    "way",
    "find",
    "use",
    "may",
    "water",
    "long",
    "little",
    "very",
    "after",
    "words",
    "called",
    "just",
    "where",
    "most",
    "know",
    "get",
    "through",
    "back",
    "much",
    "before",
    "go",
    "good",
    "new",
    "write",
    "our",
    "used",
    "me",
    "man",
    "too",
    "any",
    "day",
    "same",
    "right",
    "look",
    "think",
    "also",
    "around",
    "another",
    "came",
    "come",
    "work",
    "three",
    "word",
    "must",
    "because",
    "does",
    "part",
    "even",
    "place",
    "well",
    "such",
    "here",
]


def draw_lengths(spec: Mapping[str, Any], n: int, rng: np.random.Generator) -> np.ndarray:
    """`n` integer lengths from normal(mean, std), rounded and clipped to [min or 1, max]."""
    mean = float(spec["mean"])
    std = float(spec.get("std") or 0.0)
    values = rng.normal(mean, std, n) if std > 0 else np.full(n, mean)
    low = int(spec.get("min") or 1)
    high = spec.get("max")
    clipped = np.clip(np.rint(values), low, None if high is None else int(high))
    return clipped.astype(np.int64)


class LengthDraws:
    """Token lengths by request number: `first` drawn up front, more on demand.

    A level of fixed duration does not know its request count in advance. Drawing the known
    count in one call keeps the lengths of a counted level exactly what `draw_lengths` gives.
    """

    def __init__(self, spec: Mapping[str, Any], first: int, rng: np.random.Generator) -> None:
        self._spec = spec
        self._rng = rng
        self._values = draw_lengths(spec, first, rng)

    def __getitem__(self, seq: int) -> int:
        while seq >= len(self._values):
            more = draw_lengths(self._spec, max(len(self._values), 256), self._rng)
            self._values = np.concatenate([self._values, more])
        return int(self._values[seq])


class PromptMaker:
    """Makes distinct prompts of a requested token length, calibrated by what the server counts.

    Every prompt starts with its own sequence number, so no two share a cacheable prefix.
    `observe` feeds back the server's prompt_tokens, and the words-per-token ratio follows.
    """

    def __init__(self, rng: np.random.Generator, pool_words: int = 65_536) -> None:
        self._pool = [_WORDS[i] for i in rng.integers(0, len(_WORDS), pool_words)]
        self._cursor = 0
        self._tokens_seen = 0
        self._words_sent = 0

    @property
    def tokens_per_word(self) -> float:
        """The server's tokens per prompt word so far (1.0 before any observation)."""
        if self._words_sent == 0 or self._tokens_seen == 0:
            return 1.0
        return self._tokens_seen / self._words_sent

    def words_for(self, tokens: int) -> int:
        """How many words to send to get about `tokens` prompt tokens."""
        return max(1, round(tokens / self.tokens_per_word))

    def make(self, seq: int, words: int) -> str:
        """A prompt of `words` words (the sequence number counts as one)."""
        body = max(0, words - 1)
        pool = self._pool
        start = self._cursor
        end = start + body
        if end > len(pool):
            start, end = 0, body
        self._cursor = end % len(pool)
        chunk = pool[start:end] if body <= len(pool) else (pool * (body // len(pool) + 1))[:body]
        return f"{seq} " + " ".join(chunk)

    def observe(self, words: int, prompt_tokens: int) -> None:
        """Record that `words` words counted as `prompt_tokens` tokens on the server."""
        self._words_sent += words
        self._tokens_seen += prompt_tokens
