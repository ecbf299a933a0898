"""The status board's summaries: each row's recent runs and scheduled jobs, kept by triggers.

`status_series` holds, per endpoint, workload fingerprint, mode and level, its succeeded runs
of the last 31 days packed in one row (each run's figures, oldest first, and their finish
times, so a window's part is cut out in the database), and its newest run, newest counted
run and newest verdict; `status_job_series` holds per
endpoint and workload its finished scheduled jobs of the last 31 days. Triggers on runs and
jobs rebuild the rows a statement touched in the same transaction (statement triggers with
transition tables for inserts and deletes, so a COPY rebuilds each row once; row triggers on
updates, only for succeeded runs and finished scheduled jobs, so heartbeats cost nothing).
The summaries are filled from what is stored. infercost.status.models describes the layout.

Revision ID: b6d9e4a2c015
Revises: a4c7e2f1b014
Create Date: 2026-12-03 14:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "b6d9e4a2c015"
down_revision: str | None = "a4c7e2f1b014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: How far back the summaries reach (infercost.status.models.SUMMARY_DAYS) and the fewest
#: succeeded requests of an adequate run without an adequacy block (metrics.py), as of now.
VALUES = {"days": 31, "min_requests": 100}

# The functions and triggers, in order (%(days)d and %(min_requests)d from VALUES).
STATEMENTS = [
    """
CREATE FUNCTION status_rebuild_series(
  p_team uuid, p_endpoint uuid, p_fp varchar, p_mode varchar, p_level float8
) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  -- One rebuild of a row at a time: the second waits, then reads what the first committed.
  PERFORM pg_advisory_xact_lock(hashtextextended(
    'status_series:' || p_team || p_endpoint || coalesce(p_fp, '') || p_mode || p_level, 0));
  DELETE FROM status_series WHERE team_id = p_team AND endpoint_id = p_endpoint
    AND workload_fingerprint = coalesce(p_fp, '') AND mode = p_mode AND level = p_level;
  INSERT INTO status_series (
    team_id, endpoint_id, workload_fingerprint, mode, level, newest_at, newest_run_id,
    newest_job_id, counted_at, counted_run_id, counted_job_id, verdict, verdict_at,
    verdict_run_id, runs, ats)
  SELECT p_team, p_endpoint, coalesce(p_fp, ''), p_mode, p_level,
    (array_agg(finished_at ORDER BY finished_at DESC, id DESC))[1],
    (array_agg(id ORDER BY finished_at DESC, id DESC))[1],
    (array_agg(job_id ORDER BY finished_at DESC, id DESC))[1],
    (array_agg(finished_at ORDER BY finished_at DESC, id DESC) FILTER (WHERE counted))[1],
    (array_agg(id ORDER BY finished_at DESC, id DESC) FILTER (WHERE counted))[1],
    (array_agg(job_id ORDER BY finished_at DESC, id DESC) FILTER (WHERE counted))[1],
    (array_agg(change_verdict ORDER BY finished_at DESC, id DESC)
       FILTER (WHERE change_verdict IS NOT NULL))[1],
    (array_agg(finished_at ORDER BY finished_at DESC, id DESC)
       FILTER (WHERE change_verdict IS NOT NULL))[1],
    (array_agg(id ORDER BY finished_at DESC, id DESC)
       FILTER (WHERE change_verdict IS NOT NULL))[1],
    string_agg(
      float8send(at) || float8send(counted::int::float8)
      || float8send(requests_total::float8) || float8send(requests_failed::float8)
      || float8send(coalesce(f1, 'NaN')) || float8send(coalesce(f2, 'NaN'))
      || float8send(coalesce(f3, 'NaN')) || float8send(coalesce(f4, 'NaN'))
      || float8send(coalesce(f5, 'NaN')) || float8send(coalesce(f6, 'NaN'))
      || float8send(coalesce(f7, 'NaN')),
      ''::bytea ORDER BY finished_at, id),
    array_agg(finished_at ORDER BY finished_at, id)
  FROM (
    -- The board's per-run figures (infercost.status.figures.FIGURES, in order).
    SELECT r.id, r.job_id, r.finished_at, extract(epoch FROM r.finished_at)::float8 AS at,
           r.change_verdict, r.requests_total, r.requests_failed,
           coalesce((r.adequacy ->> 'ok')::boolean,
                    r.adequacy IS NULL AND r.requests_succeeded >= %(min_requests)d)
             AND r.client_bound IS NOT TRUE AS counted,
           r.ttft_p50_ms AS f1, r.ttft_p95_ms AS f2, r.tpot_p50_ms AS f3,
           r.tpot_p95_ms AS f4, r.per_user_tokens_per_s_p50 AS f5,
           CASE WHEN d.hardware IS NULL THEN NULL
                ELSE r.output_tokens_per_s / d.gpu_count END AS f6,
           -- No request met the SLO: infinitely costly per good token, not missing.
           CASE WHEN r.goodput_output_tokens_per_s > 0
                THEN r.cost_per_million_output_tokens_usd * r.output_tokens_per_s
                     / r.goodput_output_tokens_per_s
                WHEN r.output_tokens_per_s > 0 AND r.cost_per_million_output_tokens_usd
                     IS NOT NULL THEN 'Infinity'::float8
           END AS f7
    FROM runs r LEFT JOIN deployments d ON d.id = r.deployment_id
    WHERE r.team_id = p_team AND r.endpoint_id = p_endpoint
      AND (r.workload_fingerprint = p_fp OR (p_fp IS NULL AND r.workload_fingerprint IS NULL))
      AND r.mode = p_mode AND r.level = p_level AND r.status = 'succeeded'
      AND r.finished_at >= now() - interval '%(days)d days'
  ) x
  -- (A team being deleted takes its runs along: nothing to keep for it.)
  HAVING count(*) > 0 AND EXISTS (SELECT 1 FROM teams WHERE id = p_team);
END $$
""",
    """
CREATE FUNCTION status_rebuild_job_series(p_team uuid, p_endpoint uuid, p_fp varchar)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_advisory_xact_lock(hashtextextended(
    'status_job_series:' || p_team || p_endpoint || coalesce(p_fp, ''), 0));
  DELETE FROM status_job_series WHERE team_id = p_team AND endpoint_id = p_endpoint
    AND workload_fingerprint = coalesce(p_fp, '');
  INSERT INTO status_job_series
  SELECT p_team, p_endpoint, coalesce(p_fp, ''), max(created_at),
         string_agg(float8send(extract(epoch FROM created_at)::float8)
                    || float8send((status = 'succeeded')::int::float8),
                    ''::bytea ORDER BY created_at, id)
  FROM jobs
  WHERE team_id = p_team AND endpoint_id = p_endpoint
    AND (workload_fingerprint = p_fp OR (p_fp IS NULL AND workload_fingerprint IS NULL))
    AND schedule_id IS NOT NULL AND status IN ('succeeded', 'failed')
    AND created_at >= now() - interval '%(days)d days'
  HAVING count(*) > 0 AND EXISTS (SELECT 1 FROM teams WHERE id = p_team);
END $$
""",
    """
CREATE FUNCTION status_runs_statement() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE k record;
BEGIN
  IF TG_OP = 'INSERT' THEN
    FOR k IN SELECT DISTINCT team_id, endpoint_id, workload_fingerprint, mode, level FROM new_runs
             WHERE status = 'succeeded' AND finished_at >= now() - interval '%(days)d days'
             ORDER BY 1, 2, 3, 4, 5 LOOP
      PERFORM status_rebuild_series(
        k.team_id, k.endpoint_id, k.workload_fingerprint, k.mode, k.level);
    END LOOP;
  ELSE
    FOR k IN SELECT DISTINCT team_id, endpoint_id, workload_fingerprint, mode, level FROM old_runs
             WHERE status = 'succeeded' AND finished_at >= now() - interval '%(days)d days'
             ORDER BY 1, 2, 3, 4, 5 LOOP
      PERFORM status_rebuild_series(
        k.team_id, k.endpoint_id, k.workload_fingerprint, k.mode, k.level);
    END LOOP;
  END IF;
  RETURN NULL;
END $$
""",
    """
CREATE FUNCTION status_runs_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF OLD.status = 'succeeded' AND OLD.finished_at >= now() - interval '%(days)d days' THEN
    PERFORM status_rebuild_series(
        OLD.team_id, OLD.endpoint_id, OLD.workload_fingerprint, OLD.mode, OLD.level);
  END IF;
  IF NEW.status = 'succeeded' AND NEW.finished_at >= now() - interval '%(days)d days'
     AND (OLD.status IS DISTINCT FROM 'succeeded'
          OR OLD.finished_at < now() - interval '%(days)d days'
          OR (OLD.team_id, OLD.endpoint_id, OLD.workload_fingerprint, OLD.mode, OLD.level)
             IS DISTINCT FROM
             (NEW.team_id, NEW.endpoint_id, NEW.workload_fingerprint, NEW.mode, NEW.level)) THEN
    PERFORM status_rebuild_series(
        NEW.team_id, NEW.endpoint_id, NEW.workload_fingerprint, NEW.mode, NEW.level);
  END IF;
  RETURN NULL;
END $$
""",
    """
CREATE TRIGGER status_runs_insert AFTER INSERT ON runs REFERENCING NEW TABLE AS new_runs
  FOR EACH STATEMENT EXECUTE FUNCTION status_runs_statement()
""",
    """
CREATE TRIGGER status_runs_delete AFTER DELETE ON runs REFERENCING OLD TABLE AS old_runs
  FOR EACH STATEMENT EXECUTE FUNCTION status_runs_statement()
""",
    """
CREATE TRIGGER status_runs_update AFTER UPDATE ON runs FOR EACH ROW
  WHEN (OLD.status = 'succeeded' OR NEW.status = 'succeeded')
  EXECUTE FUNCTION status_runs_row()
""",
    """
CREATE FUNCTION status_jobs_statement() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE k record;
BEGIN
  IF TG_OP = 'INSERT' THEN
    FOR k IN SELECT DISTINCT team_id, endpoint_id, workload_fingerprint FROM new_jobs
             WHERE schedule_id IS NOT NULL AND status IN ('succeeded', 'failed')
               AND created_at >= now() - interval '%(days)d days'
             ORDER BY 1, 2, 3 LOOP
      PERFORM status_rebuild_job_series(k.team_id, k.endpoint_id, k.workload_fingerprint);
    END LOOP;
  ELSE
    FOR k IN SELECT DISTINCT team_id, endpoint_id, workload_fingerprint FROM old_jobs
             WHERE schedule_id IS NOT NULL AND status IN ('succeeded', 'failed')
               AND created_at >= now() - interval '%(days)d days'
             ORDER BY 1, 2, 3 LOOP
      PERFORM status_rebuild_job_series(k.team_id, k.endpoint_id, k.workload_fingerprint);
    END LOOP;
  END IF;
  RETURN NULL;
END $$
""",
    """
CREATE FUNCTION status_jobs_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF OLD.schedule_id IS NOT NULL AND OLD.status IN ('succeeded', 'failed')
     AND OLD.created_at >= now() - interval '%(days)d days' THEN
    PERFORM status_rebuild_job_series(OLD.team_id, OLD.endpoint_id, OLD.workload_fingerprint);
  END IF;
  IF NEW.schedule_id IS NOT NULL AND NEW.status IN ('succeeded', 'failed')
     AND NEW.created_at >= now() - interval '%(days)d days'
     AND ((OLD.team_id, OLD.endpoint_id, OLD.workload_fingerprint)
          IS DISTINCT FROM (NEW.team_id, NEW.endpoint_id, NEW.workload_fingerprint)
          OR NOT (OLD.schedule_id IS NOT NULL AND OLD.status IN ('succeeded', 'failed')
                  AND OLD.created_at >= now() - interval '%(days)d days')) THEN
    PERFORM status_rebuild_job_series(NEW.team_id, NEW.endpoint_id, NEW.workload_fingerprint);
  END IF;
  RETURN NULL;
END $$
""",
    """
CREATE TRIGGER status_jobs_insert AFTER INSERT ON jobs REFERENCING NEW TABLE AS new_jobs
  FOR EACH STATEMENT EXECUTE FUNCTION status_jobs_statement()
""",
    """
CREATE TRIGGER status_jobs_delete AFTER DELETE ON jobs REFERENCING OLD TABLE AS old_jobs
  FOR EACH STATEMENT EXECUTE FUNCTION status_jobs_statement()
""",
    """
CREATE TRIGGER status_jobs_update AFTER UPDATE ON jobs FOR EACH ROW
  WHEN ((OLD.schedule_id IS NOT NULL AND OLD.status IN ('succeeded', 'failed'))
        OR (NEW.schedule_id IS NOT NULL AND NEW.status IN ('succeeded', 'failed')))
  EXECUTE FUNCTION status_jobs_row()
""",
]
# Fill the summaries from what is stored.
BACKFILL = [
    """
SELECT status_rebuild_series(team_id, endpoint_id, workload_fingerprint, mode, level)
FROM (SELECT DISTINCT team_id, endpoint_id, workload_fingerprint, mode, level FROM runs
      WHERE status = 'succeeded' AND finished_at >= now() - interval '%(days)d days') k
""",
    """
SELECT status_rebuild_job_series(team_id, endpoint_id, workload_fingerprint)
FROM (SELECT DISTINCT team_id, endpoint_id, workload_fingerprint FROM jobs
      WHERE schedule_id IS NOT NULL AND status IN ('succeeded', 'failed')
        AND created_at >= now() - interval '%(days)d days') k
""",
]
TRIGGERS = {
    "status_runs_insert": "runs",
    "status_runs_delete": "runs",
    "status_runs_update": "runs",
    "status_jobs_insert": "jobs",
    "status_jobs_delete": "jobs",
    "status_jobs_update": "jobs",
}
FUNCTIONS = [
    "status_rebuild_series(uuid, uuid, varchar, varchar, float8)",
    "status_rebuild_job_series(uuid, uuid, varchar)",
    "status_runs_statement()",
    "status_runs_row()",
    "status_jobs_statement()",
    "status_jobs_row()",
]


def upgrade() -> None:
    op.create_table(
        "status_series",
        sa.Column("team_id", sa.Uuid(), nullable=False),
        sa.Column("endpoint_id", sa.Uuid(), nullable=False),
        sa.Column("workload_fingerprint", sa.String(length=16), nullable=False),
        sa.Column("mode", sa.String(length=16), nullable=False),
        sa.Column("level", sa.Double(), nullable=False),
        sa.Column("newest_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("newest_run_id", sa.Uuid(), nullable=False),
        sa.Column("newest_job_id", sa.Uuid(), nullable=False),
        sa.Column("counted_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("counted_run_id", sa.Uuid(), nullable=True),
        sa.Column("counted_job_id", sa.Uuid(), nullable=True),
        sa.Column("verdict", sa.String(length=20), nullable=True),
        sa.Column("verdict_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("verdict_run_id", sa.Uuid(), nullable=True),
        sa.Column("runs", sa.LargeBinary(), nullable=False),
        sa.Column("ats", postgresql.ARRAY(sa.DateTime(timezone=True)), nullable=False),
        sa.ForeignKeyConstraint(
            ["team_id"],
            ["teams.id"],
            name=op.f("fk_status_series_team_id_teams"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint(
            "team_id",
            "endpoint_id",
            "workload_fingerprint",
            "mode",
            "level",
            name=op.f("pk_status_series"),
        ),
    )
    op.create_table(
        "status_job_series",
        sa.Column("team_id", sa.Uuid(), nullable=False),
        sa.Column("endpoint_id", sa.Uuid(), nullable=False),
        sa.Column("workload_fingerprint", sa.String(length=16), nullable=False),
        sa.Column("newest_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("jobs", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(
            ["team_id"],
            ["teams.id"],
            name=op.f("fk_status_job_series_team_id_teams"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint(
            "team_id", "endpoint_id", "workload_fingerprint", name=op.f("pk_status_job_series")
        ),
    )
    # Packed floats compress badly: stored out of line as they are, read without inflating.
    op.execute("ALTER TABLE status_series ALTER COLUMN runs SET STORAGE EXTERNAL")
    op.execute("ALTER TABLE status_job_series ALTER COLUMN jobs SET STORAGE EXTERNAL")
    op.create_index(
        "ix_jobs_scheduled_outcomes",
        "jobs",
        ["team_id", "endpoint_id", "workload_fingerprint", "created_at"],
        unique=False,
        postgresql_where=sa.text("schedule_id IS NOT NULL AND status IN ('succeeded', 'failed')"),
    )
    for statement in STATEMENTS + BACKFILL:
        op.execute(statement % VALUES)


def downgrade() -> None:
    for trigger, table in TRIGGERS.items():
        op.execute(f"DROP TRIGGER IF EXISTS {trigger} ON {table}")
    for function in FUNCTIONS:
        op.execute(f"DROP FUNCTION IF EXISTS {function}")
    op.drop_index(
        "ix_jobs_scheduled_outcomes",
        table_name="jobs",
        postgresql_where=sa.text("schedule_id IS NOT NULL AND status IN ('succeeded', 'failed')"),
    )
    op.drop_table("status_job_series")
    op.drop_table("status_series")
