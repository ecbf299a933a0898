"""Telemetry: parse real exposition formats, map them to canonical figures, summarise over
a window (answers worked out by hand in comments), and scrape real loopback servers."""

from __future__ import annotations

import itertools
import math
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from infercost.telemetry import (
    CONTRACT_KEYS,
    METRIC_TABLE,
    Sample,
    Scraper,
    ScrapeResult,
    TelemetryError,
    lookup,
    parse_text,
    summarize,
)
from infercost.telemetry.scrape import _make_client
from tests.conftest import free_port
from tests.exporter import PROMETHEUS_FIXTURES as FIXTURES
from tests.exporter import Exporter, running_exporter

MIB = 1024 * 1024
DCGM = "http://dcgm:9400/metrics"
ENGINE = "http://engine:8000/metrics"


def load(name: str, t: float = 0.0, url: str = "http://fixture/metrics") -> list[Sample]:
    return parse_text((FIXTURES / name).read_text(), url=url, t=t)


def canonical(samples: list[Sample]) -> dict[str, list[float]]:
    """Canonical figure -> its values in canonical units, in exposition order."""
    out: dict[str, list[float]] = {}
    for s in samples:
        spec = lookup(s.metric)
        if spec is not None:
            out.setdefault(spec.canonical, []).append(s.value * spec.scale)
    return out


def series(
    name: str, points: list[tuple[float, float]], url: str = DCGM, **labels: str
) -> list[Sample]:
    return [Sample(t, url, name, labels, v) for t, v in points]


def gpu(name: str, index: str, points: list[tuple[float, float]]) -> list[Sample]:
    return series(name, points, DCGM, gpu=index, UUID=f"GPU-{index}", Hostname="node-1")


# -- parsing and mapping -----------------------------------------------------------------


def test_vllm_v0_maps_to_canonical_figures() -> None:
    samples = load("vllm_v0.txt")
    assert canonical(samples) == {
        "requests_running": [12.0],
        "requests_waiting": [3.0],
        "kv_cache_usage": [0.4375],
        "prefix_cache_hit_rate": [0.21],
        "preemptions": [2.0],
        "prompt_tokens": [123456.0],
        "generation_tokens": [98765.0],
        "requests_succeeded": [350.0, 50.0],
    }
    names = {s.metric for s in samples}
    # Unknown metrics stay, raw; prometheus_client's _created bookkeeping does not.
    assert "python_gc_objects_collected_total" in names
    assert "vllm:time_to_first_token_seconds_bucket" in names
    assert not any(n.endswith("_created") for n in names)
    running = next(s for s in samples if s.metric == "vllm:num_requests_running")
    assert running.labels == {"model_name": "meta-llama/Llama-3.1-8B-Instruct"}


def test_vllm_v1_maps_renamed_gauges_and_prefix_counters() -> None:
    assert canonical(load("vllm_v1.txt")) == {
        "requests_running": [7.0, 5.0],
        "requests_waiting": [0.0, 2.0],
        "kv_cache_usage": [0.25, 0.75],
        "prefix_cache_queries": [10000.0, 6000.0],
        "prefix_cache_hits": [4000.0, 2000.0],
        "preemptions": [0.0, 1.0],
        "prompt_tokens": [52000.0, 48000.0],
        "generation_tokens": [30500.0, 29500.0],
        "requests_succeeded": [190.0, 10.0, 0.0, 185.0, 15.0, 0.0],
    }


def test_sglang_maps_to_canonical_figures() -> None:
    assert canonical(load("sglang.txt")) == {
        "prompt_tokens": [8128902.0],
        "generation_tokens": [7557572.0],
        "kv_cache_usage": [0.28],
        "prefix_cache_hit_rate": [0.0075],
        "requests_running": [162.0],
        "requests_waiting": [2826.0],
    }


def test_tgi_counters_keep_their_names_and_map() -> None:
    samples = load("tgi.txt")
    assert canonical(samples) == {
        "requests_running": [4.0],
        "requests_waiting": [6.0],
        "requests_succeeded": [1000.0],
        "prompt_tokens": [312500.0],
        "generation_tokens": [128000.0],
    }
    # TGI writes counters without _total; the parser's added suffix is undone.
    names = {s.metric for s in samples}
    assert {"tgi_request_count", "tgi_request_success", "tgi_request_failure"} <= names
    assert "tgi_request_count_total" not in names


def test_dcgm_maps_units_per_gpu() -> None:
    samples = load("dcgm.txt")
    expected = {
        "power": [612.5, 587.25],  # W as published
        "energy": [8123456789.012, 8011111111.0],  # mJ / 1000
        "gpu_util": [0.87, 0.93],  # percent / 100
        "memory_free": [12345 * MIB, 13000 * MIB],
        "memory_used": [130000 * MIB, 129345 * MIB],  # MiB * 2**20
        "sm_active": [0.62, 0.70],
        "tensor_active": [0.31, 0.35],
        "dram_active": [0.78, 0.82],
    }
    got = canonical(samples)
    assert got.keys() == expected.keys()
    for figure, values in expected.items():
        assert got[figure] == pytest.approx(values), figure
    util = [s for s in samples if s.metric == "DCGM_FI_DEV_GPU_UTIL"]
    assert [s.labels["gpu"] for s in util] == ["0", "1"]
    assert {"UUID", "device", "modelName", "Hostname", "pci_bus_id"} <= set(util[0].labels)


def test_mapping_table_is_one_entry_per_source_with_documented_units() -> None:
    sources = [spec.source for spec in METRIC_TABLE]
    assert len(sources) == len(set(sources))
    units = {spec.canonical: spec.unit for spec in METRIC_TABLE}
    assert units["gpu_util"] == "fraction"
    assert units["kv_cache_usage"] == "fraction"
    assert units["memory_used"] == "bytes"
    assert units["power"] == "W"
    assert units["energy"] == "J"
    assert {spec.family for spec in METRIC_TABLE} == {"vllm", "sglang", "tgi", "llamacpp", "dcgm"}
    # A counter the parser reports with an added _total is still found.
    spec = lookup("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION_total")
    assert spec is not None
    assert spec.canonical == "energy"
    assert lookup("no_such_metric") is None


def test_parse_text_rejects_html_without_quoting_it() -> None:
    with pytest.raises(ValueError, match="not Prometheus text") as raised:
        parse_text("<html><body>Welcome to nginx!</body></html>")
    assert "nginx" not in str(raised.value)


# -- summary: time weighting -------------------------------------------------------------


def test_gauge_mean_is_weighted_by_time_not_by_sample_count() -> None:
    # 0 % from 0 to 9 s, then 100 % for the last second, read at uneven times: the
    # sample mean is (0 + 4 x 100) / 5 = 80 %, the time mean (9 x 0 + 1 x 1) / 10 = 0.1.
    samples = gpu(
        "DCGM_FI_DEV_GPU_UTIL", "0", [(0, 0), (9, 100), (9.25, 100), (9.5, 100), (9.75, 100)]
    )
    s = summarize(samples, 0.0, 10.0, output_tokens=100)
    assert s.gpu_util_mean == pytest.approx(0.1)
    # Utilisation was 0 for 90 % of the time, so the 95th percentile is the 100 % part.
    assert s.gpu_util_p95 == pytest.approx(1.0)
    assert s.per_gpu == {"0": pytest.approx(0.1)}


def test_p95_over_time_not_samples() -> None:
    # 1.0 for only 0.4 s of 10 (4 % of the time, but 4 of 5 samples): p95 is 0.
    samples = gpu(
        "DCGM_FI_DEV_GPU_UTIL", "0", [(0, 0), (9.6, 100), (9.7, 100), (9.8, 100), (9.9, 100)]
    )
    s = summarize(samples, 0.0, 10.0, output_tokens=None)
    assert s.gpu_util_p95 == 0.0
    assert s.gpu_util_mean == pytest.approx(0.04)


def test_gauges_are_clipped_to_the_window() -> None:
    # 50 % read at -5 s holds into the window until 100 % at 5 s; the reading at 11 s is
    # after the window. Mean over [0, 10] = (5 x 0.5 + 5 x 1.0) / 10 = 0.75.
    samples = gpu("DCGM_FI_DEV_GPU_UTIL", "0", [(-5, 50), (5, 100), (11, 0)])
    s = summarize(samples, 0.0, 10.0, output_tokens=None)
    assert s.gpu_util_mean == pytest.approx(0.75)


def test_per_gpu_means_then_averaged_or_summed() -> None:
    samples = [
        *gpu("DCGM_FI_DEV_GPU_UTIL", "0", [(0, 100), (5, 100)]),
        # GPU 1: idle for 5 s then busy: 0.5.
        *gpu("DCGM_FI_DEV_GPU_UTIL", "1", [(0, 0), (1, 0), (2, 0), (5, 100)]),
        *gpu("DCGM_FI_PROF_SM_ACTIVE", "0", [(0, 0.8)]),
        *gpu("DCGM_FI_PROF_SM_ACTIVE", "1", [(0, 0.4)]),
        *gpu("DCGM_FI_DEV_FB_USED", "0", [(0, 1000)]),
        *gpu("DCGM_FI_DEV_FB_USED", "1", [(0, 3000)]),
    ]
    s = summarize(samples, 0.0, 10.0, output_tokens=None, gpu_count_hint=2)
    assert s.per_gpu == {"0": pytest.approx(1.0), "1": pytest.approx(0.5)}
    assert s.gpu_util_mean == pytest.approx(0.75)  # (1.0 + 0.5) / 2
    assert s.sm_active_mean == pytest.approx(0.6)  # (0.8 + 0.4) / 2
    assert s.memory_used_bytes_mean == pytest.approx(4000 * MIB)  # summed
    assert s.gpu_count == 2
    assert s.errors == []


def test_energy_per_token_integrates_total_power() -> None:
    # GPU 0: 200 W for 4 s then 400 W for 6 s = 800 + 2400 = 3200 J.
    # GPU 1: 100 W for 10 s = 1000 J. Total 4200 J over 1400 tokens = 3.0 J/token.
    samples = [
        *gpu("DCGM_FI_DEV_POWER_USAGE", "0", [(0, 200), (2, 200), (4, 400), (7, 400)]),
        *gpu("DCGM_FI_DEV_POWER_USAGE", "1", [(0, 100)]),
    ]
    s = summarize(samples, 0.0, 10.0, output_tokens=1400)
    assert s.power_w_mean == pytest.approx(420.0)  # 320 + 100, summed across GPUs
    assert s.energy_j == pytest.approx(4200.0)
    assert s.energy_source == "power"
    assert s.energy_j_per_output_token == pytest.approx(3.0)


def test_energy_prefers_the_dcgm_counter_and_interpolates_the_edges() -> None:
    # Counter in mJ read at -1 s and 11 s: 12,000,000 mJ = 12,000 J in 12 s (1000 W), so
    # 10,000 J over [0, 10];
    # the power gauge (999 W) is not used for energy when the counter exists.
    samples = [
        *gpu("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "0", [(-1, 5_000_000), (11, 17_000_000)]),
        *gpu("DCGM_FI_DEV_POWER_USAGE", "0", [(0, 999)]),
    ]
    s = summarize(samples, 0.0, 10.0, output_tokens=2000)
    assert s.energy_source == "energy_counter"
    assert s.energy_j == pytest.approx(10_000.0)
    assert s.energy_j_per_output_token == pytest.approx(5.0)
    assert s.power_w_mean == pytest.approx(999.0)


def test_power_from_energy_counter_when_no_power_gauge() -> None:
    samples = gpu(
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "0", [(0, 0), (5, 2_500_000), (10, 5_000_000)]
    )
    s = summarize(samples, 0.0, 10.0, output_tokens=None)
    assert s.energy_j == pytest.approx(5000.0)
    assert s.power_w_mean == pytest.approx(500.0)
    assert s.energy_j_per_output_token is None


def test_counter_reset_counts_as_restart_from_zero() -> None:
    # 100 -> 600 (+500), restart -> 50 (+50), 50 -> 450 (+400): 950 tokens.
    samples = series(
        "vllm:prompt_tokens_total", [(0, 100), (5, 600), (6, 50), (10, 450)], ENGINE, model_name="m"
    )
    s = summarize(samples, 0.0, 10.0, output_tokens=None)
    assert s.prompt_tokens == pytest.approx(950.0)


def test_prefix_hit_rate_from_v1_counters_across_engines() -> None:
    # Queries: +2000 and +1000 = 3000; hits: +1000 and +500 = 1500; rate 0.5.
    samples = [
        *series("vllm:prefix_cache_queries_total", [(0, 1000), (10, 3000)], ENGINE, engine="0"),
        *series("vllm:prefix_cache_queries_total", [(0, 500), (10, 1500)], ENGINE, engine="1"),
        *series("vllm:prefix_cache_hits_total", [(0, 100), (10, 1100)], ENGINE, engine="0"),
        *series("vllm:prefix_cache_hits_total", [(0, 0), (10, 500)], ENGINE, engine="1"),
    ]
    s = summarize(samples, 0.0, 10.0, output_tokens=None)
    assert s.prefix_cache_hit_rate == pytest.approx(0.5)


def test_prefix_hit_rate_without_queries_is_none_and_gauge_is_time_averaged() -> None:
    idle = [
        *series("vllm:prefix_cache_queries_total", [(0, 10), (10, 10)], ENGINE),
        *series("vllm:prefix_cache_hits_total", [(0, 5), (10, 5)], ENGINE),
    ]
    assert summarize(idle, 0.0, 10.0, output_tokens=None).prefix_cache_hit_rate is None
    # SGLang's gauge: 0.2 for 5 s then 0.6 for 5 s = 0.4.
    gauge = series("sglang:cache_hit_rate", [(0, 0.2), (5, 0.6)], ENGINE, model_name="m")
    assert summarize(gauge, 0.0, 10.0, output_tokens=None).prefix_cache_hit_rate == pytest.approx(
        0.4
    )


def test_running_and_waiting_sum_across_engine_series() -> None:
    # Running: model a 4 throughout, model b 2 then 6 at 5 s: 6 then 10, mean 8, max 10.
    # Waiting: a 0 then 3 at 8 s, b 1 throughout: max 4; mean (8 x 1 + 2 x 4) / 10 = 1.6.
    samples = [
        *series("vllm:num_requests_running", [(0, 4)], ENGINE, model_name="a"),
        *series("vllm:num_requests_running", [(0, 2), (5, 6)], ENGINE, model_name="b"),
        *series("vllm:num_requests_waiting", [(0, 0), (8, 3)], ENGINE, model_name="a"),
        *series("vllm:num_requests_waiting", [(0, 1)], ENGINE, model_name="b"),
    ]
    s = summarize(samples, 0.0, 10.0, output_tokens=None)
    assert s.requests_running_mean == pytest.approx(8.0)
    assert s.requests_running_max == 10.0
    assert s.requests_waiting_max == 4.0
    assert s.requests_waiting_mean == pytest.approx(1.6)


def test_kv_cache_uses_one_name_per_endpoint_and_max_is_the_fullest_engine() -> None:
    # A vLLM showing both the v1 name and the deprecated v0 one: only the v1 series count.
    samples = [
        *series("vllm:kv_cache_usage_perc", [(0, 0.2), (5, 0.4)], ENGINE, engine="0"),
        *series("vllm:kv_cache_usage_perc", [(0, 0.6)], ENGINE, engine="1"),
        *series("vllm:gpu_cache_usage_perc", [(0, 0.99)], ENGINE, engine="0"),
    ]
    s = summarize(samples, 0.0, 10.0, output_tokens=None)
    # Engine mean: 0.4 for 5 s, 0.5 for 5 s = 0.45; fullest engine 0.6.
    assert s.kv_cache_usage_mean == pytest.approx(0.45)
    assert s.kv_cache_usage_max == pytest.approx(0.6)


def test_fixture_snapshots_summarise_end_to_end() -> None:
    # The same vLLM v1 page read at 0 s and 10 s with counters advanced.
    later = (FIXTURES / "vllm_v1.txt").read_text()
    later = later.replace(
        'queries_total{engine="0",model_name="Qwen/Qwen3-8B"} 10000.0',
        'queries_total{engine="0",model_name="Qwen/Qwen3-8B"} 14000.0',
    )
    later = later.replace('hits_total{engine="0",model_name="Qwen/Qwen3-8B"} 4000.0',
                          'hits_total{engine="0",model_name="Qwen/Qwen3-8B"} 7000.0')  # fmt: skip
    samples = [
        *load("vllm_v1.txt", t=0.0, url=ENGINE),
        *parse_text(later, url=ENGINE, t=10.0),
        *load("dcgm.txt", t=0.0, url=DCGM),
        *load("dcgm.txt", t=10.0, url=DCGM),
    ]
    s = summarize(samples, 0.0, 10.0, output_tokens=1000, gpu_count_hint=2)
    assert s.prefix_cache_hit_rate == pytest.approx(3000 / 4000)
    assert s.requests_running_mean == pytest.approx(12.0)  # 7 + 5
    assert s.requests_waiting_max == pytest.approx(2.0)
    assert s.kv_cache_usage_mean == pytest.approx(0.5)
    assert s.kv_cache_usage_max == pytest.approx(0.75)
    assert s.gpu_util_mean == pytest.approx(0.90)  # (0.87 + 0.93) / 2
    # The fixture's energy counter does not advance, so energy is 0 J: measured, not missing.
    assert s.energy_source == "energy_counter"
    assert s.energy_j == 0.0
    assert s.power_w_mean == pytest.approx(612.5 + 587.25)
    assert s.sources == ["dcgm", "vllm"]
    assert "vllm:time_to_first_token_seconds_bucket" in s.unmapped
    assert s.errors == []


# -- summary: missing data and notes ---------------------------------------------------


def test_missing_data_is_none_never_zero() -> None:
    s = summarize([], 0.0, 10.0, output_tokens=1000)
    contract = s.contract()
    assert list(contract) == list(CONTRACT_KEYS)
    assert contract == {**dict.fromkeys(CONTRACT_KEYS), "errors": []}
    assert s.per_gpu == {}
    assert s.gpu_count is None

    engine_only = series("vllm:num_requests_running", [(0, 3)], ENGINE)
    s = summarize(engine_only, 0.0, 10.0, output_tokens=1000)
    assert s.requests_running_mean == 3.0
    assert s.gpu_util_mean is None
    assert s.power_w_mean is None
    assert s.energy_j_per_output_token is None
    assert s.kv_cache_usage_mean is None
    assert s.prefix_cache_hit_rate is None
    # One counter reading cannot give an increase.
    one = series("vllm:generation_tokens_total", [(5, 100)], ENGINE)
    assert summarize(one, 0.0, 10.0, output_tokens=None).generation_tokens is None


def test_no_output_tokens_means_no_energy_per_token() -> None:
    samples = gpu("DCGM_FI_DEV_POWER_USAGE", "0", [(0, 300)])
    s = summarize(samples, 0.0, 10.0, output_tokens=0)
    assert s.energy_j == pytest.approx(3000.0)
    assert s.energy_j_per_output_token is None


def test_non_finite_values_are_ignored() -> None:
    samples = gpu("DCGM_FI_DEV_GPU_UTIL", "0", [(0, 50), (5, math.nan)])
    assert summarize(samples, 0.0, 10.0, output_tokens=None).gpu_util_mean == pytest.approx(0.5)


def test_notes_for_scrape_errors_gpu_count_and_unknown_sources() -> None:
    samples = [
        *gpu("DCGM_FI_DEV_GPU_UTIL", "0", [(0, 10)]),
        *gpu("DCGM_FI_DEV_GPU_UTIL", "1", [(0, 10)]),
        *series("mystery_queue_depth", [(0, 1)], "http://other:9000/metrics"),
    ]
    error = TelemetryError("http://down:1/metrics", 1.0, "connection refused", 3, 2.0)
    s = summarize(samples, 0.0, 10.0, output_tokens=None, gpu_count_hint=1, errors=[error])
    assert s.errors[0] == "telemetry from http://down:1/metrics: connection refused (3 times)"
    assert any("reported 2 GPUs but the endpoint declares 1" in e for e in s.errors)
    assert any(
        e.startswith("telemetry from http://other:9000/metrics: none of its 1 metrics")
        for e in s.errors
    )
    assert s.unmapped == ["mystery_queue_depth"]


def test_readings_only_after_the_window_are_no_data() -> None:
    s = summarize(gpu("DCGM_FI_DEV_GPU_UTIL", "0", [(11, 10)]), 0.0, 10.0, output_tokens=10)
    assert s.gpu_util_mean is None
    assert s.gpu_count is None
    assert s.errors == ["telemetry was only read after the measured window had ended"]


def test_empty_window_is_reported_not_raised() -> None:
    s = summarize(gpu("DCGM_FI_DEV_GPU_UTIL", "0", [(0, 10)]), 5.0, 5.0, output_tokens=10)
    assert s.gpu_util_mean is None
    assert s.errors == ["the measured window is empty, so there is no telemetry to summarise"]


# -- the scraper against real loopback servers -------------------------------------------


@pytest.fixture(scope="module")
def exporter() -> Iterator[Exporter]:
    with running_exporter() as server:
        yield server


def scrape_once(url: str, timeout_s: float) -> ScrapeResult:
    """One scrape of one URL in the calling thread: its samples, or one error."""
    scraper = Scraper([url], timeout_s=timeout_s)
    with _make_client(timeout_s) as client:
        scraper._client = client
        scraper._scrape_once(url)
    return scraper._snapshot()


class Ticks:
    """A clock that moves 10 ms each time anyone reads it, and only then (thread-safe)."""

    def __init__(self) -> None:
        self._n = itertools.count()
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            return next(self._n) * 0.01


def wait_for(scraper: Scraper, done: Callable[[ScrapeResult], bool], timeout: float = 60) -> None:
    """Wait until what `scraper` has collected so far satisfies `done`, however slowly a
    loaded machine runs its threads (a generous timeout only catches a hang)."""
    deadline = time.monotonic() + timeout
    while True:
        with scraper._lock:
            so_far = scraper._snapshot()
        if done(so_far):
            return
        assert time.monotonic() < deadline, so_far
        time.sleep(0.01)


def test_scraper_collects_good_samples_and_one_collapsed_error_per_bad_url(
    exporter: Exporter,
) -> None:
    good = exporter.base + "/metrics"
    refused = f"http://127.0.0.1:{free_port()}/metrics"  # nothing listens there
    hanging = exporter.base + "/hang"
    garbage = exporter.base + "/html"
    scraper = Scraper([good, refused, hanging, garbage], interval_s=0.05, timeout_s=0.3)
    t_start = time.perf_counter()
    scraper.start()
    # Until every bad URL has failed twice (the hanging one times out after 0.3 s each
    # time) and the good one answered three times: a state, not a duration.
    wait_for(
        scraper,
        lambda r: (
            r.scrapes[good] >= 3
            and len(r.errors) == 3
            and all(e.occurrences >= 2 for e in r.errors)
        ),
    )
    t_stop = time.perf_counter()
    result = scraper.stop()

    assert {s.url for s in result.samples} == {good}
    times = sorted({s.t for s in result.samples})
    assert t_start < times[0]
    assert times[-1] > t_stop  # the final scrape, made by stop()
    assert len(times) == result.scrapes[good] >= 3
    assert canonical([s for s in result.samples if s.t == times[0]])["requests_running"] == [
        7.0,
        5.0,
    ]

    by_url = {e.url: e for e in result.errors}
    assert len(result.errors) == 3, result.errors
    assert by_url[refused].reason == "connection refused"
    assert by_url[hanging].reason == "timed out after 0.3 s"
    assert by_url[garbage].reason == "answered something that is not Prometheus text (text/html)"
    for error in result.errors:
        assert error.occurrences >= 2  # repeats collapsed into one entry
        assert error.t_last is not None
        assert error.t <= error.t_last
    # The hanging exporter has a thread of its own: it never held up the good one.
    assert result.scrapes[good] > by_url[hanging].occurrences
    assert result.scrapes[refused] == result.scrapes[hanging] == result.scrapes[garbage] == 0
    assert "vllm:time_to_first_token_seconds_bucket" in result.unmapped
    assert scraper.stop() is result


def test_http_errors_name_the_status(exporter: Exporter) -> None:
    with Scraper(
        [exporter.base + "/boom", exporter.base + "/nope"], interval_s=0.05, timeout_s=1.0
    ) as scraper:
        # Until each URL has failed on the cadence twice (a state, not a duration), so the
        # repeats are seen to collapse into one error each.
        wait_for(
            scraper, lambda r: len(r.errors) == 2 and all(e.occurrences >= 2 for e in r.errors)
        )
    assert scraper.result is not None
    reasons = {e.url.rsplit("/", 1)[1]: e.reason for e in scraper.result.errors}
    assert reasons == {
        "boom": "HTTP 500",
        "nope": "HTTP 404: nothing at this path; check the metrics URL",
    }
    assert scraper.result.samples == []


def test_scrape_time_is_the_midpoint_of_request_and_response(exporter: Exporter) -> None:
    # A clock that ticks once per reading: sent at n, headers at n + 1, so t = n + 0.5.
    ticks = itertools.count()
    scraper = Scraper(
        [exporter.base + "/metrics"], interval_s=0.05, clock=lambda: float(next(ticks))
    )
    scraper.start()
    # Two scrapes on the cadence (a state, not a duration), then the final one at stop.
    wait_for(scraper, lambda r: sum(r.scrapes.values()) >= 2)
    result = scraper.stop()
    times = sorted({s.t for s in result.samples})
    assert len(times) >= 3
    assert times[0] == 0.5
    assert all(t % 2 == 0.5 for t in times)


def test_scraper_keeps_only_known_metrics(exporter: Exporter) -> None:
    with Scraper([exporter.base + "/metrics"], interval_s=1.0) as scraper:
        pass
    assert scraper.result is not None
    assert scraper.result.samples
    assert all(lookup(s.metric) is not None for s in scraper.result.samples)
    # The dropped names of a known family are listed, for a new engine version.
    assert "vllm:time_to_first_token_seconds_bucket" in scraper.result.unmapped
    assert not any(n.startswith("python_") for n in scraper.result.unmapped)


def test_known_series_past_the_bound_are_cut(exporter: Exporter) -> None:
    # The vLLM v1 page holds 22 known series (2 engines x 8 gauges and counters, and 3
    # finish reasons each for request_success); only the first 5 of each answer are kept.
    with Scraper([exporter.base + "/metrics"], interval_s=1.0, max_series=5) as scraper:
        pass
    result = scraper.result
    assert result is not None
    per_scrape = {
        t: sum(1 for s in result.samples if s.t == t) for t in {s.t for s in result.samples}
    }
    assert set(per_scrape.values()) == {5}
    assert any("more than 5 series of known metrics" in e.reason for e in result.errors)


def test_scrape_once(exporter: Exporter) -> None:
    closed_port = free_port()
    ok = scrape_once(exporter.base + "/metrics", timeout_s=1.0)
    assert ok.errors == []
    assert ok.scrapes == {exporter.base + "/metrics": 1}
    assert canonical(ok.samples)["kv_cache_usage"] == [0.25, 0.75]
    down = scrape_once(f"http://127.0.0.1:{closed_port}/metrics", timeout_s=1.0)
    assert [str(e) for e in down.errors] == [
        f"telemetry from http://127.0.0.1:{closed_port}/metrics: connection refused"
    ]


def test_scraped_energy_summarises_to_the_exporters_power() -> None:
    # The exporter and the scraper read one clock that moves only when read. One URL, one
    # thread: each scrape reads it when sending, the exporter when answering, the scraper
    # again at the headers, so every sample's midpoint stamp is the exporter's own reading,
    # however slowly a loaded machine runs the threads.
    ticks = Ticks()
    with running_exporter(clock=ticks) as exporter:
        scraper = Scraper([exporter.base + "/power"], interval_s=0.01, timeout_s=5.0, clock=ticks)
        scraper.start()
        wait_for(scraper, lambda r: sum(r.scrapes.values()) >= 6)
        result = scraper.stop()
    times = sorted({s.t for s in result.samples})
    # A window between readings, so both edges are interpolated.
    window_start, window_end = (times[1] + times[2]) / 2, (times[-3] + times[-2]) / 2
    s = summarize(result.samples, window_start, window_end, output_tokens=100, errors=result.errors)
    assert s.errors == []
    assert s.energy_source == "energy_counter"
    # 500 W over the window, from the counter, and shared among the 100 output tokens.
    joules = 500.0 * (window_end - window_start)
    assert joules >= 500.0 * 0.02  # the window spans at least two clock readings
    assert s.energy_j == pytest.approx(joules, rel=1e-6)
    assert s.power_w_mean == 500.0
    assert s.energy_j_per_output_token == pytest.approx(joules / 100, rel=1e-6)
