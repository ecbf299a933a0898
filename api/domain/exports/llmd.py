"""A job as llm-d benchmark reports, version 0.2 (GET /v1/jobs/{id}/export?format=llmd).

llm-d-benchmark's report format (llm-d/llm-d-benchmark,
llmdbenchmark/analysis/benchmark_report/br_v0_2_json_schema.json) describes one benchmark
stage: the stack measured (`scenario.stack`), the load (`scenario.load`) and the request
performance (`results.request_performance.aggregate`). A job has one stage per load level,
so the export is JSON Lines: one complete report per run, in level order. Only what a run
knows is filled in; statistics the run does not have are left out rather than invented.
Runs imported from another tool say so: their load generator (`scenario.load.standardized.
tool`) is that tool, as their figures follow its definitions.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from datetime import datetime
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import msgspec

from api.domain.endpoints.schemas import EndpointRead
from api.domain.jobs.schemas import JobRead
from api.domain.runs.schemas import Distribution, RunSummary

LLMD_MEDIA_TYPE = "application/x-ndjson"
REPORT_VERSION = "0.2"
COMPONENT_SCHEMA_VERSION = "0.0.1"

#: Report statistic -> infercost's (docs/figures.md: linear percentiles, population std).
_STATISTICS = (
    ("mean", "mean"),
    ("stddev", "std"),
    ("min", "min"),
    ("p50", "p50"),
    ("p90", "p90"),
    ("p95", "p95"),
    ("p99", "p99"),
    ("p99p9", "p999"),
    ("max", "max"),
)


def _infercost_version() -> str:
    try:
        return version("infercost")
    except PackageNotFoundError:  # pragma: no cover - run from a source tree without metadata
        return "unknown"


def _cfg_id(value: object) -> str:
    """A stable hash of a configuration, as the report's cfg_id fields are."""
    text = json.dumps(value, sort_keys=True, default=str)
    return hashlib.md5(text.encode(), usedforsecurity=False).hexdigest()


def _statistics(dist: Distribution, units: str) -> dict[str, Any] | None:
    """A report Statistics block from one of infercost's distributions; None without a mean
    (the block requires one)."""
    if dist.mean is None:
        return None
    block: dict[str, Any] = {"units": units}
    for key, ours in _STATISTICS:
        value = getattr(dist, ours)
        if value is not None:
            block[key] = value
    return block


def _rate(value: float | None, units: str) -> dict[str, Any] | None:
    return None if value is None else {"units": units, "mean": value}


def _drop_none(block: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in block.items() if v is not None}


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat().replace("+00:00", "Z")


def _seq_len(spec: Any, per_request: float | None) -> dict[str, Any]:
    """A SequenceLength: the workload's distribution where it states one, else the mean the
    run measured (distribution "other"), else 0."""
    if isinstance(spec, Mapping) and isinstance(spec.get("mean"), (int, float)):
        std = spec.get("std")
        block: dict[str, Any] = {
            "distribution": "gaussian" if isinstance(std, (int, float)) and std > 0 else "fixed",
            "value": spec["mean"],
        }
        if isinstance(std, (int, float)) and std > 0:
            block["std_dev"] = std
        return block
    return {"distribution": "other", "value": round(per_request or 0.0, 3)}


def _per_request(tokens_per_s: float | None, requests_per_s: float | None) -> float | None:
    if tokens_per_s is None or not requests_per_s:
        return None
    return tokens_per_s / requests_per_s


def _stack(endpoint: EndpointRead, run: RunSummary) -> dict[str, Any]:
    config = {
        "name": endpoint.name,
        "model": endpoint.model,
        "engine": endpoint.engine,
        "hardware": endpoint.hardware,
        "gpu_count": endpoint.gpu_count,
    }
    return {
        "metadata": {
            "schema_version": COMPONENT_SCHEMA_VERSION,
            "label": endpoint.name,
            "cfg_id": _cfg_id(config),
            "description": (
                "an external endpoint: results imported from another tool"
                if endpoint.external
                else f"infercost endpoint {endpoint.id}"
            ),
        },
        "standardized": {
            "kind": "inference_engine",
            "tool": endpoint.engine or "unknown",
            "tool_version": endpoint.engine_version or "unknown",
            "role": "replica",
            "replicas": 1,
            "model": {"name": endpoint.model},
            "accelerator": {
                "model": endpoint.hardware or "unknown",
                "count": endpoint.gpu_count,
                "parallelism": {},
            },
        },
        "native": {
            "config": _drop_none(
                {
                    "api": endpoint.api,
                    "base_url": endpoint.base_url,
                    "usd_per_hour": run.cost.usd_per_hour,
                    "tags": dict(endpoint.tags) or None,
                }
            )
        },
    }


def _load(job: JobRead, run: RunSummary, index: int) -> dict[str, Any]:
    workload = job.workload
    if run.source is not None:
        tool, tool_version = run.source.tool, run.source.tool_version or "unknown"
        source = "unknown"
    else:
        tool, tool_version = "infercost", _infercost_version()
        source = "sampled" if workload.get("dataset_id") else "random"
    standardized: dict[str, Any] = {
        "tool": tool,
        "tool_version": tool_version,
        "source": source,
        "stage": index,
        "input_seq_len": _seq_len(
            workload.get("input_tokens"),
            _per_request(run.input_tokens_per_s, run.requests_per_s),
        ),
        "output_seq_len": _seq_len(
            workload.get("output_tokens"),
            _per_request(run.output_tokens_per_s, run.requests_per_s),
        ),
    }
    if run.mode == "rate" and run.level > 0:
        standardized["rate_qps"] = run.level
    if run.mode == "concurrency" and run.level >= 1:
        standardized["concurrency"] = run.level
    return {
        "metadata": {
            "schema_version": COMPONENT_SCHEMA_VERSION,
            "cfg_id": job.workload_fingerprint or _cfg_id(workload),
            "description": f"{run.mode} {run.level:g}"
            + (f", imported from {run.source.tool}" if run.source is not None else ""),
        },
        "standardized": standardized,
        "native": {"config": {"workload": workload, "load": job.load}},
    }


def _results(run: RunSummary) -> dict[str, Any]:
    latency = _drop_none(
        {
            "time_to_first_token": _statistics(run.ttft_ms, "ms"),
            "time_per_output_token": _statistics(run.tpot_ms, "ms/token"),
            "inter_token_latency": _statistics(run.itl_ms, "ms/token"),
            "request_latency": _statistics(run.e2e_ms, "ms"),
        }
    )
    throughput = _drop_none(
        {
            "input_token_rate": _rate(run.input_tokens_per_s, "tokens/s"),
            "output_token_rate": _rate(run.output_tokens_per_s, "tokens/s"),
            "total_token_rate": _rate(run.total_tokens_per_s, "tokens/s"),
            "request_rate": _rate(run.requests_per_s, "queries/s"),
        }
    )
    aggregate: dict[str, Any] = {
        "requests": {"total": run.requests.total, "failures": run.requests.failed}
    }
    if latency:
        aggregate["latency"] = latency
    if throughput:
        aggregate["throughput"] = throughput
    return {"request_performance": {"aggregate": aggregate}}


def report(job: JobRead, endpoint: EndpointRead, run: RunSummary, index: int) -> dict[str, Any]:
    """One run of a job as an llm-d benchmark report, version 0.2."""
    time = _drop_none(
        {
            "start": _iso(run.started_at),
            "end": _iso(run.finished_at),
            "duration": None if run.duration_s is None else f"PT{run.duration_s}S",
        }
    )
    keywords = ["infercost", run.mode]
    if run.source is not None:
        keywords.append(f"imported-{run.source.tool}")
    return {
        "version": REPORT_VERSION,
        "run": {
            "uid": str(run.id),
            "eid": str(job.id),
            "time": time,
            "description": f"{endpoint.model} [{endpoint.name}, {run.mode} {run.level:g}]",
            "keywords": keywords,
        },
        "scenario": {"stack": [_stack(endpoint, run)], "load": _load(job, run, index)},
        "results": _results(run),
    }


def reports(job: JobRead, endpoint: EndpointRead) -> Iterable[dict[str, Any]]:
    """Every run of the job as a report, in level order."""
    for index, run in enumerate(job.runs):
        yield report(job, endpoint, run, index)


def report_lines(job: JobRead, endpoint: EndpointRead) -> bytes:
    """The export's body: one report a line."""
    encoder = msgspec.json.Encoder()
    return b"".join(encoder.encode(r) + b"\n" for r in reports(job, endpoint))
