"""Runs one benchmark job: claim it, drive each load level, store samples and summaries.

The runner in parts, each with one job:

- `job.py`: `JobRunner` holds one job on a worker (its plan decoded once from the row,
  infercost/jobs/plan.py; its progress; its lease) and measures its levels in order, on this
  process or on K shards (workers/runner/shards.py); `run_job` and `run_shard` are the bodies of
  the `benchmark.run_job` and `benchmark.run_shard` tasks. A sweep (workers/runner/sweep.py) drives
  the same `measure_level` and `cool_down`, passing each level's mode and load plan.
- `sources.py`: request sources behind one interface (`RequestSource.requests`):
  synthetic prompts of drawn lengths, a dataset's items replayed, multi-turn sessions.
- `driver.py`: the level driver: a level's schedule or users from the load plan
  (`plan_level`), then the level itself (`drive_level`), returning its timings and the
  client's health; it writes nothing.
- `recorder.py`: the job's runs and their storage (run rows with their price, heartbeat
  and live figures, samples, figures, telemetry), every write under the lease's fencing
  token.

The task boundary commits; each level is committed as soon as it is measured, so a crash
later in the job never loses a level already measured. Imports go one way: job -> sweep,
shards, driver, recorder, sources; none of those imports job.
"""

from workers.runner.job import JobRunner, run_job, run_shard

__all__ = ["JobRunner", "run_job", "run_shard"]
