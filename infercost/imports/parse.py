"""Result files of other benchmark tools read into runs (POST /v1/imports).

vLLM's `--save-result` JSON (one result, or one per line with `--append-result`, with the
per-request arrays of `--save-detailed` where present), GuideLLM's `benchmarks.json` (report
version 2) and AIPerf's `profile_export_aiperf.json` (or its per-request
`profile_export.jsonl`). Each figure is taken as the tool printed it and stored under
infercost's name together with the tool's own name and definition (`definitions`), so a
reader always knows that an imported TPOT is, say, GuideLLM's and not infercost's
(infercost.figures.peers has how each differs).

Pure functions over bytes: no database, no web. A file that cannot be read raises
`UnreadableResult` with a sentence naming what is wrong and where.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from infercost.errors import InfercostError
from infercost.figures.metrics import STAT_KEYS, distribution
from infercost.figures.peers import DIFFERENCES, METRIC_NAMES, SOURCES

ImportFormat = Literal["vllm", "guidellm", "aiperf"]
FORMATS: tuple[ImportFormat, ...] = ("vllm", "guidellm", "aiperf")

Stats = dict[str, float | int | None]

#: What each format's figures are called in the file (infercost's name -> the tool's), for
#: the figures infercost.figures.peers does not already name.
_FILE_NAMES: dict[ImportFormat, dict[str, str]] = {
    "vllm": {
        "ttft_ms": "TTFT (mean_ttft_ms, median_ttft_ms, p99_ttft_ms ...)",
        "e2e_ms": "E2EL (mean_e2el_ms ...)",
        "tpot_ms": "TPOT (mean_tpot_ms ...)",
        "itl_ms": "ITL (mean_itl_ms ...)",
    },
    "guidellm": {
        "ttft_ms": "time_to_first_token_ms",
        "e2e_ms": "request_latency (seconds, shown here in ms)",
        "tpot_ms": "time_per_output_token_ms",
        "itl_ms": "inter_token_latency_ms",
    },
    "aiperf": {
        "ttft_ms": "time_to_first_token",
        "e2e_ms": "request_latency",
        "tpot_ms": "inter_token_latency",
        "itl_ms": "inter_chunk_latency",
        "per_user_tokens_per_s": "output_token_throughput_per_user",
    },
}

#: The workload fingerprint of imported runs, one per tool: comparisons and history group
#: runs by fingerprint, so an imported run is never aggregated with infercost's own runs (or
#: another tool's), whose figures follow other definitions.
IMPORT_FINGERPRINTS: dict[ImportFormat, str] = {tool: f"{tool}-import" for tool in FORMATS}


def definitions_of(fingerprint: str | None) -> str:
    """Whose definitions the runs of a workload fingerprint follow: a tool's for imported
    runs, infercost's otherwise."""
    for tool, mark in IMPORT_FINGERPRINTS.items():
        if fingerprint == mark:
            return tool
    return "infercost"


#: The file each format is, as the tool's documentation names it.
FILE_KINDS: dict[ImportFormat, str] = {
    "vllm": "vllm bench serve --save-result JSON",
    "guidellm": "GuideLLM benchmarks.json",
    "aiperf": "AIPerf profile_export_aiperf.json or profile_export.jsonl",
}


_KINDS: dict[str, str] = {str(k): v for k, v in FILE_KINDS.items()}


class UnreadableResult(InfercostError):
    """A result file that is not what its format says (422, nothing stored)."""

    status_code = 422
    title = "Invalid input"

    def __init__(self, fmt: str, problem: str) -> None:
        super().__init__(
            f"this is not a {_KINDS.get(fmt, fmt)} infercost can read: {problem}; "
            "check `format` and the file, and send it again (nothing was stored)",
            errors=[{"field": "body", "message": problem}],
        )


@dataclass(slots=True)
class ImportedSample:
    """One request of a file with per-request records; times in seconds or ms as named."""

    t_send: float
    ttft_ms: float | None
    e2e_ms: float | None
    n_in: int | None
    n_out: int
    error: str | None
    error_class: str | None
    status: int | None
    chunk_times_ms: list[float]
    warmup: bool = False


@dataclass(slots=True)
class ImportedRun:
    """One benchmark of the file (a load level): its figures as the tool reported them."""

    level: float
    mode: str
    requests_total: int
    requests_succeeded: int
    requests_failed: int
    errors: dict[str, int]
    duration_s: float | None
    stats: dict[str, Stats]
    output_tokens_per_s: float | None
    input_tokens_per_s: float | None
    total_tokens_per_s: float | None
    requests_per_s: float | None
    started_at: datetime | None
    finished_at: datetime | None
    label: str | None = None
    samples: list[ImportedSample] = field(default_factory=list)


@dataclass(slots=True)
class ImportedFile:
    """A whole file: the tool, what it measured, and its benchmarks in file order."""

    tool: ImportFormat
    tool_version: str | None
    model: str | None
    engine: str | None
    runs: list[ImportedRun]
    kind: str
    hardware_hint: str | None = None

    def source(self, run: ImportedRun) -> dict[str, Any]:
        """A run's `source` block: who measured it and whose definitions its figures are."""
        names = {**METRIC_NAMES[self.tool], **_FILE_NAMES[self.tool]}
        return {
            "tool": self.tool,
            "tool_version": self.tool_version,
            "file": self.kind,
            "label": run.label,
            "definitions": self.tool,
            "metric_names": names,
            "differences": list(DIFFERENCES[self.tool]),
            "sources": list(SOURCES[self.tool]),
            "hardware_in_file": self.hardware_hint,
            "per_request": bool(run.samples),
        }


# --- helpers --------------------------------------------------------------------------------


def _stats(count: int, **values: Any) -> Stats:
    """A distribution block of infercost's shape from what the file gives (null elsewhere)."""
    out: Stats = dict.fromkeys(STAT_KEYS)
    out["count"] = count
    for key, value in values.items():
        out[key] = _number(value)
    return out


def _number(value: Any) -> float | None:
    """A finite number, or None (files write null, "inf" or leave figures out)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _obj(data: Mapping[str, Any], key: str) -> dict[str, Any]:
    """The object under `key`, or an empty one where the file has none."""
    value = data.get(key)
    return value if isinstance(value, dict) else {}


def _need(fmt: str, where: str, data: Mapping[str, Any], key: str) -> float:
    value = _number(data.get(key))
    if value is None:
        raise UnreadableResult(fmt, f"{where} has no number `{key}`")
    return value


def _epoch(value: Any) -> datetime | None:
    """A Unix time in seconds as a UTC time; None where it is none (or out of range)."""
    number = _number(value)
    if number is None:
        return None
    try:
        return datetime.fromtimestamp(number, UTC)
    except (OverflowError, OSError, ValueError):
        return None


def _iso(value: Any) -> datetime | None:
    """An ISO 8601 time; one without a zone is taken as UTC."""
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _before(end: datetime | None, seconds: float) -> datetime | None:
    """`seconds` before `end`; None without an end, or out of the calendar's range."""
    if end is None:
        return None
    try:
        return end - timedelta(seconds=seconds)
    except OverflowError:
        return None


def _json_documents(fmt: str, body: bytes) -> list[Any]:
    """The body as one JSON document, or as JSON lines (one document a line)."""
    try:
        text = body.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UnreadableResult(fmt, f"the body is not UTF-8 text (byte {exc.start})") from None
    if not text.strip():
        raise UnreadableResult(fmt, "the body is empty")
    try:
        return [json.loads(text)]
    except RecursionError:
        raise UnreadableResult(fmt, "it nests deeper than a result file does") from None
    except json.JSONDecodeError as whole:
        documents = []
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                documents.append(json.loads(line))
            except RecursionError:
                raise UnreadableResult(fmt, f"line {number} nests too deep") from None
            except json.JSONDecodeError as exc:
                if number == 1:
                    raise UnreadableResult(
                        fmt,
                        f"the body is not JSON (line {whole.lineno}, column {whole.colno}: "
                        f"{whole.msg})",
                    ) from None
                raise UnreadableResult(
                    fmt, f"line {number} is not JSON (column {exc.colno}: {exc.msg})"
                ) from None
        return documents


# --- vLLM -----------------------------------------------------------------------------------

_VLLM_METRICS = {"ttft_ms": "ttft", "tpot_ms": "tpot", "itl_ms": "itl", "e2e_ms": "e2el"}
_VLLM_PERCENTILES = {"p50": "50", "p90": "90", "p95": "95", "p99": "99", "p999": "99.9"}


def _vllm_stats(data: Mapping[str, Any], name: str, count: int) -> Stats:
    values: dict[str, Any] = {
        "mean": data.get(f"mean_{name}_ms"),
        "std": data.get(f"std_{name}_ms"),
    }
    for key, word in _VLLM_PERCENTILES.items():
        values[key] = data.get(f"p{word}_{name}_ms")
    if values["p50"] is None:
        values["p50"] = data.get(f"median_{name}_ms")
    return _stats(count, **values)


def _vllm_samples(fmt: str, data: Mapping[str, Any], where: str) -> list[ImportedSample]:
    """`--save-detailed`'s per-request arrays, one sample each (empty without them)."""
    ttfts = data.get("ttfts")
    if not isinstance(ttfts, list):
        return []
    n = len(ttfts)
    arrays: dict[str, list[Any]] = {}
    for key in ("input_lens", "output_lens", "itls", "errors", "start_times", "latencies"):
        value = data.get(key)
        if isinstance(value, list):
            if len(value) != n:
                raise UnreadableResult(
                    fmt, f"{where}: `{key}` has {len(value)} entries, `ttfts` has {n}"
                )
            arrays[key] = value
    starts = arrays.get("start_times")
    origin = min((_number(s) or 0.0) for s in starts) if starts else 0.0
    samples = []
    for i in range(n):
        error = arrays["errors"][i] if "errors" in arrays else ""
        gaps = arrays["itls"][i] if "itls" in arrays else []
        ttft_s = _number(ttfts[i])
        ok = not error and ttft_s is not None
        chunks: list[float] = []
        if ok and ttft_s is not None:
            at = ttft_s * 1000.0
            chunks.append(at)
            for gap in gaps if isinstance(gaps, list) else []:
                at += (_number(gap) or 0.0) * 1000.0
                chunks.append(at)
        latency = _number(arrays["latencies"][i]) if "latencies" in arrays else None
        n_in = arrays["input_lens"][i] if "input_lens" in arrays else None
        n_out = arrays["output_lens"][i] if "output_lens" in arrays else 0
        start = _number(starts[i]) if starts else None
        samples.append(
            ImportedSample(
                t_send=(start - origin) if start is not None else 0.0,
                ttft_ms=ttft_s * 1000.0 if ok and ttft_s is not None else None,
                e2e_ms=latency * 1000.0 if latency is not None else None,
                n_in=int(n_in) if isinstance(n_in, int) else None,
                n_out=int(n_out) if isinstance(n_out, int) and ok else 0,
                error=str(error)[:2000] if error else None,
                error_class="protocol" if error else None,
                status=None,
                chunk_times_ms=chunks,
            )
        )
    return samples


def _vllm_run(fmt: str, data: Any, where: str) -> tuple[ImportedRun, Mapping[str, Any]]:
    if not isinstance(data, dict):
        raise UnreadableResult(fmt, f"{where} is not a JSON object")
    completed = int(_need(fmt, where, data, "completed"))
    duration = _need(fmt, where, data, "duration")
    failed_value = _number(data.get("failed"))
    prompts = _number(data.get("num_prompts"))
    if failed_value is not None:
        failed = int(failed_value)
    elif prompts is not None:
        failed = max(0, int(prompts) - completed)
    else:
        failed = 0
    concurrency = _number(data.get("max_concurrency"))
    rate = _number(data.get("request_rate"))
    if concurrency is not None:
        mode, level = "concurrency", concurrency
    elif rate is not None:
        mode, level = "rate", rate
    else:
        # "inf": every prompt sent at once.
        mode, level = "burst", float(completed + failed)
    input_tokens = _number(data.get("total_input_tokens"))
    finished = None
    stamp = data.get("date")
    if isinstance(stamp, str):
        try:
            # The time the result was saved, at the end of the run (the client's clock,
            # taken as UTC).
            finished = datetime.strptime(stamp, "%Y%m%d-%H%M%S").replace(tzinfo=UTC)
        except ValueError:
            finished = None
    run = ImportedRun(
        level=level,
        mode=mode,
        requests_total=completed + failed,
        requests_succeeded=completed,
        requests_failed=failed,
        errors={"failed": failed} if failed else {},
        duration_s=duration,
        stats={name: _vllm_stats(data, word, completed) for name, word in _VLLM_METRICS.items()},
        output_tokens_per_s=_number(data.get("output_throughput")),
        input_tokens_per_s=input_tokens / duration
        if input_tokens is not None and duration
        else None,
        total_tokens_per_s=_number(data.get("total_token_throughput")),
        requests_per_s=_number(data.get("request_throughput")),
        started_at=_before(finished, duration),
        finished_at=finished,
        label=data.get("label") if isinstance(data.get("label"), str) else None,
        samples=_vllm_samples(fmt, data, where),
    )
    return run, data


def read_vllm(body: bytes) -> ImportedFile:
    """vLLM's `--save-result` JSON: one object, or one object a line (`--append-result`)."""
    documents = _json_documents("vllm", body)
    if len(documents) == 1 and isinstance(documents[0], list):
        documents = documents[0]
    runs = []
    first: Mapping[str, Any] = {}
    for index, document in enumerate(documents):
        where = "the result" if len(documents) == 1 else f"result {index + 1} (line {index + 1})"
        run, data = _vllm_run("vllm", document, where)
        runs.append(run)
        first = first or data
    backend = first.get("backend")
    version = first.get("vllm_version")
    model = first.get("model_id") or first.get("model")
    return ImportedFile(
        tool="vllm",
        tool_version=version if isinstance(version, str) else None,
        model=model if isinstance(model, str) else None,
        engine="vllm" if backend == "vllm" else None,
        runs=runs,
        kind=FILE_KINDS["vllm"],
        hardware_hint=first.get("gpu") if isinstance(first.get("gpu"), str) else None,
    )


# --- GuideLLM -------------------------------------------------------------------------------


def _guidellm_stats(metrics: Mapping[str, Any], name: str, scale: float = 1.0) -> Stats:
    block = metrics.get(name)
    summary = block.get("successful") if isinstance(block, dict) else None
    if not isinstance(summary, dict):
        return _stats(0)
    percentiles = _obj(summary, "percentiles")

    def scaled(value: Any) -> float | None:
        number = _number(value)
        return None if number is None else number * scale

    return _stats(
        int(_number(summary.get("count")) or 0),
        mean=scaled(summary.get("mean")),
        std=scaled(summary.get("std_dev")),
        min=scaled(summary.get("min")),
        max=scaled(summary.get("max")),
        p50=scaled(percentiles.get("p50", summary.get("median"))),
        p90=scaled(percentiles.get("p90")),
        p95=scaled(percentiles.get("p95")),
        p99=scaled(percentiles.get("p99")),
        p999=scaled(percentiles.get("p999")),
    )


def _guidellm_rate(metrics: Mapping[str, Any], name: str) -> float | None:
    block = metrics.get(name)
    summary = block.get("successful") if isinstance(block, dict) else None
    return _number(summary.get("mean")) if isinstance(summary, dict) else None


def _guidellm_level(strategy: Mapping[str, Any], total: int) -> tuple[str, float]:
    kind = strategy.get("type_") or strategy.get("kind")
    if kind == "synchronous":
        return "concurrency", 1.0
    if kind == "concurrent":
        return "concurrency", float(_number(strategy.get("streams")) or 1.0)
    if kind in ("constant", "poisson", "async") and _number(strategy.get("rate")) is not None:
        return "rate", float(strategy["rate"])
    # throughput: everything at once, as fast as the server takes it.
    return "burst", float(total)


def read_guidellm(body: bytes) -> ImportedFile:
    """GuideLLM's benchmarks.json: each benchmark of `benchmarks` is one run."""
    fmt: ImportFormat = "guidellm"
    documents = _json_documents(fmt, body)
    report = documents[0] if len(documents) == 1 else None
    if not isinstance(report, dict) or not isinstance(report.get("benchmarks"), list):
        raise UnreadableResult(fmt, "it has no `benchmarks` list at the top")
    if not report["benchmarks"]:
        raise UnreadableResult(fmt, "its `benchmarks` list is empty")
    runs = []
    model = None
    for index, bench in enumerate(report["benchmarks"]):
        where = f"benchmarks[{index}]"
        if not isinstance(bench, dict) or not isinstance(bench.get("metrics"), dict):
            raise UnreadableResult(fmt, f"{where} has no `metrics` object")
        metrics = bench["metrics"]
        totals = metrics.get("request_totals")
        if not isinstance(totals, dict) or _number(totals.get("successful")) is None:
            raise UnreadableResult(fmt, f"{where}.metrics has no `request_totals.successful`")
        succeeded = int(totals["successful"])
        errored = int(_number(totals.get("errored")) or 0)
        incomplete = int(_number(totals.get("incomplete")) or 0)
        config = _obj(bench, "config")
        strategy = _obj(config, "strategy")
        backend = _obj(config, "backend")
        model = model or backend.get("model")
        mode, level = _guidellm_level(strategy, succeeded + errored + incomplete)
        errors = {}
        if errored:
            errors["errored"] = errored
        if incomplete:
            errors["incomplete"] = incomplete
        runs.append(
            ImportedRun(
                level=level,
                mode=mode,
                requests_total=succeeded + errored + incomplete,
                requests_succeeded=succeeded,
                requests_failed=errored + incomplete,
                errors=errors,
                duration_s=_number(bench.get("duration")),
                stats={
                    "ttft_ms": _guidellm_stats(metrics, "time_to_first_token_ms"),
                    "tpot_ms": _guidellm_stats(metrics, "time_per_output_token_ms"),
                    "itl_ms": _guidellm_stats(metrics, "inter_token_latency_ms"),
                    "e2e_ms": _guidellm_stats(metrics, "request_latency", 1000.0),
                },
                output_tokens_per_s=_guidellm_rate(metrics, "output_tokens_per_second"),
                input_tokens_per_s=_guidellm_rate(metrics, "prompt_tokens_per_second"),
                total_tokens_per_s=_guidellm_rate(metrics, "tokens_per_second"),
                requests_per_s=_guidellm_rate(metrics, "requests_per_second"),
                started_at=_epoch(bench.get("start_time")),
                finished_at=_epoch(bench.get("end_time")),
                label=str(strategy.get("type_")) if strategy.get("type_") else None,
            )
        )
    meta = _obj(report, "metadata")
    version = meta.get("guidellm_version")
    return ImportedFile(
        tool=fmt,
        tool_version=version if isinstance(version, str) else None,
        model=model if isinstance(model, str) else None,
        engine=None,
        runs=runs,
        kind=FILE_KINDS[fmt],
    )


# --- AIPerf ---------------------------------------------------------------------------------


def _aiperf_value(block: Any) -> float | None:
    """A summary figure, written as {"unit", "avg"} or as a bare number."""
    if isinstance(block, dict):
        return _number(block.get("avg"))
    return _number(block)


def _aiperf_stats(data: Mapping[str, Any], name: str, count: int) -> Stats:
    block = data.get(name)
    if not isinstance(block, dict):
        return _stats(0)
    return _stats(
        count,
        mean=block.get("avg"),
        std=block.get("std"),
        min=block.get("min"),
        max=block.get("max"),
        p50=block.get("p50"),
        p90=block.get("p90"),
        p95=block.get("p95"),
        p99=block.get("p99"),
    )


def _aiperf_level(config: Mapping[str, Any], total: int) -> tuple[str, float]:
    loadgen = _obj(config, "loadgen")
    rate = _number(loadgen.get("request_rate"))
    concurrency = _number(loadgen.get("concurrency"))
    if rate is not None:
        return "rate", rate
    if concurrency is not None:
        return "concurrency", concurrency
    return "burst", float(total)


def _aiperf_model(config: Mapping[str, Any]) -> str | None:
    endpoint = _obj(config, "endpoint")
    names = endpoint.get("model_names")
    if isinstance(names, list) and names and isinstance(names[0], str):
        return names[0]
    return None


def _aiperf_summary(data: Mapping[str, Any]) -> ImportedFile:
    fmt: ImportFormat = "aiperf"
    records: Mapping[str, Any] = _obj(data, "records") or data
    succeeded_value = _aiperf_value(records.get("request_count"))
    if succeeded_value is None:
        raise UnreadableResult(fmt, "it has no `request_count` (a profile_export_aiperf.json has)")
    succeeded = int(succeeded_value)
    failed_value = _aiperf_value(records.get("error_request_count"))
    errors: dict[str, int] = {}
    summary_entries = data.get("error_summary")
    for entry in summary_entries if isinstance(summary_entries, list) else []:
        if isinstance(entry, dict) and isinstance(entry.get("error_details"), dict):
            kind = str(entry["error_details"].get("type") or "error")
            errors[kind] = errors.get(kind, 0) + int(_number(entry.get("count")) or 0)
    failed = int(failed_value) if failed_value is not None else sum(errors.values())
    duration = _aiperf_value(records.get("benchmark_duration"))
    output_tokens = _aiperf_value(records.get("total_osl")) or _aiperf_value(
        records.get("total_output_tokens")
    )
    input_tokens = _aiperf_value(records.get("total_isl"))

    def rate(name: str, amount: float | None) -> float | None:
        given = _aiperf_value(records.get(name))
        if given is not None:
            return given
        return amount / duration if amount is not None and duration else None

    config = _obj(data, "input_config")
    mode, level = _aiperf_level(config, succeeded + failed)
    output_rate = rate("output_token_throughput", output_tokens)
    input_rate = rate("input_token_throughput", input_tokens)
    total_rate = _aiperf_value(records.get("total_token_throughput"))
    if total_rate is None and output_rate is not None and input_rate is not None:
        total_rate = output_rate + input_rate
    hint = None
    telemetry = data.get("telemetry_data")
    if isinstance(telemetry, dict):
        for endpoint in _obj(telemetry, "endpoints").values():
            for gpu in _obj(endpoint, "gpus").values() if isinstance(endpoint, dict) else []:
                if isinstance(gpu, dict) and isinstance(gpu.get("gpu_name"), str):
                    hint = hint or gpu["gpu_name"]
    run = ImportedRun(
        level=level,
        mode=mode,
        requests_total=succeeded + failed,
        requests_succeeded=succeeded,
        requests_failed=failed,
        errors=errors or ({"failed": failed} if failed else {}),
        duration_s=duration,
        stats={
            "ttft_ms": _aiperf_stats(records, "time_to_first_token", succeeded),
            "tpot_ms": _aiperf_stats(records, "inter_token_latency", succeeded),
            "itl_ms": _aiperf_stats(records, "inter_chunk_latency", succeeded),
            "e2e_ms": _aiperf_stats(records, "request_latency", succeeded),
            "per_user_tokens_per_s": _aiperf_stats(
                records, "output_token_throughput_per_user", succeeded
            ),
        },
        output_tokens_per_s=output_rate,
        input_tokens_per_s=input_rate,
        total_tokens_per_s=total_rate,
        requests_per_s=rate("request_throughput", float(succeeded)),
        started_at=_iso(data.get("start_time")),
        finished_at=_iso(data.get("end_time")),
    )
    version = data.get("aiperf_version")
    return ImportedFile(
        tool=fmt,
        tool_version=version if isinstance(version, str) else None,
        model=_aiperf_model(config),
        engine=None,
        runs=[run],
        kind=FILE_KINDS[fmt],
        hardware_hint=hint,
    )


def _metric(metrics: Mapping[str, Any], name: str) -> Any:
    block = metrics.get(name)
    return block.get("value") if isinstance(block, dict) else None


def _aiperf_records(documents: Sequence[Any]) -> ImportedFile:
    """profile_export.jsonl: one record a request; figures computed from the records as
    AIPerf defines them per request (its TTFT, request latency, inter_token_latency)."""
    fmt: ImportFormat = "aiperf"
    rows = []
    for number, record in enumerate(documents, start=1):
        if not isinstance(record, dict) or not isinstance(record.get("metadata"), dict):
            raise UnreadableResult(fmt, f"line {number} has no `metadata` object")
        meta = record["metadata"]
        start = _number(meta.get("request_start_ns"))
        end = _number(meta.get("request_end_ns"))
        if start is None:
            raise UnreadableResult(fmt, f"line {number} has no `metadata.request_start_ns`")
        rows.append((start, end, meta, _obj(record, "metrics"), record.get("error")))
    origin = min(r[0] for r in rows)
    samples = []
    for start, end, meta, metrics, error in sorted(rows, key=lambda r: r[0]):
        ttft = _number(_metric(metrics, "time_to_first_token"))
        latency = _number(_metric(metrics, "request_latency"))
        if latency is None and end is not None:
            latency = (end - start) / 1e6
        gaps = _metric(metrics, "inter_chunk_latency")
        chunks: list[float] = []
        if error is None and ttft is not None:
            at = ttft
            chunks.append(at)
            for gap in gaps if isinstance(gaps, list) else []:
                at += _number(gap) or 0.0
                chunks.append(at)
        n_in = _number(_metric(metrics, "input_sequence_length"))
        if n_in is None:
            n_in = _number(_metric(metrics, "error_isl"))
        n_out = _number(_metric(metrics, "output_sequence_length"))
        code = _number(error.get("code")) if isinstance(error, dict) else None
        samples.append(
            ImportedSample(
                t_send=(start - origin) / 1e9,
                ttft_ms=ttft if error is None else None,
                e2e_ms=latency,
                n_in=int(n_in) if n_in is not None else None,
                n_out=int(n_out) if n_out is not None and error is None else 0,
                error=(str(error.get("type")) + ": " + str(error.get("message")))[:2000]
                if isinstance(error, dict)
                else None,
                error_class=_error_class(code) if isinstance(error, dict) else None,
                status=int(code) if code is not None and 100 <= code < 600 else None,
                chunk_times_ms=chunks,
                warmup=meta.get("benchmark_phase") == "warmup",
            )
        )
    measured = [s for s in samples if not s.warmup]
    ok = [s for s in measured if s.error is None]
    errors: dict[str, int] = {}
    for s in measured:
        if s.error_class is not None:
            errors[s.error_class] = errors.get(s.error_class, 0) + 1
    ends = [(r[1] or r[0]) / 1e9 for r in rows if r[2].get("benchmark_phase") != "warmup"]
    starts = [r[0] / 1e9 for r in rows if r[2].get("benchmark_phase") != "warmup"]
    duration = (max(ends) - min(starts)) if measured else None
    tpot = [
        (s.chunk_times_ms[-1] - s.chunk_times_ms[0]) / (s.n_out - 1)
        for s in ok
        if s.n_out >= 2 and len(s.chunk_times_ms) >= 2
    ]
    gaps_all = [
        b - a for s in ok for a, b in zip(s.chunk_times_ms, s.chunk_times_ms[1:], strict=False)
    ]
    out_tokens = sum(s.n_out for s in ok)
    in_tokens = sum(s.n_in or 0 for s in ok)
    run = ImportedRun(
        level=1.0,
        mode="concurrency",
        requests_total=len(measured),
        requests_succeeded=len(ok),
        requests_failed=len(measured) - len(ok),
        errors=errors,
        duration_s=duration,
        stats={
            "ttft_ms": distribution([s.ttft_ms for s in ok if s.ttft_ms is not None]),
            "tpot_ms": distribution(tpot),
            "itl_ms": distribution(gaps_all),
            "e2e_ms": distribution([s.e2e_ms for s in ok if s.e2e_ms is not None]),
        },
        output_tokens_per_s=out_tokens / duration if duration else None,
        input_tokens_per_s=in_tokens / duration if duration else None,
        total_tokens_per_s=(out_tokens + in_tokens) / duration if duration else None,
        requests_per_s=len(ok) / duration if duration else None,
        started_at=_epoch(min(starts)) if starts else None,
        finished_at=_epoch(max(ends)) if ends else None,
        label="profile_export.jsonl",
        samples=samples,
    )
    return ImportedFile(
        tool=fmt, tool_version=None, model=None, engine=None, runs=[run], kind=FILE_KINDS[fmt]
    )


def _error_class(code: float | None) -> str:
    """infercost's error class (docs/figures.md) of an AIPerf error code."""
    if code is None:
        return "protocol"
    if 400 <= code < 500:
        return "http_4xx"
    if 500 <= code < 600:
        return "http_5xx"
    return "protocol"


def read_aiperf(body: bytes) -> ImportedFile:
    """AIPerf's profile_export_aiperf.json (one object) or profile_export.jsonl (records)."""
    documents = _json_documents("aiperf", body)
    first = documents[0]
    if isinstance(first, dict) and "metadata" in first and "metrics" in first:
        return _aiperf_records(documents)
    if len(documents) != 1 or not isinstance(first, dict):
        raise UnreadableResult(
            "aiperf",
            "it is neither one JSON object (profile_export_aiperf.json) nor JSON "
            "lines of request records (profile_export.jsonl)",
        )
    return _aiperf_summary(first)


READERS = {"vllm": read_vllm, "guidellm": read_guidellm, "aiperf": read_aiperf}


#: The largest count a run or a request stores (a 32-bit integer column).
MAX_COUNT = 2**31 - 1
#: Longest model name an endpoint keeps.
MAX_MODEL = 256


def _checked(fmt: ImportFormat, result: ImportedFile) -> ImportedFile:
    """`result` when every count and name fits what a run stores, else UnreadableResult."""
    if result.model is not None and len(result.model) > MAX_MODEL:
        raise UnreadableResult(fmt, f"its model name is over {MAX_MODEL} characters")
    for number, run in enumerate(result.runs, start=1):
        counts = {
            "requests": run.requests_total,
            "successful requests": run.requests_succeeded,
            "failed requests": run.requests_failed,
            **{f"errors of {kind}": count for kind, count in run.errors.items()},
        }
        for what, count in counts.items():
            if not 0 <= count <= MAX_COUNT:
                raise UnreadableResult(fmt, f"benchmark {number}: {count} {what} is not a count")
        if not math.isfinite(run.level) or run.level < 0:
            raise UnreadableResult(fmt, f"benchmark {number}: its load level is not a number")
        for seq, sample in enumerate(run.samples, start=1):
            for what, value in (("input", sample.n_in), ("output", sample.n_out)):
                if value is not None and not 0 <= value <= MAX_COUNT:
                    raise UnreadableResult(
                        fmt, f"request {seq}: {value} {what} tokens is not a count of tokens"
                    )
    return result


def read_result(fmt: ImportFormat, body: bytes) -> ImportedFile:
    """The file `body` in format `fmt`, or UnreadableResult saying what is wrong."""
    return _checked(fmt, READERS[fmt](body))


def iter_runs(result: ImportedFile) -> Iterator[tuple[int, ImportedRun]]:
    """The file's runs with their level index, in file order."""
    yield from enumerate(result.runs)
