"""The endpoint's own tokenizer route: prompts of an exact token count, and output counts.

vLLM, SGLang and `infercost sim` answer `POST {server root}/tokenize` with
`{"model", "prompt"}` or `{"model", "messages"}` (the chat template applied) and return
`{"count", "tokens", "max_model_len"}`. With it the worker calibrates once per endpoint and
model (tokens per prompt word, and the tokens a prompt carries beyond its words: BOS, the
chat template), then checks each prepared prompt before the level's clock starts and adds or
removes words until the count is exact. Without it, prompts are estimated (PromptMaker,
calibrated by usage) and each request says so.

None of this runs on the timed path: prompts are checked before a level starts and output
text is counted after it ends.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx
import msgspec

from infercost.workload import PromptMaker
from workers.loadgen.stream import RawRequest, Target

#: Seconds one tokenize call may take.
TOKENIZE_TIMEOUT_S = 10.0
#: Words between the two calibration prompts (their count difference gives tokens per word).
CALIBRATION_WORDS = 256
#: Tokenize calls per prompt at most (the first check plus corrections).
MAX_ATTEMPTS = 8
#: Tokenize calls in flight at once while prompts are prepared or outputs counted.
PARALLEL = 8
#: Prompts checked per level at most; later ones (a long level of fixed duration) are built
#: from the calibration alone and marked approximate.
MAX_CHECKED_PROMPTS = 4096
#: How long a failed probe is remembered before the route is tried again.
NO_ROUTE_TTL_S = 300.0

EXACT = "exact"
APPROXIMATE = "approximate"

_T = TypeVar("_T")


class TokenizerError(Exception):
    """The tokenizer route did not answer with a count."""


class _Counted(msgspec.Struct):
    count: int | None = None
    tokens: list[Any] | None = None


_decode_counted = msgspec.json.Decoder(_Counted).decode


def tokenize_url(base_url: str) -> str:
    """`{server root}/tokenize`: the OpenAI base URL without its trailing `/v1`."""
    root = base_url.rstrip("/")
    root = root.removesuffix("/v1")
    return root + "/tokenize"


@dataclass(frozen=True, slots=True)
class Tokenizer:
    """One endpoint's tokenizer route, for its model and API (chat applies the template)."""

    url: str
    model: str
    chat: bool
    headers: dict[str, str]

    @classmethod
    def for_target(cls, target: Target) -> Tokenizer:
        """The route next to a target's generation route, with its credentials."""
        headers = {"Content-Type": "application/json"}
        if "Authorization" in target.headers:
            headers["Authorization"] = target.headers["Authorization"]
        return cls(
            tokenize_url(target.base_url), target.model, target.api == "openai-chat", headers
        )

    @property
    def key(self) -> tuple[str, str, bool]:
        """What a calibration depends on: the route, the model and the prompt's shape."""
        return (self.url, self.model, self.chat)

    async def count(self, client: httpx.AsyncClient, text: str, *, as_prompt: bool = True) -> int:
        """Tokens the server counts for `text`: as this endpoint's prompt (`as_prompt`: in a
        user message under the chat template, or as a completion prompt with its special
        tokens), or as bare generated text (no special tokens)."""
        body: dict[str, Any] = {"model": self.model}
        if as_prompt and self.chat:
            body["messages"] = [{"role": "user", "content": text}]
        else:
            body["prompt"] = text
            if not as_prompt:
                body["add_special_tokens"] = False
        try:
            response = await client.post(
                self.url,
                content=msgspec.json.encode(body),
                headers=self.headers,
                timeout=TOKENIZE_TIMEOUT_S,
            )
        except httpx.HTTPError as exc:
            raise TokenizerError(f"{type(exc).__name__}: {str(exc)[:200]}") from None
        if response.status_code != 200:
            raise TokenizerError(f"HTTP {response.status_code} from {self.url}")
        try:
            counted = _decode_counted(response.content)
        except msgspec.DecodeError as exc:
            raise TokenizerError(f"unreadable answer from {self.url}: {exc}") from None
        if counted.count is not None:
            return counted.count
        if counted.tokens is not None:
            return len(counted.tokens)
        raise TokenizerError(f"{self.url} answered without count or tokens")


@dataclass(frozen=True, slots=True)
class Calibration:
    """How the server counts a prompt of n words: about overhead + n x tokens_per_word."""

    tokens_per_word: float
    overhead: float

    def words_for(self, tokens: int) -> int:
        """Words for a prompt of about `tokens` tokens (at least one)."""
        return max(1, round((tokens - self.overhead) / self.tokens_per_word))


async def calibrate(
    client: httpx.AsyncClient, tokenizer: Tokenizer, maker: PromptMaker
) -> Calibration | None:
    """Tokens per word and fixed overhead from two prompts; None when the route fails."""
    try:
        short = await tokenizer.count(client, maker.make(0, 1))
        long = await tokenizer.count(client, maker.make(0, 1 + CALIBRATION_WORDS))
    except TokenizerError:
        return None
    per_word = (long - short) / CALIBRATION_WORDS
    if per_word <= 0:
        return None
    return Calibration(per_word, short - per_word)


class Calibrations:
    """Calibrations by (tokenizer route, model, chat or not), kept for the worker process.

    A route that failed is tried again after NO_ROUTE_TTL_S, in case the server changed.
    """

    def __init__(self) -> None:
        self._known: dict[tuple[str, str, bool], tuple[float, Calibration | None]] = {}
        self._locks: dict[tuple[str, str, bool], asyncio.Lock] = {}

    async def get(
        self, client: httpx.AsyncClient, tokenizer: Tokenizer, maker: PromptMaker
    ) -> Calibration | None:
        """The route's calibration, measured on first use."""
        key = tokenizer.key
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            known = self._known.get(key)
            if known is not None:
                at, calibration = known
                if calibration is not None or time.monotonic() - at < NO_ROUTE_TTL_S:
                    return calibration
            calibration = await calibrate(client, tokenizer, maker)
            self._known[key] = (time.monotonic(), calibration)
            return calibration


#: This worker process's calibrations (plain data, no connection: safe at import).
CALIBRATIONS = Calibrations()


#: A prompt within this many tokens under its target is padded (one token a pad word)
#: rather than given more pool words.
PAD_RANGE = 16


@dataclass(frozen=True, slots=True)
class Prepared:
    """How prompt `seq` is built (PromptMaker.make(seq, words, pad)), and whether the
    endpoint's tokenizer counted exactly the wanted tokens for it."""

    words: int
    pad: int
    exact: bool


async def exact_words(
    client: httpx.AsyncClient,
    tokenizer: Tokenizer,
    calibration: Calibration,
    maker: PromptMaker,
    *,
    seq: int,
    tokens: int,
) -> Prepared:
    """The words and padding that make prompt `seq` exactly `tokens` tokens, if reachable.

    Starts from the calibration's estimate; while too long, drops words (erring short);
    while far too short, adds words; once a few tokens short, pads with one-token words and
    corrects the padding by what the tokenizer counts. At most MAX_ATTEMPTS tokenize calls;
    without an exact match it returns the closest prompt seen.
    """
    per_word = calibration.tokens_per_word
    words, pad = calibration.words_for(tokens), 0
    best: tuple[int, int, int] | None = None  # (|miss|, words, pad)
    for _ in range(MAX_ATTEMPTS):
        try:
            counted = await tokenizer.count(client, maker.make(seq, words, pad))
        except TokenizerError:
            break
        miss = tokens - counted
        if best is None or abs(miss) < best[0]:
            best = (abs(miss), words, pad)
        if miss == 0:
            return Prepared(words, pad, True)
        if pad > 0 or 0 < miss <= PAD_RANGE:
            # Fine: a pad word is one token, so the padding moves by the miss.
            pad += miss
            if pad >= 0:
                continue
            pad = 0
            miss = -1  # padding alone cannot shorten it: fewer words
        if miss < 0:
            if words == 1:
                break  # the shortest prompt there is (the template alone is longer)
            words = max(1, min(words - 1, words + math.floor(miss / per_word)))
        else:
            # Far too short: more words, staying under the target to finish with padding.
            words += max(1, math.floor((miss - 1) / per_word))
    if best is None:
        return Prepared(words, 0, False)
    return Prepared(best[1], best[2], False)


async def bounded(calls: Iterable[Callable[[], Awaitable[_T]]], parallel: int) -> list[_T]:
    """Run the calls with at most `parallel` in flight; results in the calls' order."""
    gate = asyncio.Semaphore(parallel)

    async def one(call: Callable[[], Awaitable[_T]]) -> _T:
        async with gate:
            return await call()

    return list(await asyncio.gather(*(one(c) for c in calls)))


async def prepare_prompts(
    client: httpx.AsyncClient,
    tokenizer: Tokenizer,
    calibration: Calibration,
    maker: PromptMaker,
    lengths: Sequence[int],
    *,
    check: Callable[[int], bool] | None = None,
) -> list[Prepared]:
    """How to build prompts seq = 0, 1, ... of exactly `lengths[seq]` tokens, checked with
    the tokenizer; done before a level starts so sends never wait for it. Prompts that
    `check(seq)` rejects (another shard sends them) are only estimated, never sent here."""

    async def estimated(tokens: int) -> Prepared:
        return Prepared(calibration.words_for(tokens), 0, exact=False)

    def call(seq: int, tokens: int) -> Callable[[], Awaitable[Prepared]]:
        if check is not None and not check(seq):
            return lambda: estimated(tokens)
        return lambda: exact_words(client, tokenizer, calibration, maker, seq=seq, tokens=tokens)

    return await bounded((call(s, n) for s, n in enumerate(lengths)), PARALLEL)


async def count_outputs(
    client: httpx.AsyncClient, tokenizer: Tokenizer, recs: Sequence[RawRequest]
) -> None:
    """Replace event counts with the tokenizer's count of the received text, for requests
    whose server sent no usage (METRICS.md n_out); run after the level, off the clock.
    A request whose text cannot be counted keeps its event count."""
    todo = [r for r in recs if r.text and r.count_source != "usage"]

    def call(rec: RawRequest) -> Callable[[], Awaitable[None]]:
        async def go() -> None:
            try:
                rec.n_out = await tokenizer.count(client, "".join(rec.text or ()), as_prompt=False)
            except TokenizerError:
                return
            rec.count_source = "tokenizer"

        return go

    await bounded((call(r) for r in todo), PARALLEL)
    for rec in recs:
        rec.text = None
