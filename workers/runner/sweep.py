"""Runs a sweep job (`load.mode` "sweep"): a synchronous level, a throughput level, then
request rates between them, stopping early as infercost/jobs/sweep.py decides.

Each level is measured and stored like a level of any job (JobRunner.measure_level), in
its own mode; the job's `sweep` column says, as the job goes, which levels were chosen and
why, whether each was adequate, which were measured again for longer, and at the end why the
sweep stopped.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from typing import Any, Protocol

from infercost.jobs.plan import LoadPlan, Mode
from infercost.jobs.repository import JobRepository
from infercost.jobs.sweep import (
    LevelOutcome,
    Stop,
    SweepKind,
    adequacy_codes,
    client_side_stop,
    describe,
    final_stop,
    inadequate_note,
    lengthened_duration,
    level_why,
    no_range_detail,
    stop_after,
    sweep_rates,
)
from workers.lease import Lease
from workers.progress import MeasuredLevel, Progress
from workers.runtime import Runtime

log = logging.getLogger("infercost.worker")


class Measurer(Protocol):
    """What a sweep drives: a job's runner (workers/runner/job.py JobRunner)."""

    @property
    def rt(self) -> Runtime: ...
    @property
    def job_id(self) -> uuid.UUID: ...
    @property
    def lease(self) -> Lease:
        """The claim every write of the job checks (workers/lease.py)."""
        ...

    @property
    def load(self) -> LoadPlan: ...
    @property
    def progress(self) -> Progress: ...
    @property
    def scraped(self) -> bool:
        """Whether the endpoint has metrics URLs (its levels are scraped)."""
        ...

    async def measure_level(
        self,
        index: int,
        level: float,
        *,
        mode: Mode | None = None,
        load: LoadPlan | None = None,
        planned_after: int = 0,
    ) -> MeasuredLevel: ...

    async def cool_down(self, seconds: float) -> bool: ...


class _Sweep:
    """One sweep's levels and outcome: measured through the runner, recorded on the job."""

    def __init__(self, runner: Measurer) -> None:
        self.runner = runner
        load = runner.load
        self.load = load
        if load.rate_levels is None or load.max_concurrency is None or load.max_error_rate is None:
            raise ValueError("a sweep's plan lacks rate_levels, max_concurrency or max_error_rate")
        self.rate_count = load.rate_levels
        self.users = load.max_concurrency
        self.max_error_rate = load.max_error_rate
        self.cooldown_s = load.cooldown_s
        self.outcomes: list[LevelOutcome] = []
        self.block: dict[str, Any] = {
            "planned_levels": 2 + self.rate_count,
            "levels": [],
            "stopped": None,
            "detail": None,
        }

    def planned(self, mode: Mode, level: float) -> int:
        """Requests a level of this plan is expected to send (0: known only as it runs)."""
        return self.load.level_size(level, mode).planned

    async def save(self, *, final_progress: bool = False) -> None:
        """Write the sweep block; with final_progress, also progress done == total."""
        progress = self.runner.progress
        done = total = None
        if final_progress:
            progress.level_planned = progress.planned_after = 0
            done = total = progress.done
        async with self.runner.rt.sessionmaker() as session:
            # Under the lease, as every write: a runner that lost the job writes nothing.
            await self.runner.lease.hold(session)
            await JobRepository(session).set_sweep(self.runner.job_id, self.block, done, total)
            await session.commit()

    async def stop(self, stop: Stop, *, final_progress: bool = False) -> None:
        """Record why the sweep stopped."""
        self.block["stopped"] = stop.reason
        self.block["detail"] = stop.detail
        await self.save(final_progress=final_progress)
        log.info("job %s sweep stopped: %s", self.runner.job_id, stop.reason)

    async def measure(
        self,
        kind: SweepKind,
        mode: Mode,
        level: float,
        why: str,
        planned_after: int,
        *,
        duration_s: float | None = None,
        lengthened_from: int | None = None,
    ) -> MeasuredLevel | None:
        """Cool down (after the first level), then measure one level and record it; None
        when the job was cancelled during the cool-down. With `duration_s` the level lasts
        that long whatever the plan says (a lengthened try of level `lengthened_from`)."""
        runner = self.runner
        entries: list[dict[str, Any]] = self.block["levels"]
        index = len(entries)
        if index and self.cooldown_s > 0 and not await runner.cool_down(self.cooldown_s):
            return None
        entry: dict[str, Any] = {
            "index": index,
            "kind": kind,
            "mode": mode,
            "level": level,
            "why": why,
            "run_id": None,
            "requests_per_s": None,
            "error_rate": None,
            "slo_passed": None,
            "duration_s": duration_s,
            "lengthened_from": lengthened_from,
            "superseded_by": None,
            "adequate": None,
            "inadequate": [],
        }
        entries.append(entry)
        await self.save()
        measured = await runner.measure_level(
            index,
            level,
            mode=mode,
            # A lengthened try runs for duration_s whatever the plan's count.
            load=None if duration_s is None else self.load.for_duration(duration_s),
            planned_after=planned_after,
        )
        figures = measured.figures
        codes = adequacy_codes(figures.adequacy)
        entry.update(
            run_id=str(measured.run_id),
            requests_per_s=figures.requests_per_s,
            error_rate=figures.error_rate,
            slo_passed=figures.slo_passed,
            adequate=None if figures.adequacy is None else bool(figures.adequacy.get("ok")),
            inadequate=list(codes),
        )
        outcome = LevelOutcome(
            index, kind, level, figures.error_rate, figures.slo_passed, inadequate=codes
        )
        if lengthened_from is not None:
            # The longer try stands for the level from now on.
            entries[lengthened_from]["superseded_by"] = index
            self.outcomes[-1] = outcome
        else:
            self.outcomes.append(outcome)
        return measured

    def _lengthen_to(self, measured: MeasuredLevel) -> float | None:
        """Seconds to measure the level just measured again for, when it was too short or
        thin and was not itself a lengthened try; None otherwise. Sharded levels are not
        lengthened: their other shards read the plan from the stored job."""
        last = self.outcomes[-1]
        entry = self.block["levels"][last.index]
        if entry["lengthened_from"] is not None or self.load.fixed_shards > 1:
            return None
        figures = measured.figures
        return lengthened_duration(
            last.inadequate,
            window_s=figures.duration_s,
            succeeded=figures.requests_succeeded,
            planned_s=self.load.duration_s,
            telemetry_interval_s=self.load.telemetry_interval_s if self.runner.scraped else None,
        )

    async def measure_adequately(
        self, kind: SweepKind, mode: Mode, level: float, why: str, planned_after: int
    ) -> MeasuredLevel | None:
        """Measure a level and, when it was too short or had too few requests, once more
        for longer (lengthened_duration); the longer try is the level's result."""
        measured = await self.measure(kind, mode, level, why, planned_after)
        if measured is None or measured.failed or self.runner.progress.cancelled:
            return measured
        seconds = self._lengthen_to(measured)
        if seconds is None:
            return measured
        first = self.outcomes[-1]
        log.info(
            "job %s sweep: %s inadequate (%s), measuring it again for %.0f s",
            self.runner.job_id,
            describe(first),
            ", ".join(first.inadequate),
            seconds,
        )
        why_longer = (
            f"{describe(first)} again for {seconds:.3g} s: it was inadequate "
            f"({', '.join(first.inadequate)}); {why}"
        )
        return await self.measure(
            kind,
            mode,
            level,
            why_longer,
            planned_after,
            duration_s=seconds,
            lengthened_from=first.index,
        )

    async def settle(self, measured: MeasuredLevel | None) -> tuple[str, str | None] | None:
        """The job's final status when the level just measured ends the sweep, else None."""
        if measured is None or self.runner.progress.cancelled:
            count = len(self.outcomes)
            await self.stop(Stop("cancelled", f"cancelled by the user after {count} level(s)"))
            return "cancelled", None
        if measured.failed:
            message = f"{describe(self.outcomes[-1])}: {measured.failed}"
            await self.stop(Stop("failed", message))
            return "failed", message
        stop = stop_after(self.outcomes, self.max_error_rate)
        if stop is not None:
            # An early stop keeps its reason, and says which levels rested on thin evidence.
            stop = Stop(stop.reason, stop.detail + inadequate_note(self.outcomes))
        else:
            stop = client_side_stop(self.outcomes)
        if stop is not None:
            await self.stop(stop, final_progress=True)
            return "succeeded", None
        return None

    async def run(self) -> tuple[str, str | None]:
        """Measure the levels in order; return the job's final status and error message."""
        # Before the rates are chosen, a rate level counts like any level of the plan.
        rate_planned = self.planned("concurrency", 1)
        measured = await self.measure_adequately(
            "synchronous",
            "concurrency",
            1,
            level_why("synchronous"),
            self.planned("concurrency", self.users) + self.rate_count * rate_planned,
        )
        if (end := await self.settle(measured)) is not None:
            return end
        assert measured is not None
        sync_rps = measured.figures.requests_per_s or 0.0
        measured = await self.measure_adequately(
            "throughput",
            "concurrency",
            self.users,
            level_why("throughput", users=self.users),
            self.rate_count * rate_planned,
        )
        if (end := await self.settle(measured)) is not None:
            return end
        assert measured is not None
        throughput_rps = measured.figures.requests_per_s or 0.0
        rates = sweep_rates(sync_rps, throughput_rps, self.rate_count)
        if not rates:
            await self.stop(
                Stop(
                    "no_rate_range",
                    no_range_detail(sync_rps, throughput_rps) + inadequate_note(self.outcomes),
                ),
                final_progress=True,
            )
            return "succeeded", None
        for position, rate in enumerate(rates, start=1):
            why = level_why(
                "rate",
                position=position,
                count=len(rates),
                sync_rps=sync_rps,
                throughput_rps=throughput_rps,
            )
            after = sum(self.planned("rate", r) for r in rates[position:])
            measured = await self.measure_adequately("rate", "rate", rate, why, after)
            if (end := await self.settle(measured)) is not None:
                return end
        await self.stop(final_stop(self.outcomes), final_progress=True)
        return "succeeded", None


async def run_sweep(runner: Measurer) -> tuple[str, str | None]:
    """Run a sweep job's levels; return its final status and error message. If the worker
    fails inside it, the sweep block says it stopped as `failed` before the error goes on."""
    sweep = _Sweep(runner)
    try:
        return await sweep.run()
    except Exception:
        if sweep.block["stopped"] is None:
            # Best effort: the error that stopped the sweep matters more than this write.
            with contextlib.suppress(Exception):
                await sweep.stop(Stop("failed", "the worker failed while running the sweep"))
        raise
