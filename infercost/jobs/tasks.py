"""The task names the API, the maintenance process and the workers agree on.

Plain names only: the Celery apps live beside their users (api/queue.py sends by name,
workers/broker.py configures the workers' app), so the core never imports Celery.
"""

from __future__ import annotations

from typing import Any, Final

RUN_JOB_TASK: Final = "benchmark.run_job"
#: One shard of a sharded level: (job_id, run_id, shard), sent by the job's coordinator.
RUN_SHARD_TASK: Final = "benchmark.run_shard"
#: Every benchmark task's name starts so; all of them go to the settings' queue.
TASK_PREFIX: Final = "benchmark."

#: The broker's priorities: 0 (served first) to PRIORITY_LOWEST. 0 is kept for work a
#: running job waits on (a job handed over after its worker died, a level's shard tasks);
#: a queued job's message goes with 1 + its place in its team's line (infercost/jobs/outbox.py).
PRIORITY_FIRST: Final = 0
PRIORITY_LOWEST: Final = 9
PRIORITY_STEPS: Final = list(range(PRIORITY_LOWEST + 1))

#: The Redis transport's options, the same on every app that sends or consumes (both ends
#: must agree). A job's state lives in Postgres and a lost message is re-published by the
#: maintenance relay, so the broker need not hold unacked messages longer than the longest
#: job. One list per priority step 0..9, served lowest first: the teams' fair share
#: (infercost/jobs/outbox.py); kombu's default keeps only 0, 3, 6 and 9.
TRANSPORT_OPTIONS: Final[dict[str, Any]] = {
    "visibility_timeout": 6 * 3600,
    "priority_steps": PRIORITY_STEPS,
}
