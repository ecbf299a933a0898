"""The task names the API, the maintenance process and the workers agree on.

Plain names only: the Celery apps live beside their users (api/queue.py sends by name,
workers/broker.py configures the workers' app), so the core never imports Celery.
"""

from __future__ import annotations

from typing import Final

RUN_JOB_TASK: Final = "benchmark.run_job"
#: One shard of a sharded level: (job_id, run_id, shard), sent by the job's coordinator.
RUN_SHARD_TASK: Final = "benchmark.run_shard"
#: Every benchmark task's name starts so; all of them go to the settings' queue.
TASK_PREFIX: Final = "benchmark."
