"""Request sources: what each request of a level sends, for the three kinds of workload.

A source turns the job's workload (infercost/jobs/plan.py WorkloadPlan) into one level's
requests: `SyntheticSource` draws prompt and output lengths and builds prompts of those
lengths (checked against the endpoint's tokenizer route where it has one),
`ReplaySource` sends a dataset's items, and `SessionSource` holds multi-turn
conversations. Each answers `requests(...)` with the same `LevelRequests`: how to build
request `seq`, what to do when it ends, and how its prompt lengths were made. What a job's
levels share (the dataset's items, the probe of the tokenizer route that counts output) is
loaded once per job by the source.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from infercost.jobs.plan import ImageSpec, LoadPlan, WorkloadPlan
from infercost.workload.images import image_part
from infercost.workload.models import ModelDraws
from infercost.workload.synthetic import LengthDraws, PromptMaker
from infercost.workload.tools import STRUCTURED_SCHEMA, TOOLS, Judge, response_format
from workers.loadgen.stream import RawRequest, Target, request_body
from workers.loadgen.tokenize import (
    CALIBRATIONS,
    MAX_CHECKED_PROMPTS,
    PROBES,
    Calibration,
    Prepared,
    Tokenizer,
    prepare_prompts,
)
from workers.replay import Replay, load_replay
from workers.runtime import Runtime
from workers.sessions import Script, Sessions, script_of
from workers.trace import TraceText, TraceWindow, load_window

log = logging.getLogger("infercost.worker")

#: Which requests a process sends (a shard's seqs), or None for all of them.
Mine = Callable[[int], bool] | None


@dataclass(slots=True)
class LevelRequests:
    """One level's requests as a source makes them.

    `make_request(seq)` is request seq's body and local prompt-token estimate; `on_done`
    what to do when a request ends besides counting it (None: nothing). `tokenizer` counts
    output of responses without usage once the level ends (None: no route). `exact` says, by
    seq, which prompts were checked to be exactly their drawn length; `prompt_tokenizer` is
    the run's prompt_tokenizer block (None: not synthetic); `from_dataset` marks prompts taken
    from a dataset (no length was drawn); `keep_answer` keeps each answer's text (sessions
    send it back); `models` the model each request asked for (workload.models)."""

    make_request: Callable[[int], tuple[bytes, int]]
    on_done: Callable[[RawRequest], None] | None = None
    tokenizer: Tokenizer | None = None
    exact: list[bool] = field(default_factory=list)
    prompt_tokenizer: dict[str, Any] | None = None
    from_dataset: bool = False
    keep_answer: bool = False
    # The model of each request by seq (workload.models); None: the endpoint's.
    models: ModelDraws | None = None
    # Judges each answer after the level (workload.features tools, structured); None: none.
    judge: Judge | None = None
    # A dataset's judge of request seq (an item's own tools and response format); None: the
    # level's `judge` for every request.
    judge_for: Callable[[int], Judge | None] | None = None
    # Images each request carries (workload.features image); 0: none.
    images: int = 0


class RequestSource:
    """A job's requests, level by level; one per job (it keeps what levels share)."""

    def __init__(self, rt: Runtime, workload: WorkloadPlan, job_id: uuid.UUID) -> None:
        self.rt = rt
        self.workload = workload
        self.job_id = job_id
        self._replay: Replay | None = None
        self._counter: Tokenizer | None = None
        self._counter_probed = False
        # The level's model of each request (workload.models), drawn by `draw_models`.
        self.models: ModelDraws | None = None
        # The fields workload.features adds to every request, and the judge of its answers.
        self.features: dict[str, Any] = {}
        if workload.has("tools"):
            self.features["tools"] = TOOLS
            self.features["tool_choice"] = "required"
        if workload.has("structured"):
            self.features["response_format"] = response_format(STRUCTURED_SCHEMA)
        # The image feature: images per request and their size (workload.images).
        self.images = None
        if workload.has("image"):
            self.images = workload.images or ImageSpec()
        self.judge = (
            Judge(
                TOOLS if workload.has("tools") else None,
                STRUCTURED_SCHEMA if workload.has("structured") else None,
            )
            if self.features
            else None
        )

    def draw_models(self, known: int, level_index: int) -> ModelDraws | None:
        """The model each request of level `level_index` asks for (workload.models), from a
        generator of its own (seed, level, 2): drawing them never shifts the lengths or
        prompts. None without models: every request asks for the endpoint's."""
        models = self.workload.models
        if models is None:
            self.models = None
        else:
            self.models = ModelDraws(
                [m.name for m in models],
                [m.weight for m in models],
                known,
                np.random.default_rng([self.workload.seed, level_index, 2]),
            )
        return self.models

    async def requests(
        self,
        target: Target,
        known: int,
        rng: np.random.Generator,
        level_index: int,
        mine: Mine = None,
    ) -> LevelRequests:
        """Level `level_index`'s requests against `target`; `known` of them are drawn (and
        checked) before the level starts, more on demand. `mine` limits the checking to the
        requests this process sends."""
        raise NotImplementedError

    def body(
        self,
        target: Target,
        prompt: str,
        max_tokens: int,
        messages: list[dict[str, Any]] | None = None,
        *,
        seq: int,
        own: dict[str, Any] | None = None,
    ) -> bytes:
        """Request `seq`'s JSON body with the workload's stream, ignore_eos and temperature,
        to its drawn model (workload.models) or the endpoint's."""
        workload = self.workload
        features = self.features
        if own:
            # A dataset item's own features: its fields win over the workload's.
            features = {**features, **{k: v for k, v in own.items() if k != "images"}}
            if own.get("images"):
                asked = messages or [{"role": "user", "content": prompt}]
                messages = with_image_urls(asked, own["images"])
        if self.images is not None:
            messages = with_images(
                messages or [{"role": "user", "content": prompt}], self.images, seq
            )
        return request_body(
            target,
            prompt,
            max_tokens,
            stream=workload.stream,
            ignore_eos=workload.ignore_eos,
            temperature=workload.temperature,
            messages=messages,
            model=None if self.models is None else self.models[seq],
            features=features,
        )

    async def replay(self) -> Replay:
        """The job's dataset items, loaded at its first level and kept for the others."""
        if self._replay is None:
            dataset_id = self.workload.dataset_id
            if dataset_id is None:
                raise ValueError("this workload replays no dataset")
            self._replay = await load_replay(self.rt.sessionmaker, dataset_id, self.workload.seed)
        return self._replay

    async def output_counter(self, target: Target) -> Tokenizer | None:
        """The endpoint's tokenizer route when it answers, to count output tokens of
        responses without usage (docs/figures.md n_out); else None. Probed once per job: a
        failed probe may take the whole request timeout."""
        if not self._counter_probed:
            self._counter = (await PROBES.get(self.rt.http, target)).tokenizer
            self._counter_probed = True
        return self._counter


def with_images(
    messages: list[dict[str, Any]], images: ImageSpec, seq: int
) -> list[dict[str, Any]]:
    """`messages` with request `seq`'s images (made here, one per request and position) after
    the text of its last user message."""
    *before, last = messages
    text = last.get("content")
    parts: list[dict[str, Any]] = (
        list(text) if isinstance(text, list) else [{"type": "text", "text": text or ""}]
    )
    for i in range(images.count):
        parts.append(image_part(images.width, images.height, seq * images.count + i))
    return [*before, {**last, "content": parts}]


def with_image_urls(messages: list[dict[str, Any]], urls: list[str]) -> list[dict[str, Any]]:
    """`messages` with a dataset item's images (their URLs as given) after the text of its
    last user message."""
    *before, last = messages
    text = last.get("content")
    parts: list[dict[str, Any]] = (
        list(text) if isinstance(text, list) else [{"type": "text", "text": text or ""}]
    )
    parts.extend({"type": "image_url", "image_url": {"url": url}} for url in urls)
    return [*before, {**last, "content": parts}]


def item_judge(features: dict[str, Any] | None, default: Judge | None) -> Judge | None:
    """The judge of a dataset item's answer: by its own tools and response format where it
    has them, else the workload's. A json_object answer is held to what that mode promises:
    JSON that is an object."""
    if not features or not ("tools" in features or "response_format" in features):
        return default
    response = features.get("response_format") or {}
    schema = None
    if response.get("type") == "json_schema":
        schema = (response.get("json_schema") or {}).get("schema") or {}
    elif response.get("type") == "json_object":
        schema = {"type": "object"}
    return Judge(features.get("tools"), schema)


def _lengths(spec: Any, known: int, rng: np.random.Generator, what: str) -> LengthDraws:
    if spec is None:
        # The API refuses such a workload; a row edited by hand is said plainly.
        raise ValueError(f"the workload gives no {what}")
    return LengthDraws(spec.as_mapping(), known, rng)


class SyntheticSource(RequestSource):
    """Prompts of drawn lengths (input_tokens, output_tokens, prefix)."""

    async def requests(
        self,
        target: Target,
        known: int,
        rng: np.random.Generator,
        level_index: int,
        mine: Mine = None,
    ) -> LevelRequests:
        workload = self.workload
        inputs = _lengths(workload.input_tokens, known, rng, "input_tokens")
        outputs = _lengths(workload.output_tokens, known, rng, "output_tokens")
        prefix = workload.prefix
        prompts = PromptMaker(
            rng,
            prefixes=0 if prefix is None else prefix.count,
            prefix_words=0 if prefix is None else prefix.tokens,
        )
        sent_words: dict[int, int] = {}
        level = LevelRequests(make_request=lambda seq: (b"", 0))
        calibration, checked = await self._prepare_prompts(
            level,
            target,
            prompts,
            [inputs[seq] for seq in range(min(known, MAX_CHECKED_PROMPTS))],
            mine,
        )

        def make_request(seq: int) -> tuple[bytes, int]:
            n_in = inputs[seq]
            pad = 0
            if seq < len(checked):
                words, pad = checked[seq].words, checked[seq].pad
            elif calibration is not None:
                words = calibration.words_for(n_in)
            else:
                words = prompts.words_for(n_in)
            sent_words[seq] = words + pad
            body = self.body(target, prompts.make(seq, words, pad), outputs[seq], seq=seq)
            return body, n_in

        def on_done(rec: RawRequest) -> None:
            if rec.count_source == "usage" and rec.n_in:
                prompts.observe(sent_words.pop(rec.seq, 0), rec.n_in)

        level.make_request, level.on_done = make_request, on_done
        return level

    async def _prepare_prompts(
        self,
        level: LevelRequests,
        target: Target,
        prompts: PromptMaker,
        lengths: list[int],
        mine: Mine,
    ) -> tuple[Calibration | None, list[Prepared]]:
        """With the endpoint's tokenizer route: its calibration, and how to build prompts
        0, 1, ... of exactly `lengths` tokens (level.exact says which made it). Without one:
        (None, []), and prompts are estimated as they are sent."""
        # Which of the engines' tokenizer forms answers here (workers/loadgen/tokenize.py);
        # probed once per worker process and endpoint.
        http = self.rt.http
        probe = await PROBES.get(http, target)
        block = probe.block()
        tokenizer = probe.tokenizer
        calibration = None
        if tokenizer is not None:
            calibration = await CALIBRATIONS.get(http, tokenizer, prompts)
        level.tokenizer = None if calibration is None else tokenizer
        if tokenizer is not None and calibration is None:
            block = {
                **block,
                "exact": False,
                "note": f"{probe.form} stopped answering while prompts were calibrated: "
                "prompt lengths are approximate",
            }
        level.prompt_tokenizer = block
        if not block["exact"]:
            log.warning("job %s: %s", self.job_id, block["note"])
        if tokenizer is None or calibration is None:
            return None, []
        prepared = await prepare_prompts(http, tokenizer, calibration, prompts, lengths, check=mine)
        # A prompt is exact only where the form counts what the server will (probe.exact).
        level.exact = [p.exact and probe.exact for p in prepared]
        return calibration, prepared


class ReplaySource(RequestSource):
    """A dataset's items in a seeded order per level: each item's max_tokens, else a length
    drawn from output_tokens."""

    async def requests(
        self,
        target: Target,
        known: int,
        rng: np.random.Generator,
        level_index: int,
        mine: Mine = None,
    ) -> LevelRequests:
        replay = (await self.replay()).for_level(level_index)
        spec = self.workload.output_tokens
        outputs = None if spec is None else LengthDraws(spec.as_mapping(), known, rng)

        def make_request(seq: int) -> tuple[bytes, int]:
            item = replay[seq]
            max_tokens = item.max_tokens
            if max_tokens is None:
                # The API refuses a dataset without max_tokens everywhere unless
                # output_tokens is given.
                assert outputs is not None
                max_tokens = outputs[seq]
            body = self.body(
                target, item.prompt, max_tokens, item.messages, seq=seq, own=item.features
            )
            return body, item.local_tokens

        judges: dict[int, Judge | None] = {}

        def judge_for(seq: int) -> Judge | None:
            item = replay[seq]
            if id(item) not in judges:
                judges[id(item)] = item_judge(item.features, self.judge)
            return judges[id(item)]

        # Dataset prompts have no drawn length to check; the tokenizer route, where there is
        # one, still counts output when the server sends no usage.
        own = any(item.features for item in replay.items)
        return LevelRequests(
            make_request,
            tokenizer=await self.output_counter(target),
            from_dataset=True,
            judge_for=judge_for if own else None,
        )


class SessionSource(RequestSource):
    """Multi-turn sessions (workers/sessions.py): a dataset's conversations, or synthetic
    ones whose user messages have drawn input_tokens lengths."""

    async def requests(
        self,
        target: Target,
        known: int,
        rng: np.random.Generator,
        level_index: int,
        mine: Mine = None,
    ) -> LevelRequests:
        workload = self.workload
        spec = workload.sessions
        if spec is None:
            raise ValueError("this workload holds no sessions")
        turns = spec.turns
        # Prompts grow with the history: there is no drawn length to check; the tokenizer
        # route, where there is one, still counts output when the server sends no usage.
        counter = await self.output_counter(target)
        output_spec = workload.output_tokens
        outputs = None if output_spec is None else LengthDraws(output_spec.as_mapping(), known, rng)
        system_tokens = spec.system_prompt_tokens
        # The same text for every user and level: a generator of its own, from the seed.
        system_prompt = (
            PromptMaker(np.random.default_rng([workload.seed, 0, 3])).make(0, system_tokens)
            if system_tokens
            else None
        )
        new_script: Callable[[int], Script]
        if workload.dataset_id is not None:
            replay = (await self.replay()).for_level(level_index)

            def new_script(n: int) -> Script:
                item = replay[n]
                return script_of(item.conversation, item.prompt, item.max_tokens)

        else:
            inputs = _lengths(workload.input_tokens, known, rng, "input_tokens")
            prompts = PromptMaker(rng)

            def new_script(n: int) -> Script:
                ids = range(n * turns, (n + 1) * turns)
                return Script(
                    [
                        [{"role": "user", "content": prompts.make(i, prompts.words_for(inputs[i]))}]
                        for i in ids
                    ]
                )

        sessions = Sessions(turns, system_prompt, new_script)

        def make_request(seq: int) -> tuple[bytes, int]:
            messages, max_tokens, local_tokens = sessions.next(seq)
            if max_tokens is None:
                # The API asks for output_tokens unless every item gives max_tokens.
                assert outputs is not None
                max_tokens = outputs[seq]
            return self.body(target, "", max_tokens, messages, seq=seq), local_tokens

        def on_done(rec: RawRequest) -> None:
            ok = rec.error_class is None and bool(rec.text)
            sessions.done(rec.seq, "".join(rec.text or ()) if ok else None)
            if counter is None:
                rec.text = None  # kept only for the tokenizer's count after the level

        return LevelRequests(
            make_request,
            on_done,
            tokenizer=counter,
            from_dataset=workload.dataset_id is not None,
            keep_answer=True,
        )


class TraceSource(RequestSource):
    """A traffic log's window (workers/trace.py): each request at its own time, with its own
    lengths, its prefix blocks and its session made into shared text."""

    def __init__(
        self, rt: Runtime, workload: WorkloadPlan, job_id: uuid.UUID, load: LoadPlan
    ) -> None:
        super().__init__(rt, workload, job_id)
        self.load = load
        self._window: TraceWindow | None = None

    async def window(self) -> TraceWindow:
        """The job's window of its log, loaded once."""
        if self._window is None:
            self._window = await load_window(self.rt.sessionmaker, self.load)
        return self._window

    async def requests(
        self,
        target: Target,
        known: int,
        rng: np.random.Generator,
        level_index: int,
        mine: Mine = None,
    ) -> LevelRequests:
        window = await self.window()
        http = self.rt.http
        probe = await PROBES.get(http, target)
        tokenizer = probe.tokenizer
        # Words per token as the endpoint's tokenizer route counts them, where it has one
        # (the same calibration synthetic prompts use); else one word a token.
        calibration = None
        if tokenizer is not None:
            calibration = await CALIBRATIONS.get(http, tokenizer, PromptMaker(rng))
        words_for = calibration.words_for if calibration is not None else _one_a_token
        text = TraceText(window, self.workload.seed, words_for)
        requests = window.requests
        # Built before the level's clock starts, so building a long prompt never makes a
        # send late; beyond BODY_BUDGET bytes the rest are built as they are sent.
        bodies: list[bytes] = []
        size = 0
        for index, request in enumerate(requests):
            if size > BODY_BUDGET:
                break
            body = self.body(target, text.prompt(index), request.output_tokens, seq=index)
            bodies.append(body)
            size += len(body)

        def make_request(seq: int) -> tuple[bytes, int]:
            request = requests[seq]
            body = (
                bodies[seq]
                if seq < len(bodies)
                else self.body(target, text.prompt(seq), request.output_tokens, seq=seq)
            )
            return body, request.input_tokens

        return LevelRequests(
            make_request,
            tokenizer=await self.output_counter(target),
            prompt_tokenizer={
                **probe.block(),
                "exact": False,
                "note": "a replay's prompts are built to the trace's lengths "
                + (
                    "with the tokenizer route's words per token"
                    if calibration is not None
                    else "at one word a token (no tokenizer route answered)"
                ),
            },
        )


def _one_a_token(tokens: int) -> int:
    return max(1, tokens)


#: Request bodies a replay builds before its level starts (bytes); the rest on the way.
BODY_BUDGET = 256 * 1024 * 1024


def request_source(
    rt: Runtime, workload: WorkloadPlan, job_id: uuid.UUID, load: LoadPlan | None = None
) -> RequestSource:
    """The source a job's requests come from: a trace, sessions, a dataset, or synthetic."""
    if load is not None and load.mode == "trace":
        return TraceSource(rt, workload, job_id, load)
    if workload.sessions is not None:
        return SessionSource(rt, workload, job_id)
    if workload.dataset_id is not None:
        return ReplaySource(rt, workload, job_id)
    return SyntheticSource(rt, workload, job_id)
