"""Deciding, when a job ends, how each of its runs changed against its baseline.

Called by the worker after the job's final status is committed (workers/finish.py), so a
failure here can never lose the job's outcome. The result is stored on each run
(runs.change, runs.change_verdict) and returned, so the caller can notify about
regressions from the same place.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from infercost.history.availability import Availability, ErrorChange, availability, error_change
from infercost.history.repository import HistoryRepository
from infercost.history.stats import (
    DEFAULT_THRESHOLDS,
    RunComparison,
    RunVerdict,
    Thresholds,
    compare_runs,
)
from infercost.jobs.models import Run

FIRST_OF_ITS_KIND = (
    "first succeeded run of this workload, mode and level on this endpoint: later runs are "
    "compared with it"
)
CLIENT_BOUND = (
    "this run was client-bound: the load generator, not the endpoint, may have set its pace, "
    "so a change may not be the endpoint's (client-bound runs are never used as baselines)"
)

#: Runs whose shares of prompt tokens served from the prefix cache differ by more than this
#: are not compared: cached prefill is far cheaper, so TTFT differs for that reason alone.
CACHE_SHARE_TOLERANCE = 0.10


def cache_share(run: Run) -> float:
    """The share of the run's prompt tokens served from the prefix cache; 0 when the server
    reported none (an engine that reports no cache hits is taken as not caching)."""
    share = (run.cache or {}).get("share")
    return float(share) if share is not None else 0.0


def cache_mismatch(run: Run, baseline: Run) -> str | None:
    """Why `run` and `baseline` are incomparable because of the prefix cache, or None."""
    now, before = cache_share(run), cache_share(baseline)
    if abs(now - before) <= CACHE_SHARE_TOLERANCE:
        return None
    return (
        f"not compared: {now:.0%} of this run's prompt tokens were served from the prefix "
        f"cache against {before:.0%} in its baseline (tolerance {CACHE_SHARE_TOLERANCE:.0%}), "
        "so TTFT differs for that reason alone; rerun with a fresh seed (the default) or a "
        "workload that caches the same way"
    )


@dataclass(frozen=True, slots=True)
class RunChange:
    """One run's verdict against its baseline, with the stored detail (`change`)."""

    run_id: uuid.UUID
    job_id: uuid.UUID
    endpoint_id: uuid.UUID
    mode: str
    level: float
    workload_fingerprint: str | None
    verdict: RunVerdict
    baseline_run_id: uuid.UUID | None
    change: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready form (e.g. a webhook's payload)."""
        return {
            "run_id": str(self.run_id),
            "job_id": str(self.job_id),
            "endpoint_id": str(self.endpoint_id),
            "mode": self.mode,
            "level": self.level,
            "workload_fingerprint": self.workload_fingerprint,
            "verdict": self.verdict,
            "baseline_run_id": None if self.baseline_run_id is None else str(self.baseline_run_id),
            "change": self.change,
        }


def combined_verdict(latency: RunVerdict, errors: ErrorChange | None) -> RunVerdict:
    """The run's verdict from its latency and its error rate: a regression when either
    regressed (62% failed requests is no "no change", however fast the rest were), else an
    improvement when either improved, else the latency's."""
    if errors is None or latency in ("baseline", "incomparable"):
        return latency
    for verdict in ("regression", "improvement"):
        if verdict in (latency, errors.verdict):
            return verdict
    if latency == "insufficient_data" and errors.verdict == "no_change":
        return "insufficient_data"
    return latency


def _availability_note(avail: Availability) -> str | None:
    """A sentence on the time the endpoint served nothing, when it did so at all."""
    if not avail.outages or avail.share is None:
        return None
    longest = avail.outages[0]
    kinds = ", ".join(f"{n} {kind}" for kind, n in longest.errors.items())
    return (
        f"the endpoint was unavailable for {avail.unavailable_s:.3g} s of the level's "
        f"{avail.window_s:.3g} s ({avail.share:.0%}) in {avail.count} outage(s); the longest, "
        f"{longest.duration_s:.3g} s from {longest.start_s:.3g} s, failed {longest.failed} "
        f"request(s) ({kinds})"
    )


def _errors_note(errors: ErrorChange) -> str | None:
    if errors.verdict != "regression":
        return None
    return (
        f"{errors.current_error_rate or 0:.0%} of this run's requests failed against "
        f"{errors.baseline_error_rate or 0:.0%} in its baseline: a regression whatever the "
        "latency of the requests that succeeded"
    )


def change_block(
    run: Run,
    baseline: Run | None,
    comparison: RunComparison | None,
    thresholds: Thresholds,
    refused: str | None = None,
    *,
    errors: ErrorChange | None = None,
    avail: Availability | None = None,
) -> dict[str, Any]:
    """The JSON stored in runs.change (the API serves it as the run's `change`); `refused`
    says why the run was not compared with its baseline (verdict `incomparable`); `errors`
    is the error rate against the baseline's and `avail` the time the endpoint served
    nothing during the level."""
    notes = [] if baseline is not None else [FIRST_OF_ITS_KIND]
    if refused is not None:
        notes.append(refused)
    if run.client_bound:
        notes.append(CLIENT_BOUND)
    for note in (
        None if errors is None else _errors_note(errors),
        None if avail is None else _availability_note(avail),
    ):
        if note is not None:
            notes.append(note)
    latency: RunVerdict = (
        "incomparable"
        if refused is not None
        else "baseline"
        if comparison is None
        else comparison.verdict
    )
    verdict = combined_verdict(latency, errors)
    return {
        "verdict": verdict,
        "baseline_run_id": None if baseline is None else str(baseline.id),
        "baseline_job_id": None if baseline is None else str(baseline.job_id),
        "baseline_finished_at": (
            None
            if baseline is None or baseline.finished_at is None
            else baseline.finished_at.isoformat()
        ),
        "metrics": (
            {}
            if comparison is None
            else {name: m.as_dict() for name, m in comparison.metrics.items()}
        ),
        "output_tokens_per_s": (
            None if comparison is None else comparison.output_tokens_per_s.as_dict()
        ),
        "errors": None if errors is None else errors.as_dict(),
        "availability": None if avail is None else avail.as_dict(),
        "method": thresholds.as_dict(),
        "notes": notes,
    }


async def record_changes(
    session: AsyncSession, job_id: uuid.UUID, thresholds: Thresholds = DEFAULT_THRESHOLDS
) -> list[RunChange]:
    """Compare each succeeded run of the job with its baseline, store the outcome on the
    run and return it (level order). Runs without a workload fingerprint (measured before
    fingerprints) have nothing known to be comparable and are skipped. The caller commits."""
    repo = HistoryRepository(session)
    changes: list[RunChange] = []
    for run in await repo.succeeded_runs(job_id):
        if run.workload_fingerprint is None:
            continue
        baseline = await repo.baseline(run)
        comparison: RunComparison | None = None
        refused = None if baseline is None else cache_mismatch(run, baseline)
        if baseline is not None and refused is None:
            base_samples = await repo.samples(baseline.id)
            run_samples = await repo.samples(run.id)
            # Rank tests and bootstraps are CPU work: off the event loop, which may be
            # driving other tasks' requests.
            comparison = await asyncio.to_thread(
                compare_runs,
                base_samples,
                run_samples,
                baseline_output_tokens_per_s=baseline.output_tokens_per_s,
                current_output_tokens_per_s=run.output_tokens_per_s,
                thresholds=thresholds,
            )
        errors = None
        if comparison is not None and baseline is not None:
            errors = error_change(
                baseline.requests_failed or 0,
                baseline.requests_total or 0,
                run.requests_failed or 0,
                run.requests_total or 0,
            )
        avail = availability(*await repo.outcomes(run.id))
        block = change_block(
            run, baseline, comparison, thresholds, refused, errors=errors, avail=avail
        )
        verdict: RunVerdict = block["verdict"]
        await repo.store_change(
            run.id,
            baseline_run_id=None if baseline is None else baseline.id,
            verdict=verdict,
            change=block,
        )
        changes.append(
            RunChange(
                run_id=run.id,
                job_id=run.job_id,
                endpoint_id=run.endpoint_id,
                mode=run.mode,
                level=run.level,
                workload_fingerprint=run.workload_fingerprint,
                verdict=verdict,
                baseline_run_id=None if baseline is None else baseline.id,
                change=block,
            )
        )
    return changes
