"""Reading other tools' result files (infercost.imports.parse) where the real examples in
tests/fixtures/imports do not reach: vLLM's per-request arrays (--save-detailed), a
concurrency level, and files that are not what their format says. Expected values are worked
out by hand from the small results written here."""

from __future__ import annotations

import json

import pytest

from infercost.imports.parse import UnreadableResult, definitions_of, read_result


def test_vllm_detailed_arrays_become_samples() -> None:
    result = {
        "backend": "openai-chat",
        "model_id": "m",
        "max_concurrency": 2,
        "request_rate": "inf",
        "completed": 1,
        "failed": 1,
        "duration": 0.5,
        "total_input_tokens": 22,
        "input_lens": [10, 12],
        "output_lens": [3, 0],
        "ttfts": [0.05, 0.0],
        "itls": [[0.01, 0.02], []],
        "errors": ["", "timeout after 600 s"],
        "start_times": [100.0, 100.25],
        "mean_ttft_ms": 50.0,
    }
    read = read_result("vllm", json.dumps(result).encode())
    assert read.engine is None and read.model == "m"
    (run,) = read.runs
    assert (run.mode, run.level) == ("concurrency", 2.0)
    assert (run.requests_total, run.requests_succeeded, run.requests_failed) == (2, 1, 1)
    assert run.stats["ttft_ms"]["mean"] == 50.0 and run.stats["ttft_ms"]["count"] == 1
    assert run.input_tokens_per_s == pytest.approx(22 / 0.5)
    ok, failed = run.samples
    # First content at 50 ms, then 10 ms and 20 ms later.
    assert ok.chunk_times_ms == pytest.approx([50.0, 60.0, 80.0])
    assert (ok.t_send, ok.n_in, ok.n_out, ok.error) == (0.0, 10, 3, None)
    assert failed.t_send == pytest.approx(0.25)
    assert (failed.ttft_ms, failed.n_out, failed.chunk_times_ms) == (None, 0, [])
    assert failed.error == "timeout after 600 s" and failed.error_class == "protocol"
    assert read.source(run)["per_request"] is True


def test_vllm_arrays_of_different_lengths_are_refused() -> None:
    result = {"completed": 2, "duration": 1.0, "ttfts": [0.1, 0.2], "output_lens": [3]}
    with pytest.raises(UnreadableResult, match="`output_lens` has 1 entries, `ttfts` has 2"):
        read_result("vllm", json.dumps(result).encode())


@pytest.mark.parametrize(
    ("fmt", "body", "says"),
    [
        ("vllm", b"\xff\xfe", "not UTF-8"),
        ("vllm", b"[1, 2]", "is not a JSON object"),
        ("guidellm", b'{"benchmarks": []}', "`benchmarks` list is empty"),
        ("guidellm", b'{"benchmarks": [{"metrics": {}}]}', "request_totals.successful"),
        ("aiperf", b'{"metadata": {}, "metrics": {}}', "request_start_ns"),
        ("aiperf", b"[1]\n[2]", "neither one JSON object"),
        ("vllm", b"[" * 100_000 + b"]" * 100_000, "nests deeper"),
        ("vllm", b'{"completed": -3, "duration": 1}', "-3 requests is not a count"),
        ("vllm", b'{"completed": 1e12, "duration": 1}', "is not a count"),
        (
            "vllm",
            b'{"completed": 1, "duration": 1, "ttfts": [0.1], "output_lens": [4294967296]}',
            "4294967296 output tokens is not a count of tokens",
        ),
        ("vllm", b'{"completed": 1, "duration": 1, "model_id": "' + b"m" * 300 + b'"}', "model"),
    ],
)
def test_files_that_are_not_their_format_say_why(fmt: str, body: bytes, says: str) -> None:
    with pytest.raises(UnreadableResult) as caught:
        read_result(fmt, body)  # type: ignore[arg-type]
    assert says in caught.value.detail
    assert caught.value.status_code == 422


def test_only_imported_fingerprints_name_a_tool() -> None:
    assert definitions_of("vllm-import") == "vllm"
    assert definitions_of("aiperf-import") == "aiperf"
    assert definitions_of("3f0c2a9b1d7e4c55") == "infercost"
    assert definitions_of(None) == "infercost"


def test_odd_but_harmless_shapes_are_read_not_failed_on() -> None:
    """Fields of an unexpected type where the figures do not need them, and times out of
    the calendar's range, are left out instead of failing the import."""
    guidellm = {
        "benchmarks": [
            {
                "start_time": 1e300,
                "metrics": {
                    "request_totals": {"successful": 3},
                    "time_to_first_token_ms": {
                        "successful": {"mean": 12.5, "count": 3, "percentiles": [1, 2]}
                    },
                },
            }
        ]
    }
    (run,) = read_result("guidellm", json.dumps(guidellm).encode()).runs
    assert run.stats["ttft_ms"]["mean"] == 12.5 and run.stats["ttft_ms"]["p50"] is None
    assert run.started_at is None and run.mode == "burst" and run.level == 3.0
    aiperf = {"request_count": {"avg": 5}, "error_summary": 7, "telemetry_data": {"endpoints": []}}
    (run,) = read_result("aiperf", json.dumps(aiperf).encode()).runs
    assert (run.requests_total, run.errors) == (5, {})
    vllm = {"completed": 2, "duration": 1e300, "date": "20250530-195922"}
    (run,) = read_result("vllm", json.dumps(vllm).encode()).runs
    assert run.started_at is None and run.finished_at is not None
