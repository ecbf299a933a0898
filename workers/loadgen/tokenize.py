"""The endpoint's own tokenizer: prompts of an exact token count, and output counts.

Engines answer different tokenizer requests, so the worker probes the forms each engine's
source defines (read there, December 2026) and keeps the first whose answers hold up:

- vLLM (vllm/entrypoints/serve/tokenize/api_router.py, protocol.py): `POST /tokenize` at
  the server root, `{"model", "prompt", "add_special_tokens"}` or `{"model", "messages"}`
  (the chat template applied as chat completions apply it), answer
  `{"count", "max_model_len", "tokens"}`.
- SGLang (python/sglang/srt/entrypoints/http_server.py, openai/serving_tokenize.py):
  `POST /v1/tokenize` and `/tokenize`, vLLM's `prompt` body (no `messages`), same answer.
- TGI (router/src/server.rs, lib.rs): `POST /tokenize` `{"inputs"}`, answer a list of
  `{"id", "text", "start", "stop"}`, special tokens always added; `POST /chat_tokenize`
  takes a chat request and answers `{"tokenize_response": [...], "templated_text"}`.
- llama.cpp (tools/server/server-context.cpp, server.cpp): `POST /tokenize`
  `{"content", "add_special"}`, answer `{"tokens": [...]}`; any other body gets
  `{"tokens": []}`, which is why an empty answer never counts. (Recent builds also serve
  /apply-template and /v1/chat/completions/input_tokens; the usage check below serves every
  build.)

Each form is tried at the server root and under the base URL's `/v1`, the endpoint's
declared engine first. A form counts only when its answers are consistent (probe_tokenizer).

Chat templates and BOS: a form that takes `messages` counts a chat prompt as the server
will, and a completion prompt is counted with the special tokens (BOS) the server adds. A
form that tokenizes raw text only (llama.cpp content, SGLang prompt, TGI inputs without
/chat_tokenize) counts a message's text, not the template around it. Either way the probe
then sends two one-token requests (a short and a long text) and reads the server's own
`usage.prompt_tokens`: a whole-prompt count must equal it; otherwise, and for raw text, the
tokens the server adds are usage minus the text's count, and must be the same for both
texts (a constant the server really adds). That gives the exact n_in the server reports.
Without usage a whole-prompt form is used unchecked, and a raw-text form on a chat endpoint
counts the text only: the probe says its lengths are approximate.

With a tokenizer the worker calibrates once per endpoint (tokens per prompt word, and the
tokens a prompt carries beyond its words), then checks each prepared prompt before the
level's clock starts and adds or removes words until the count is exact. Without one,
prompts are estimated (PromptMaker, calibrated by usage) and the run says so up front.

None of this runs on the timed path: prompts are checked before a level starts and output
text is counted after it ends.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import httpx
import msgspec

from infercost.engines import catalog
from infercost.engines.catalog import CHAT_FORMS, MESSAGES, PROMPT, TokenizeForm
from infercost.workload.synthetic import PromptMaker
from workers.loadgen.stream import RawRequest, Target, request_body
from workers.loadgen.transport import SLOT

#: Seconds one tokenize call may take.
TOKENIZE_TIMEOUT_S = 10.0
#: Seconds one tokenize call of the probe may take.
PROBE_TIMEOUT_S = 5.0
#: Seconds the one-token chat requests that measure a chat template may take.
USAGE_PROBE_TIMEOUT_S = 30.0
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
#: Most tokens a chat template (with its default system prompt) or BOS may plausibly add.
MAX_TEMPLATE_TOKENS = 4096

#: A plain English sentence of PROBE_WORDS words: every tokenizer gives it a few tokens a
#: word at most, and repeating it repeats its tokens.
PROBE_TEXT = "The quick brown fox jumps over the lazy dog while the farmer counts his sheep."
PROBE_WORDS = 15

EXACT = "exact"
APPROXIMATE = "approximate"

_T = TypeVar("_T")
#: What a calibration depends on: tokenizer URL, form name, model, chat or not, template.
CalibrationKey = tuple[str, str, str, bool, int | None]


class TokenizerError(Exception):
    """The tokenizer route did not answer with a count."""


class _Unreachable(TokenizerError):
    """The server did not answer at all (refused, timed out): no other form will do better."""


#: One engine's tokenize request (infercost/engines/catalog.py holds every engine's forms).
Form = TokenizeForm


def engine_key(engine: str | None) -> str | None:
    """The engine's catalog name (vllm, sglang, tgi, llamacpp...), or None."""
    return catalog.engine_key(engine)


def server_root(base_url: str) -> str:
    """The server root: the OpenAI base URL without its trailing `/v1`."""
    return catalog.server_root(base_url)


def tokenize_url(base_url: str) -> str:
    """`{server root}/tokenize`: where vLLM serves its tokenizer."""
    return server_root(base_url) + "/tokenize"


def _count_of(content: bytes) -> int:
    """The token count in any engine's answer: `count`, or the length of `tokens`,
    `tokenize_response` or of a bare list (TGI)."""
    try:
        answer = msgspec.json.decode(content)
    except msgspec.DecodeError as exc:
        raise TokenizerError(f"unreadable answer: {exc}") from None
    if isinstance(answer, list):
        return len(answer)
    if isinstance(answer, dict):
        count = answer.get("count")
        if isinstance(count, int) and not isinstance(count, bool):
            return count
        for key in ("tokens", "tokenize_response"):
            if isinstance(answer.get(key), list):
                return len(answer[key])
    raise TokenizerError("the answer has no count or tokens")


@dataclass(frozen=True, slots=True)
class Tokenizer:
    """One endpoint's tokenizer: a text form at `url`, optionally a chat form at `chat_url`,
    for its model and API (a chat endpoint's prompts carry the chat template).

    `template_tokens`: when set, a prompt counts as its text's tokens plus these (the chat
    template, BOS: what the server adds, measured from its usage). Unset, a prompt is counted
    by the chat form, or as a completion prompt with special tokens; a chat endpoint with
    neither is counted as text. `specials`: tokens a form that cannot leave them out adds to
    every text (TGI's BOS). `name` labels the text form, `chat_name` the chat form.
    """

    url: str
    model: str
    chat: bool
    headers: dict[str, str]
    form: Form = PROMPT
    chat_url: str | None = None
    chat_form: Form | None = None
    template_tokens: int | None = None
    specials: int = 0
    name: str = "vllm:/tokenize prompt"
    chat_name: str | None = None

    @classmethod
    def for_target(cls, target: Target) -> Tokenizer:
        """vLLM's route next to a target's generation route, with its credentials (the form
        assumed without a probe)."""
        url = tokenize_url(target.base_url)
        chat = target.api == "openai-chat"
        return cls(
            url,
            target.model,
            chat,
            _auth_headers(target),
            chat_url=url if chat else None,
            chat_form=MESSAGES if chat else None,
            chat_name="vllm:/tokenize messages" if chat else None,
        )

    @property
    def used(self) -> str:
        """The form that counts this endpoint's prompts (the chat form, where it does)."""
        if self.chat and self.chat_name is not None and self.template_tokens is None:
            return self.chat_name
        return self.name

    @property
    def key(self) -> CalibrationKey:
        """What a calibration depends on: the route and form, the model, the prompt's shape."""
        return (self.url, self.used, self.model, self.chat, self.template_tokens)

    async def count(
        self,
        client: httpx.AsyncClient,
        text: str,
        *,
        as_prompt: bool = True,
        slot: int | None = None,
    ) -> int:
        """Tokens the server counts for `text`: as this endpoint's prompt (`as_prompt`: in a
        user message under the chat template, or as a completion prompt with its special
        tokens), or as bare generated text (no special tokens). `slot`: see `ask`."""
        if as_prompt and self.template_tokens is not None:
            return await self.count_text(client, text, slot=slot) + self.template_tokens
        if as_prompt and self.chat:
            if self.chat_form is not None and self.chat_url is not None:
                return await self.ask(
                    client, self.chat_url, self.chat_form, text, special=False, slot=slot
                )
            return await self.count_text(client, text, slot=slot)
        if as_prompt:
            return await self.ask(client, self.url, self.form, text, special=True, slot=slot)
        return await self.count_text(client, text, slot=slot)

    async def count_text(
        self, client: httpx.AsyncClient, text: str, *, slot: int | None = None
    ) -> int:
        """Tokens of `text` alone: no special tokens, no template."""
        counted = await self.ask(client, self.url, self.form, text, special=False, slot=slot)
        return counted if self.form.special_key is not None else counted - self.specials

    async def ask(
        self,
        client: httpx.AsyncClient,
        url: str,
        form: Form,
        text: str,
        *,
        special: bool,
        limit_s: float = TOKENIZE_TIMEOUT_S,
        slot: int | None = None,
    ) -> int:
        """POST `text` in `form`'s body to `url`; the count in the answer. `slot`: on the
        worker's client, that slot's own connection (workers/loadgen/transport.py), a
        third of the CPU of its shared pool; many calls in a row go that way (`lanes`)."""
        body = form.body(self.model, text, special=special)
        try:
            response = await client.post(
                url,
                content=msgspec.json.encode(body),
                headers=self.headers,
                timeout=limit_s,
                extensions=None if slot is None else {SLOT: slot},
            )
        except (httpx.TimeoutException, httpx.ConnectError) as exc:
            raise _Unreachable(f"{type(exc).__name__} at {url}") from None
        except httpx.HTTPError as exc:
            raise TokenizerError(f"{type(exc).__name__}: {str(exc)[:200]}") from None
        if response.status_code != 200:
            raise TokenizerError(f"HTTP {response.status_code} from {url}")
        return _count_of(response.content)


def _auth_headers(target: Target) -> dict[str, str]:
    headers = {"Content-Type": "application/json"}
    if "Authorization" in target.headers:
        headers["Authorization"] = target.headers["Authorization"]
    return headers


# --- the probe -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TokenizerProbe:
    """What probing an endpoint's tokenizer found.

    `tokenizer` is None when no form answered consistently. `form` names the one used (e.g.
    "llamacpp:/tokenize content"). `exact`: prompts can be built to exactly the length the
    server will count. `template_tokens`: the chat template's tokens measured from usage
    (raw-text forms on chat endpoints). `note` says in a sentence what that means for prompt
    lengths; `tried` lists each form refused and why.
    """

    tokenizer: Tokenizer | None
    form: str | None
    exact: bool
    note: str
    template_tokens: int | None = None
    tried: tuple[str, ...] = ()

    def block(self) -> dict[str, Any]:
        """The run's `prompt_tokenizer` block (stored with its stats, shown in its summary)."""
        return {
            "form": self.form,
            "exact": self.exact,
            "template_tokens": self.template_tokens,
            "note": self.note,
        }


def _candidates(target: Target) -> list[tuple[Form, str, str]]:
    """(text form, URL, path shown) to try: the declared engine's form first, each at the
    server root and then under the base URL's /v1 (the endpoint check tries the same)."""
    return catalog.tokenize_candidates(target.base_url, target.engine)


def _label(form: Form, path: str, engine: str | None) -> str:
    """A form's short name: the engine (the declared one where it serves this form), the
    path used and the field, e.g. "sglang:/v1/tokenize prompt"."""
    who = engine if engine in form.engines else form.engines[0]
    return f"{who}:{path} {form.field}"


def _inconsistency(counts: Sequence[int], words: int) -> str | None:
    """Why counts of a text once, twice and four times cannot be a tokenizer's, or None.

    They must be non-empty and grow with the text, about linearly (the second doubling adds
    twice what the first did, within a token or two at the joins), and the text itself must
    cost a plausible number of tokens: at least one per two words, at most its characters.
    """
    one, two, four = counts
    if one <= 0:
        return f"empty answer ({one} tokens)"
    if not one < two < four:
        return f"no growth with longer text ({one}, {two}, {four} tokens)"
    step, double = two - one, four - two
    if abs(double - 2 * step) > max(2, 0.1 * double):
        return f"not linear in the text ({one}, {two}, {four} tokens)"
    if not words / 2 <= step <= len(PROBE_TEXT) + 1:
        return f"implausible {step} tokens for {words} words"
    if one - step > MAX_TEMPLATE_TOKENS:
        return f"implausible {one - step} tokens beyond the text"
    return None


async def _consistent(
    client: httpx.AsyncClient, tok: Tokenizer, url: str, form: Form, *, special: bool
) -> tuple[list[int] | None, str | None]:
    """The form's counts of PROBE_TEXT once, twice and four times, or why they don't hold."""
    counts: list[int] = []
    for times in (1, 2, 4):
        text = " ".join([PROBE_TEXT] * times)
        try:
            counts.append(
                await tok.ask(client, url, form, text, special=special, limit_s=PROBE_TIMEOUT_S)
            )
        except _Unreachable:
            raise
        except TokenizerError as exc:
            return None, str(exc)
    reason = _inconsistency(counts, PROBE_WORDS)
    return (counts, None) if reason is None else (None, reason)


async def _usage_prompt_tokens(client: httpx.AsyncClient, target: Target, text: str) -> int | None:
    """The server's usage.prompt_tokens for a one-token, non-streamed request of `text`."""
    body = request_body(target, text, 1, stream=False, ignore_eos=False, temperature=None)
    headers = {k: v for k, v in target.headers.items() if k != "Accept"}
    try:
        response = await client.post(
            target.url, content=body, headers=headers, timeout=USAGE_PROBE_TIMEOUT_S
        )
    except httpx.HTTPError:
        return None
    if response.status_code != 200:
        return None
    try:
        answer = msgspec.json.decode(response.content)
    except msgspec.DecodeError:
        return None
    usage = answer.get("usage") if isinstance(answer, dict) else None
    tokens = usage.get("prompt_tokens") if isinstance(usage, dict) else None
    return tokens if isinstance(tokens, int) and not isinstance(tokens, bool) else None


async def probe_tokenizer(client: httpx.AsyncClient, target: Target) -> TokenizerProbe:
    """Find the endpoint's tokenizer: try each engine's form (the declared engine's first)
    at the root and under /v1, keep the first whose counts are consistent, then settle how
    a prompt is counted and check that against the server's own usage (_settle).

    Sends only tokenize calls and, where the server has a tokenizer, two one-token
    non-streamed requests of the endpoint's API. Never raises: a probe that finds nothing
    says so.
    """
    engine = engine_key(target.engine)
    chat = target.api == "openai-chat"
    headers = _auth_headers(target)
    tried: list[str] = []
    found: Tokenizer | None = None
    try:
        for form, url, path in _candidates(target):
            name = _label(form, path, engine)
            tok = Tokenizer(url, target.model, chat, headers, form=form, name=name)
            counts, reason = await _consistent(client, tok, url, form, special=False)
            if counts is None:
                tried.append(f"{name}: {reason}")
                continue
            if form.special_key is None:
                # The form always adds special tokens (TGI): what an empty text costs.
                try:
                    specials = await tok.ask(
                        client, url, form, "", special=True, limit_s=PROBE_TIMEOUT_S
                    )
                except TokenizerError:
                    specials = max(0, 2 * counts[0] - counts[1])
                tok = replace(tok, specials=specials)
            found = tok
            break
        if found is not None and chat:
            found = await _with_chat_form(client, target, found, engine, tried)
    except _Unreachable as exc:
        tried.append(str(exc))
    if found is None:
        return TokenizerProbe(
            None,
            None,
            False,
            "no tokenizer route answered consistently, so prompt lengths are approximate "
            "(estimated, then corrected by the server's usage where it sends it): "
            + "; ".join(tried),
            tried=tuple(tried),
        )
    try:
        return await _settle(client, target, found, tried)
    except TokenizerError as exc:
        return TokenizerProbe(
            None,
            None,
            False,
            f"{found.used} stopped answering during the probe ({exc}), so prompt lengths "
            "are approximate",
            tried=tuple(tried),
        )


async def _with_chat_form(
    client: httpx.AsyncClient, target: Target, tok: Tokenizer, engine: str | None, tried: list[str]
) -> Tokenizer:
    """The tokenizer with the chat form served beside its text form, where that answers
    consistently (vLLM's messages at the same URL, TGI's /chat_tokenize at the root)."""
    chat_form = CHAT_FORMS.get(tok.form)
    if chat_form is None:
        return tok
    root = server_root(target.base_url)
    url = tok.url if chat_form.path == tok.form.path else root + chat_form.path
    shown = url[len(root) :] if url.startswith(root) else chat_form.path
    name = _label(chat_form, shown, engine)
    counts, reason = await _consistent(client, tok, url, chat_form, special=False)
    if counts is None:
        tried.append(f"{name}: {reason}")
        return tok
    return replace(tok, chat_url=url, chat_form=chat_form, chat_name=name)


async def _settle(
    client: httpx.AsyncClient, target: Target, tok: Tokenizer, tried: list[str]
) -> TokenizerProbe:
    """How prompts are counted, checked against the server's usage.prompt_tokens for a
    short and a long probe text sent as one-token requests.

    A form that counts the whole prompt (chat form, completion prompt with special tokens)
    is kept when it agrees with usage. Otherwise, and for a chat endpoint whose form counts
    raw text only, the tokens the server adds (template, BOS) are usage minus the text's
    count; they must be the same for both texts. Without usage a whole-prompt form is kept
    unchecked, and a raw-text form on a chat endpoint counts the text only (not exact).
    """
    texts = (PROBE_TEXT, " ".join([PROBE_TEXT] * 4))
    whole = tok.chat_name is not None or not tok.chat
    used: list[int] = []
    for text in texts:
        answer = await _usage_prompt_tokens(client, target, text)
        if answer is None:
            break
        used.append(answer)
    done = tuple(tried)
    if len(used) < len(texts):
        if whole:
            return TokenizerProbe(
                tok,
                tok.used,
                True,
                f"prompts counted with {tok.used} (not checked: the server sent no usage)",
                tried=done,
            )
        return TokenizerProbe(
            tok,
            tok.used,
            False,
            f"{tok.name} counts a message's text only and the server sent no usage to "
            "measure its chat template by: prompt lengths are exact for the text, without "
            "the template's tokens (approximate)",
            tried=done,
        )
    if whole:
        ours = [await tok.count(client, text) for text in texts]
        if ours == used:
            return TokenizerProbe(
                tok,
                tok.used,
                True,
                f"prompts counted with {tok.used}, as the server's usage counts them",
                tried=done,
            )
        tried.append(f"{tok.used}: counted {ours} prompt tokens where usage said {used}")
    added = [u - await tok.count_text(client, text) for u, text in zip(used, texts, strict=True)]
    if added[0] != added[1] or not 0 <= added[0] <= MAX_TEMPLATE_TOKENS:
        return TokenizerProbe(
            tok,
            tok.used,
            False,
            f"the tokens the server adds to a prompt vary with its text ({added[0]} and "
            f"{added[1]}), so {tok.name} cannot give the server's count: prompt lengths are "
            "approximate",
            tried=tuple(tried),
        )
    what = "the chat template adds" if tok.chat else "the server adds"
    return TokenizerProbe(
        replace(tok, template_tokens=added[0]),
        tok.name,
        True,
        f"{tok.name} counts the text; {what} {added[0]} tokens (measured from the "
        "server's usage.prompt_tokens)",
        template_tokens=added[0],
        tried=tuple(tried),
    )


class Probes:
    """Probes by endpoint (URL, API, model, engine, credentials), kept for the worker
    process; a probe that found nothing is tried again after NO_ROUTE_TTL_S."""

    def __init__(self) -> None:
        self._known: dict[tuple[str, ...], tuple[float, TokenizerProbe]] = {}
        self._locks: dict[tuple[str, ...], asyncio.Lock] = {}

    async def get(self, client: httpx.AsyncClient, target: Target) -> TokenizerProbe:
        """The endpoint's probe, run on first use."""
        key = (
            target.base_url,
            target.api,
            target.model,
            target.engine or "",
            target.headers.get("Authorization", ""),
        )
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            known = self._known.get(key)
            if known is not None:
                at, probe = known
                if probe.tokenizer is not None or time.monotonic() - at < NO_ROUTE_TTL_S:
                    return probe
            probe = await probe_tokenizer(client, target)
            self._known[key] = (time.monotonic(), probe)
            return probe


#: This worker process's probes (plain data, no connection: safe at import).
PROBES = Probes()


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
    """Calibrations by Tokenizer.key, kept for the worker process.

    A route that failed is tried again after NO_ROUTE_TTL_S, in case the server changed.
    """

    def __init__(self) -> None:
        self._known: dict[CalibrationKey, tuple[float, Calibration | None]] = {}
        self._locks: dict[CalibrationKey, asyncio.Lock] = {}

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
    slot: int | None = None,
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
            counted = await tokenizer.count(client, maker.make(seq, words, pad), slot=slot)
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


async def lanes(calls: Sequence[Callable[[int], Awaitable[_T]]], parallel: int) -> list[_T]:
    """Run the calls on `parallel` lanes, each taking the next call when its last is done
    and passing it its lane number (0 .. parallel-1: the slot its requests go on, one at a
    time); results in the calls' order."""
    results: dict[int, _T] = {}
    todo = iter(range(len(calls)))

    async def lane(number: int) -> None:
        for index in todo:
            results[index] = await calls[index](number)

    await asyncio.gather(*(lane(n) for n in range(min(parallel, len(calls)))))
    return [results[index] for index in range(len(calls))]


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

    def call(seq: int, tokens: int) -> Callable[[int], Awaitable[Prepared]]:
        if check is not None and not check(seq):
            return lambda slot: estimated(tokens)
        return lambda slot: exact_words(
            client, tokenizer, calibration, maker, seq=seq, tokens=tokens, slot=slot
        )

    return await lanes([call(s, n) for s, n in enumerate(lengths)], PARALLEL)


async def count_outputs(
    client: httpx.AsyncClient, tokenizer: Tokenizer, recs: Sequence[RawRequest]
) -> None:
    """Replace event counts with the tokenizer's count of the received text, for requests
    whose server sent no usage (docs/figures.md n_out); run after the level, off the clock.
    A request whose text cannot be counted keeps its event count."""
    todo = [r for r in recs if r.text and r.count_source != "usage"]

    def call(rec: RawRequest) -> Callable[[int], Awaitable[None]]:
        async def go(slot: int) -> None:
            text = "".join(rec.text or ())
            try:
                rec.n_out = await tokenizer.count(client, text, as_prompt=False, slot=slot)
            except TokenizerError:
                return
            rec.count_source = "tokenizer"

        return go

    await lanes([call(r) for r in todo], PARALLEL)
    for rec in recs:
        rec.text = None
