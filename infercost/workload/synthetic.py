"""Synthetic workloads: token lengths drawn from distributions, prompts of about that length."""

from __future__ import annotations

import math
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


#: The words synthetic text is made of (each one token in popular open models' tokenizers).
WORDS: tuple[str, ...] = tuple(_WORDS)

#: Length distributions a workload may ask for; "normal" (std 0 or absent: fixed) is the default.
DISTRIBUTIONS = ("normal", "uniform", "lognormal")


def lognormal_params(mean: float, std: float) -> tuple[float, float]:
    """(mu, sigma) of the underlying normal for a lognormal of this mean and std.

    The moment formulas: sigma^2 = ln(1 + std^2 / mean^2), mu = ln(mean) - sigma^2 / 2, so
    a job states the mean and spread of the lengths it wants, not of their logarithms.
    """
    sigma2 = math.log1p((std / mean) ** 2)
    return math.log(mean) - sigma2 / 2.0, math.sqrt(sigma2)


def draw_lengths(spec: Mapping[str, Any], n: int, rng: np.random.Generator) -> np.ndarray:
    """`n` integer lengths from the spec's distribution, rounded and clipped to [min or 1, max].

    normal: {"mean", "std"} (std 0 or absent: every length is the mean); uniform: {"min",
    "max"}, every integer between them equally likely; lognormal: {"mean", "std"} of the
    lengths themselves. Draws outside [min, max] are clipped to the bound, never redrawn.
    """
    kind = spec.get("distribution") or "normal"
    low = int(spec.get("min") or 1)
    high = spec.get("max")
    values: np.ndarray
    if kind == "uniform":
        values = rng.integers(low, int(spec["max"]), n, endpoint=True).astype(np.float64)
    elif kind == "lognormal":
        mu, sigma = lognormal_params(float(spec["mean"]), float(spec["std"]))
        values = rng.lognormal(mu, sigma, n)
    elif kind == "normal":
        mean = float(spec["mean"])
        std = float(spec.get("std") or 0.0)
        values = rng.normal(mean, std, n) if std > 0 else np.full(n, mean)
    else:
        raise ValueError(f"unknown length distribution {kind!r}; expected one of {DISTRIBUTIONS}")
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


#: Where prompt `seq` starts in the word pool: seq x this stride (odd and prime, so every
#: start differs for as many prompts as the pool has words).
_POOL_STRIDE = 7919

#: The word that pads a checked prompt to its exact length.
PAD_WORD = "the"
_PAD = " " + PAD_WORD


class PromptMaker:
    """Makes distinct prompts of a requested token length, calibrated by what the server counts.

    Every prompt starts with its own sequence number, so no two share a cacheable prefix, and
    its words are a function of (seq, words) alone: a prompt whose token count was checked
    before a level starts can be rebuilt, identical, when it is sent. `observe` feeds back the
    server's prompt_tokens, and the words-per-token ratio follows.
    """

    def __init__(
        self,
        rng: np.random.Generator,
        pool_words: int = 65_536,
        *,
        prefixes: int = 0,
        prefix_words: int = 0,
    ) -> None:
        self._pool = [_WORDS[i] for i in rng.integers(0, len(_WORDS), pool_words)]
        self._tokens_seen = 0
        self._words_sent = 0
        # Shared prefixes (workload.prefix): `prefixes` texts of `prefix_words` words each
        # (about one token a word), drawn after the pool so prompts without them are
        # unchanged. Prompt seq starts with prefix seq mod prefixes.
        self.prefix_words = prefix_words if prefixes else 0
        self._prefixes = [
            " ".join(_WORDS[i] for i in rng.integers(0, len(_WORDS), prefix_words))
            for _ in range(prefixes if prefix_words else 0)
        ]

    @property
    def tokens_per_word(self) -> float:
        """The server's tokens per prompt word so far (1.0 before any observation)."""
        if self._words_sent == 0 or self._tokens_seen == 0:
            return 1.0
        return self._tokens_seen / self._words_sent

    def words_for(self, tokens: int) -> int:
        """How many words to send to get about `tokens` prompt tokens."""
        return max(1, round(tokens / self.tokens_per_word))

    def make(self, seq: int, words: int, pad: int = 0) -> str:
        """Prompt `seq` of `words` words (the sequence number counts as one), then `pad`
        times PAD_WORD; the same arguments always give the same text.

        Padding fine-tunes a prompt checked with a tokenizer: a pool word can be more than
        one token, so adding a word may skip past the wanted count, while PAD_WORD is one
        token in the tokenizers of popular open models. With shared prefixes the prompt is
        its prefix, then its own part (at least its number).
        """
        if self._prefixes:
            # The prefix's words count towards `words`; the rest is this prompt's own.
            shared = self._prefixes[seq % len(self._prefixes)]
            rest = self._own(seq, max(1, words - self.prefix_words), pad)
            return f"{shared} {rest}"
        return self._own(seq, words, pad)

    def _own(self, seq: int, words: int, pad: int) -> str:
        """The part of prompt `seq` that is its own: its number, then pool words, then pad."""
        body = max(0, words - 1)
        pool = self._pool
        size = len(pool)
        start = (seq * _POOL_STRIDE) % size
        if start + body <= size:
            chunk = pool[start : start + body]
        else:
            chunk = (pool[start:] + pool * (body // size + 1))[:body]
        text = f"{seq} " + " ".join(chunk) if chunk else str(seq)
        return text + _PAD * pad if pad > 0 else text

    def observe(self, words: int, prompt_tokens: int) -> None:
        """Record that `words` words counted as `prompt_tokens` tokens on the server."""
        self._words_sent += words
        self._tokens_seen += prompt_tokens
