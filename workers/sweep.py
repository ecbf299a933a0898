"""Runs a sweep job (`load.mode` "sweep"): a synchronous level, a throughput level, then
request rates between them, stopping early as infercost/sweep.py decides.

Each level is measured and stored like a level of any job (JobRunner.measure_level), in
its own mode; the job's `sweep` column says, as the job goes, which levels were chosen and
why, whether each was adequate, which were measured again for longer, and at the end why the
sweep stopped.
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING, Any

from infercost.arrivals import planned_requests
from infercost.jobs.repository import JobRepository
from infercost.sweep import (
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

if TYPE_CHECKING:
    from workers.runner import JobRunner, MeasuredLevel

log = logging.getLogger("infercost.worker")


class _Sweep:
    """One sweep's levels and outcome: measured through the runner, recorded on the job."""

    def __init__(self, runner: JobRunner) -> None:
        self.runner = runner
        load = runner.job.load
        self.load = load
        self.rate_count = int(load["rate_levels"])
        self.users = int(load["max_concurrency"])
        self.max_error_rate = float(load["max_error_rate"])
        self.cooldown_s = float(load.get("cooldown_s") or 0.0)
        self.outcomes: list[LevelOutcome] = []
        self.block: dict[str, Any] = {
            "planned_levels": 2 + self.rate_count,
            "levels": [],
            "stopped": None,
            "detail": None,
        }

    def planned(self, mode: str, level: float) -> int:
        """Requests a level of this plan is expected to send (0: known only as it runs)."""
        return planned_requests({**self.load, "mode": mode}, level)

    async def save(self, *, final_progress: bool = False) -> None:
        """Write the sweep block; with final_progress, also progress done == total."""
        progress = self.runner.progress
        done = total = None
        if final_progress:
            progress.level_planned = progress.planned_after = 0
            done = total = progress.done
        async with self.runner.rt.sessionmaker() as session:
            await JobRepository(session).set_sweep(self.runner.job.id, self.block, done, total)
            await session.commit()

    async def stop(self, stop: Stop, *, final_progress: bool = False) -> None:
        """Record why the sweep stopped."""
        self.block["stopped"] = stop.reason
        self.block["detail"] = stop.detail
        await self.save(final_progress=final_progress)
        log.info("job %s sweep stopped: %s", self.runner.job.id, stop.reason)

    async def measure(
        self,
        kind: SweepKind,
        mode: str,
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
        if index and self.cooldown_s > 0 and not await runner._cool_down(self.cooldown_s):
            return None
        runner.level_mode = mode
        runner.progress.planned_after = planned_after
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
        job = runner.job
        planned_load = job.load
        if duration_s is not None:
            # The runner reads the plan from its job: this one level runs for duration_s.
            job.load = {**planned_load, "duration_s": duration_s, "requests_per_level": None}
        try:
            measured = await runner.measure_level(index, level)
        finally:
            job.load = planned_load
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
        if entry["lengthened_from"] is not None or int(self.load.get("shards") or 1) > 1:
            return None
        figures = measured.figures
        return lengthened_duration(
            last.inadequate,
            window_s=figures.duration_s,
            succeeded=figures.requests_succeeded,
            planned_s=self.load.get("duration_s"),
            telemetry_interval_s=float(self.load.get("telemetry_interval_s", 1.0))
            if self.runner.endpoint.metrics_urls
            else None,
        )

    async def measure_adequately(
        self, kind: SweepKind, mode: str, level: float, why: str, planned_after: int
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
            self.runner.job.id,
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


async def run_sweep(runner: JobRunner) -> tuple[str, str | None]:
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
