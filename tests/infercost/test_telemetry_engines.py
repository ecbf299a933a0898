"""Telemetry of every engine: llama.cpp's captured page maps to canonical figures, and
scrapes of engine counters summarise to rates, cached shares, busy slots and a queueing
note, each worked out by hand in the comments."""

from __future__ import annotations

import pytest

from infercost.telemetry import Sample, lookup, parse_text, summarize
from tests.exporter import PROMETHEUS_FIXTURES as FIXTURES

LLAMA = "http://llama:8080/metrics"
VLLM = "http://vllm:8000/metrics"


def canonical(samples: list[Sample]) -> dict[str, list[float]]:
    """Canonical figure -> its values in canonical units, in exposition order."""
    out: dict[str, list[float]] = {}
    for s in samples:
        spec = lookup(s.metric)
        if spec is not None:
            out.setdefault(spec.canonical, []).append(s.value * spec.scale)
    return out


def llama_page(**values: float | str) -> str:
    """The captured llama-server page with some values replaced (name without prefix)."""
    lines = []
    for line in (FIXTURES / "llamacpp.prom").read_text().splitlines():
        name = line.split(" ", 1)[0].removeprefix("llamacpp:")
        replaced = not line.startswith("#") and name in values
        lines.append(f"llamacpp:{name} {values[name]}" if replaced else line)
    return "\n".join(lines) + "\n"


def series(name: str, points: list[tuple[float, float]], url: str, **labels: str) -> list[Sample]:
    return [Sample(t, url, name, labels, v) for t, v in points]


def test_llamacpp_fixture_maps_to_canonical_figures() -> None:
    samples = parse_text((FIXTURES / "llamacpp.prom").read_text(), url=LLAMA)
    # The values as captured from llama-server (tests/fixtures/prometheus/llamacpp.prom).
    assert canonical(samples) == {
        "prompt_tokens_computed": [28.0],
        "prompt_tokens_cached": [13.0],
        "prompt_seconds": [0.046548],
        "generation_tokens": [23.0],
        "generation_seconds": [0.114097],
        "decode_calls": [23.0],
        "requests_running": [0.0],
        "requests_waiting": [0.0],
        "busy_slots_per_decode": [1.0],
    }
    not_mapped = {s.metric for s in samples if lookup(s.metric) is None}
    # A maximum typed as a counter, speculative decoding, the server's own averages.
    assert not_mapped == {
        "llamacpp:n_tokens_max",
        "llamacpp:spec_decode_num_draft_tokens_total",
        "llamacpp:spec_decode_num_accepted_tokens_total",
        "llamacpp:spec_decode_num_drafts_total",
        "llamacpp:prompt_tokens_seconds",
        "llamacpp:predicted_tokens_seconds",
    }


def test_llamacpp_older_builds_kv_cache_gauges_map() -> None:
    old = (
        "# TYPE llamacpp:kv_cache_usage_ratio gauge\nllamacpp:kv_cache_usage_ratio 0.25\n"
        "# TYPE llamacpp:kv_cache_tokens gauge\nllamacpp:kv_cache_tokens 2048\n"
    )
    assert canonical(parse_text(old)) == {"kv_cache_usage": [0.25], "kv_cache_tokens": [2048.0]}
    s = summarize(
        [*parse_text(old, LLAMA, 0.0), *parse_text(old, LLAMA, 1.0)], 0.0, 1.0, output_tokens=None
    )
    assert s.kv_cache_usage_mean == 0.25
    assert s.kv_cache_tokens_mean == 2048.0


def llama_scrapes() -> list[Sample]:
    """Three scrapes of one llama-server, 1 s apart.

    | t | prompt | cached | predicted | n_decode | busy/decode (6 digits) | processing | deferred |
    | 0 | 28     | 13     | 23        | 23       | 1                      | 0          | 0        |
    | 1 | 228    | 113    | 73        | 73       | 173/73 = 2.36986       | 4          | 8        |
    | 2 | 428    | 313    | 123       | 123      | 273/123 = 2.21951      | 4          | 2        |

    Busy-slot-decodes: 23, then +3 per decode for 50 decodes (173), then +2 per decode for
    50 more (273); the server prints only the running mean, to six digits.
    """
    pages = [
        llama_page(),
        llama_page(
            prompt_tokens_total=228,
            prompt_tokens_cached_total=113,
            tokens_predicted_total=73,
            n_decode_total=73,
            n_busy_slots_per_decode="2.36986",
            requests_processing=4,
            requests_deferred=8,
            prompt_seconds_total=0.296548,
            tokens_predicted_seconds_total=0.614097,
        ),
        llama_page(
            prompt_tokens_total=428,
            prompt_tokens_cached_total=313,
            tokens_predicted_total=123,
            n_decode_total=123,
            n_busy_slots_per_decode="2.21951",
            requests_processing=4,
            requests_deferred=2,
            prompt_seconds_total=0.546548,
            tokens_predicted_seconds_total=1.114097,
        ),
    ]
    return [s for t, page in enumerate(pages) for s in parse_text(page, LLAMA, float(t))]


def test_llamacpp_counters_become_rates_over_the_window() -> None:
    s = summarize(llama_scrapes(), 0.0, 2.0, output_tokens=100)
    # Computed prompt tokens 428 - 28 = 400, cached 313 - 13 = 300: 700 prompt tokens in
    # 2 s = 350 per s; generated 123 - 23 = 100 in 2 s = 50 per s.
    assert s.prompt_tokens_computed == pytest.approx(400.0)
    assert s.prompt_tokens_cached == pytest.approx(300.0)
    assert s.prompt_tokens == pytest.approx(700.0)
    assert s.prompt_tokens_per_s == pytest.approx(350.0)
    assert s.generation_tokens == pytest.approx(100.0)
    assert s.generation_tokens_per_s == pytest.approx(50.0)
    # 300 of 700 prompt tokens came from the cache: 3/7, which is also the hit rate.
    assert s.prompt_tokens_cached_share == pytest.approx(3 / 7)
    assert s.prefix_cache_hit_rate == pytest.approx(3 / 7)
    assert s.prompt_seconds == pytest.approx(0.5)
    assert s.generation_seconds == pytest.approx(1.0)
    # (273 - 23) busy-slot-decodes over 100 decodes = 2.5, up to the six printed digits.
    assert s.busy_slots_per_decode == pytest.approx(2.5, rel=1e-4)
    assert s.sources == ["llamacpp"]
    assert s.gpu_util_mean is None


def test_llamacpp_queueing_is_a_note() -> None:
    s = summarize(llama_scrapes(), 0.0, 2.0, output_tokens=100)
    # Processing 0 for 1 s then 4: mean 2, max 4. Deferred 0 for 1 s, then 8 (2 arrives at
    # the window's end): mean (0 x 1 + 8 x 1) / 2 = 4, max 8.
    assert s.requests_running_mean == pytest.approx(2.0)
    assert s.requests_running_max == 4.0
    assert s.requests_waiting_mean == pytest.approx(4.0)
    assert s.requests_waiting_max == 8.0
    assert s.notes == [
        "requests queued in front of the engine: up to 8 waited for a free slot (mean 4, "
        "beside up to 4 running); latency includes that wait, so the engine was saturated "
        "at this load"
    ]
    assert s.errors == []
    assert s.contract()["requests_waiting_max"] == 8.0
    assert "notes" in s.as_dict()


def test_no_queue_no_note() -> None:
    page = llama_page()
    s = summarize(
        [*parse_text(page, LLAMA, 0.0), *parse_text(page, LLAMA, 1.0)],
        0.0,
        1.0,
        output_tokens=None,
    )
    assert s.requests_waiting_max == 0.0
    assert s.notes == []
    # Nothing advanced: zero tokens measured, a share of nothing is unknown.
    assert s.prompt_tokens == 0.0
    assert s.prompt_tokens_cached_share is None
    assert s.busy_slots_per_decode is None  # no decode call in the window


def test_llamacpp_without_the_cached_counter_has_no_prompt_total() -> None:
    # Builds before mid-2026: prompt_tokens_total leaves cached tokens out and nothing
    # counts them, so the prompt total is unknown; what was computed is known.
    samples = [
        *series("llamacpp:prompt_tokens_total", [(0, 100), (10, 600)], LLAMA),
        *series("llamacpp:tokens_predicted_total", [(0, 0), (10, 250)], LLAMA),
    ]
    s = summarize(samples, 0.0, 10.0, output_tokens=None)
    assert s.prompt_tokens is None
    assert s.prompt_tokens_per_s is None
    assert s.prompt_tokens_computed == pytest.approx(500.0)
    assert s.generation_tokens_per_s == pytest.approx(25.0)
    assert s.prefix_cache_hit_rate is None


def test_vllm_cached_prompt_tokens_from_the_cached_counter() -> None:
    # vLLM counts every prompt token (cached ones included): 1000 -> 3000 is 2000 prompt
    # tokens, 500 of them cached (0 -> 500): share 0.25, computed 1500.
    samples = [
        *series("vllm:prompt_tokens_total", [(0, 1000), (10, 3000)], VLLM, model_name="m"),
        *series("vllm:prompt_tokens_cached_total", [(0, 0), (10, 500)], VLLM, model_name="m"),
        *series("vllm:prefix_cache_queries_total", [(0, 0), (10, 2400)], VLLM, model_name="m"),
        *series("vllm:prefix_cache_hits_total", [(0, 0), (10, 600)], VLLM, model_name="m"),
    ]
    s = summarize(samples, 0.0, 10.0, output_tokens=None)
    assert s.prompt_tokens == pytest.approx(2000.0)
    assert s.prompt_tokens_per_s == pytest.approx(200.0)
    assert s.prompt_tokens_cached == pytest.approx(500.0)
    assert s.prompt_tokens_computed == pytest.approx(1500.0)
    assert s.prompt_tokens_cached_share == pytest.approx(0.25)
    # The hit rate stays the hits / queries counters' ratio: 600 / 2400.
    assert s.prefix_cache_hit_rate == pytest.approx(0.25)


def test_older_vllm_cached_tokens_from_prefix_cache_hits() -> None:
    # No prompt_tokens_cached counter: the prefix-cache hits (tokens) stand in: 300 of 1200.
    samples = [
        *series("vllm:prompt_tokens_total", [(0, 0), (4, 1200)], VLLM, model_name="m"),
        *series("vllm:prefix_cache_queries_total", [(0, 0), (4, 1200)], VLLM, model_name="m"),
        *series("vllm:prefix_cache_hits_total", [(0, 0), (4, 300)], VLLM, model_name="m"),
    ]
    s = summarize(samples, 0.0, 4.0, output_tokens=None)
    assert s.prompt_tokens_cached == pytest.approx(300.0)
    assert s.prompt_tokens_cached_share == pytest.approx(0.25)


def test_sglang_cached_tokens_sum_over_cache_sources() -> None:
    page0 = (
        "# TYPE sglang:prompt_tokens_total counter\n"
        'sglang:prompt_tokens_total{model_name="m"} 1000\n'
        "# TYPE sglang:cached_tokens_total counter\n"
        'sglang:cached_tokens_total{model_name="m",cache_source="device"} 100\n'
        'sglang:cached_tokens_total{model_name="m",cache_source="host"} 0\n'
        "# TYPE sglang:num_queue_reqs gauge\n"
        'sglang:num_queue_reqs{model_name="m"} 0\n'
    )
    page1 = (
        page0.replace("} 1000", "} 2000")
        .replace('"device"} 100', '"device"} 400')
        .replace('"host"} 0', '"host"} 100')
    )
    s = summarize(
        [
            *parse_text(page0, "http://sg/metrics", 0.0),
            *parse_text(page1, "http://sg/metrics", 2.0),
        ],
        0.0,
        2.0,
        output_tokens=None,
    )
    # 1000 prompt tokens, 300 + 100 cached: share 0.4. Nothing queued: no note.
    assert s.prompt_tokens == pytest.approx(1000.0)
    assert s.prompt_tokens_cached == pytest.approx(400.0)
    assert s.prompt_tokens_cached_share == pytest.approx(0.4)
    assert s.notes == []


def test_vllm_queue_note_names_the_engine_queue() -> None:
    samples = [
        *series("vllm:num_requests_running", [(0, 16)], VLLM, model_name="m"),
        *series("vllm:num_requests_waiting", [(0, 0), (5, 3)], VLLM, model_name="m"),
    ]
    s = summarize(samples, 0.0, 10.0, output_tokens=None)
    # Waiting 0 for 5 s then 3 for 5 s: mean 1.5, max 3.
    assert s.notes == [
        "requests queued in front of the engine: up to 3 waited in the engine's queue "
        "(mean 1.5, beside up to 16 running); latency includes that wait, so the engine was "
        "saturated at this load"
    ]
