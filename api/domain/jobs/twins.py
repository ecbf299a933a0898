"""A structured run's plain twin (docs/figures.md, "Structured output against plain"): the
same lengths measured without response_format on the same endpoint, mode and level, so a
run summary shows what guided decoding costs beside its share of valid answers.

The twin is found by workload fingerprint: this run's job's workload with `structured` taken
out of workload.features, fingerprinted by the function that fingerprinted every job
(infercost.workload.fingerprint.job_fingerprint). Every structured run of a read is answered
with a handful of queries, however many levels its job has: the jobs, their endpoints (and
dataset or traffic log), then all the twins at once.
"""

from __future__ import annotations

import json
import shlex
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Row
from sqlalchemy.ext.asyncio import AsyncSession

from api.domain.runs.schemas import PlainRatios, PlainTwin
from infercost.datasets.repository import DatasetRepository
from infercost.endpoints.repository import EndpointRepository
from infercost.history.repository import HistoryRepository
from infercost.jobs.models import Job, Run
from infercost.jobs.repository import JobRepository
from infercost.planning.presets import PRESETS
from infercost.reports.data import level_label
from infercost.traffic.repository import TrafficRepository
from infercost.workload.fingerprint import job_fingerprint, without_feature

#: The feature whose cost a twin shows.
STRUCTURED = "structured"
#: Why a run whose dataset items asked for JSON answers has no twin.
FROM_ITEMS = (
    "no plain twin: this run's dataset items ask for structured output themselves (the "
    "workload has no structured feature to leave out); measure the same items without "
    "response_format as a dataset of their own to compare"
)
#: Load modes `infercost jobs submit` takes with --levels (a sweep's levels are its own).
_CLI_MODES = ("concurrency", "rate", "burst")


@dataclass(frozen=True, slots=True)
class Plain:
    """What a structured run's summary says of plain: the twin, or why there is none."""

    twin: PlainTwin | None = None
    reason: str | None = None


def ratio(structured: float | None, plain: float | None) -> float | None:
    """structured / plain; None where either is unknown or plain is 0 (no ratio to take)."""
    if structured is None or plain is None or plain == 0:
        return None
    return structured / plain


def _twin(run: Run, row: Row[Any]) -> PlainTwin:
    """The twin's own figures (its summary's: each column is a statistic of its stats) and
    this run's over them."""
    return PlainTwin(
        run_id=row.id,
        job_id=row.job_id,
        finished_at=row.finished_at,
        ttft_p50_ms=row.ttft_p50_ms,
        ttft_p95_ms=row.ttft_p95_ms,
        tpot_p50_ms=row.tpot_p50_ms,
        tpot_p95_ms=row.tpot_p95_ms,
        e2e_p50_ms=row.e2e_p50_ms,
        e2e_p95_ms=row.e2e_p95_ms,
        output_tokens_per_s=row.output_tokens_per_s,
        ratios=PlainRatios(
            ttft_p50=ratio(run.ttft_p50_ms, row.ttft_p50_ms),
            tpot_p50=ratio(run.tpot_p50_ms, row.tpot_p50_ms),
            e2e_p50=ratio(run.e2e_p50_ms, row.e2e_p50_ms),
            output_tokens_per_s=ratio(run.output_tokens_per_s, row.output_tokens_per_s),
        ),
    )


def _given(spec: Any) -> dict[str, Any]:
    """A stored mapping without its null fields (an omitted field stores as null)."""
    return {k: v for k, v in (spec or {}).items() if v is not None}


def _normal(spec: Any) -> dict[str, Any]:
    """A length as the plan resolves it: normal unless it says otherwise."""
    return {"distribution": "normal", **_given(spec)}


def _num(value: float) -> str:
    """A number as the command line reads it back exactly: short where that is exact
    (`3`, `0.25`), else every digit (a weight of 0.3333333 stays 0.3333333)."""
    short = f"{value:g}"
    return short if float(short) == float(value) else repr(float(value))


def _cli_length(spec: Any) -> int | None:
    """The --input-tokens / --output-tokens value of a length the CLI sends as {"mean": n}
    (a normal distribution, nothing else set); None for any other."""
    given = _given(spec)
    mean = given.pop("mean", None)
    if given.get("distribution", "normal") != "normal" or set(given) - {"distribution"}:
        return None
    if not isinstance(mean, int | float) or not float(mean).is_integer():
        return None
    return int(mean)


def _cli_workload(workload: Mapping[str, Any], trace: bool) -> list[str] | None:
    """The options of `infercost jobs submit` that send this workload without structured, or
    None where the CLI cannot say it (a dataset, sessions, shared prefixes, sampling,
    an answer not streamed)."""
    plain_sampling = workload.get("stream", True) is True and workload.get("temperature") is None
    if not plain_sampling or any(
        workload.get(name) is not None for name in ("dataset_id", "sessions", "prefix")
    ):
        return None
    options: list[str] = []
    preset = str(workload.get("preset") or "")
    if trace:
        if preset:
            options += ["--preset", preset]
    else:
        lengths = [_cli_length(workload.get(n)) for n in ("input_tokens", "output_tokens")]
        if None not in lengths:
            options += ["--input-tokens", str(lengths[0]), "--output-tokens", str(lengths[1])]
        elif preset in PRESETS and all(
            _normal(workload.get(name)) == _normal(getattr(PRESETS[preset], name))
            for name in ("input_tokens", "output_tokens")
        ):
            options += ["--preset", preset]
        else:
            return None
    for feature in workload.get("features") or ():
        if feature != STRUCTURED:
            options += ["--feature", str(feature)]
    models = workload.get("models")
    if models:
        options += ["--models", ",".join(f"{m['name']}={_num(m['weight'])}" for m in models)]
    images = workload.get("images")
    if images:
        options += ["--images", f"{images['count']}x{images['width']}x{images['height']}"]
    if workload.get("ignore_eos", True) is False:
        options.append("--no-ignore-eos")
    return options


def _cli_load(job: Job, run: Run) -> list[str] | None:
    """The load options that measure this run's mode and level again."""
    load = job.load or {}
    mode = load.get("mode")
    if mode == "trace":
        window = load.get("window") or {}
        options = ["--trace", str(load.get("traffic_id"))]
        if load.get("time_scale") is not None:
            options += ["--time-scale", _num(load["time_scale"])]
        if window.get("start_s") is not None:
            options += ["--window-start", _num(window["start_s"])]
        if window.get("duration_s") is not None:
            options += ["--window-duration", _num(window["duration_s"])]
        if load.get("max_concurrency") is not None:
            options += ["--max-concurrency", str(load["max_concurrency"])]
        return options
    if mode not in _CLI_MODES or run.mode != mode:
        return None
    options = ["--mode", str(mode), "--levels", _num(run.level)]
    if load.get("requests_per_level") is not None:
        options += ["--requests", str(load["requests_per_level"])]
    elif load.get("duration_s") is not None:
        options += ["--duration-s", _num(load["duration_s"])]
    if load.get("warmup_requests"):
        options += ["--warmup", str(load["warmup_requests"])]
    if load.get("max_concurrency") is not None:
        options += ["--max-concurrency", str(load["max_concurrency"])]
    return options


def what_to_run(job: Job, run: Run, endpoint_name: str) -> str:
    """The job that measures this run's plain twin: the CLI command where its options say the
    workload, else the API request."""
    workload = job.workload or {}
    trace = (job.load or {}).get("mode") == "trace"
    options = _cli_workload(workload, trace)
    load = _cli_load(job, run)
    if options is not None and load is not None:
        words = ["infercost", "jobs", "submit", "--endpoint", endpoint_name, *load, *options]
        return f"`{shlex.join(words)}`"
    features = json.dumps([f for f in workload.get("features") or () if f != STRUCTURED])
    return (
        f"POST /v1/jobs with job {job.id}'s workload and load (GET /v1/jobs/{job.id}) and "
        f"workload.features {features}"
    )


def _reason(
    job: Job, run: Run, endpoint_name: str, fingerprint: str, bound: Row[Any] | None = None
) -> str:
    level = level_label(run.level, run.mode)
    if bound is not None:
        # There is a plain run, but the load generator set its pace: no figure to compare.
        return (
            f"no plain run to compare with: the plain run {bound.id} (job {bound.job_id}) on "
            f"endpoint '{endpoint_name}' at {level} was client-bound (the load generator, not "
            "the endpoint, set its pace; its client block says why), so it is no twin. "
            "Measure it again where the load generator keeps up (more worker processes, "
            f"or nothing else on the machine): {what_to_run(job, run, endpoint_name)}"
        )
    return (
        f"no plain run to compare with: none succeeded (not client-bound) on endpoint "
        f"'{endpoint_name}' at {level} with this workload without structured output "
        f"(workload fingerprint {fingerprint}). Run the same job without the structured "
        f"feature: {what_to_run(job, run, endpoint_name)}; this run then shows "
        "it beside its own figures"
    )


class PlainTwins:
    """Plain twins of the structured runs of one team's reads."""

    def __init__(self, session: AsyncSession, team_id: uuid.UUID) -> None:
        self.session = session
        self.team_id = team_id

    async def _fingerprint(self, job: Job, api: str, *, plain: bool) -> str | None:
        """The job's runs' fingerprint (with plain: of its workload without structured),
        computed as the job's was; None where its dataset or traffic log is gone."""
        dataset_sha256 = trace_sha256 = None
        if job.dataset_id is not None:
            dataset_sha256 = await DatasetRepository(self.session).content_hash(
                self.team_id, job.dataset_id
            )
            if dataset_sha256 is None:
                return None
        traffic_id = (job.load or {}).get("traffic_id")
        if (job.load or {}).get("mode") == "trace" and traffic_id is not None:
            traffic = await TrafficRepository(self.session).get(
                self.team_id, uuid.UUID(str(traffic_id))
            )
            if traffic is None:
                return None
            trace_sha256 = traffic.content_sha256
        workload = job.workload or {}
        return job_fingerprint(
            without_feature(workload, STRUCTURED) if plain else workload,
            api=api,
            dataset_sha256=dataset_sha256,
            trace_sha256=trace_sha256,
            load=job.load,
        )

    async def of(self, runs: Sequence[Run]) -> dict[uuid.UUID, Plain]:
        """For each run with a structured block whose job asked for structured, its twin or
        why there is none; other runs are left out."""
        judged = [r for r in runs if r.structured]
        if not judged:
            return {}
        job_ids = sorted({r.job_id for r in judged})
        every = await JobRepository(self.session).get_jobs(self.team_id, job_ids)
        jobs = {j.id: j for j in every if STRUCTURED in ((j.workload or {}).get("features") or ())}
        # A dataset's items may ask for JSON answers themselves (without the feature): the
        # workload then is its own plain form, and has no twin to find.
        answers: dict[uuid.UUID, Plain] = {
            r.id: Plain(reason=FROM_ITEMS) for r in judged if r.job_id not in jobs
        }
        endpoints = EndpointRepository(self.session)
        names: dict[uuid.UUID, str] = {}
        plain: dict[uuid.UUID, str | None] = {}
        for job in jobs.values():
            endpoint = await endpoints.get_kept(self.team_id, job.endpoint_id)
            if endpoint is None:
                continue
            names[job.id] = endpoint.name
            own = await self._fingerprint(job, endpoint.api, plain=False)
            # A job stored by an older release may not fingerprint as it did then: its
            # twin is then unknown rather than guessed.
            if own is not None and own == job.workload_fingerprint:
                plain[job.id] = await self._fingerprint(job, endpoint.api, plain=True)
            else:
                plain[job.id] = None
        keys = {
            # The same deployment too: an endpoint changed since (another model, more
            # GPUs) measured something else.
            r.id: (r.endpoint_id, r.deployment_id, fingerprint, r.mode, float(r.level))
            for r in judged
            if (fingerprint := plain.get(r.job_id)) is not None
        }
        history = HistoryRepository(self.session)
        found = await history.newest_like(self.team_id, list(keys.values()))
        # Where none stands, a client-bound one says why (one more query, only then).
        missing = [k for k in keys.values() if k not in found]
        bound = await history.newest_like(self.team_id, missing, client_bound=True)
        for run in judged:
            owner = jobs.get(run.job_id)
            if owner is None or run.job_id not in names:
                continue
            key = keys.get(run.id)
            if key is None:
                answers[run.id] = Plain(
                    reason="no plain run can be matched: this run's workload fingerprint "
                    "cannot be computed again (its dataset or traffic log is gone, or an "
                    "older release stored its job)"
                )
            elif (row := found.get(key)) is not None:
                answers[run.id] = Plain(twin=_twin(run, row))
            else:
                answers[run.id] = Plain(
                    reason=_reason(owner, run, names[run.job_id], key[2], bound.get(key))
                )
        return answers
