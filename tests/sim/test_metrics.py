"""GET /metrics of the simulator, from its own prometheus_client registry: every engine's
families with values computed by hand from a known state, counters named as the engines
name them, and no series leaking into prometheus_client's global registry."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from sim.app import SimApp
from sim.config import MetricsFlavor, SimConfig
from sim.metrics import exposition

FLAVORS: tuple[MetricsFlavor, ...] = ("default", "llamacpp", "vllm", "vllm-v0", "sglang", "tgi")


def _app(flavor: MetricsFlavor) -> SimApp:
    app = SimApp(SimConfig(port=0, metrics=flavor, prefix_cache=True))
    m = app.metrics
    m.running, m.waiting = 3, 2
    m.prompt_tokens, m.cached_tokens, m.generation_tokens = 1000, 200, 500
    m.request_success, m.success_by_reason = 7, {"length": 4, "stop": 3}
    m.requests_total, m.running_max_tokens = 12, 77
    m.prompt_seconds, m.predicted_seconds = 1.25, 2.5
    m.n_decode, m.busy_slot_sum, m.n_tokens_max = 400, 900, 333
    assert app.prefix_cache is not None
    app.prefix_cache.queries_tokens, app.prefix_cache.hits_tokens = 800, 200
    return app


def _read(app: SimApp) -> dict[str, tuple[str, dict[tuple[tuple[str, str], ...], float]]]:
    """family -> (type, {labels: value}) as a scraper parses the app's exposition."""
    out = {}
    for fam in text_string_to_metric_families(exposition(app.registry).decode()):
        values = {tuple(sorted(s.labels.items())): s.value for s in fam.samples}
        out[fam.name] = (fam.type, values)
    return out


def _one(read: dict[str, tuple[str, dict[tuple[tuple[str, str], ...], float]]], name: str) -> float:
    (value,) = read[name][1].values()
    return value


def test_llamacpp_figures_are_the_state_divided_by_hand() -> None:
    read = _read(_app("llamacpp"))
    assert _one(read, "llamacpp:prompt_tokens") == 800  # 1000 prompt tokens, 200 cached
    assert _one(read, "llamacpp:prompt_tokens_seconds") == 800 / 1.25  # 640 tokens/s
    assert _one(read, "llamacpp:predicted_tokens_seconds") == 500 / 2.5  # 200 tokens/s
    assert _one(read, "llamacpp:n_busy_slots_per_decode") == 900 / 400
    assert (
        _one(read, "llamacpp:requests_processing"),
        _one(read, "llamacpp:requests_deferred"),
    ) == (3, 2)
    # Named as llama-server names it: a counter without _total stays a counter.
    assert read["llamacpp:n_tokens_max"] == ("counter", {(): 333.0})


def test_vllm_sglang_and_tgi_figures() -> None:
    vllm = _read(_app("vllm"))
    lab = (("engine", "0"), ("model_name", "sim-model"))
    assert vllm["vllm:request_success"] == (
        "counter",
        {
            (("engine", "0"), ("finished_reason", reason), ("model_name", "sim-model")): count
            for reason, count in (("length", 4.0), ("stop", 3.0))
        },
    )
    assert vllm["vllm:prefix_cache_hits"][1] == {lab: 200.0}
    v0 = _read(_app("vllm-v0"))
    assert _one(v0, "vllm:gpu_prefix_cache_hit_rate") == 200 / 800
    sglang = _read(_app("sglang"))
    assert _one(sglang, "sglang:cache_hit_rate") == 0.25
    assert _one(sglang, "sglang:cached_tokens") == 200
    tgi = _read(_app("tgi"))
    assert tgi["tgi_request_count"] == ("counter", {(): 12.0})
    assert _one(tgi, "tgi_batch_current_max_tokens") == 77


@pytest.mark.parametrize("flavor", FLAVORS)
def test_each_app_has_a_registry_of_its_own(flavor: MetricsFlavor) -> None:
    a, b = _app(flavor), SimApp(SimConfig(port=0, metrics=flavor))
    assert exposition(a.registry) != exposition(b.registry)  # b's counters are all 0
    exposed = {s.name for f in text_string_to_metric_families(exposition(a.registry).decode())
               for s in f.samples}  # fmt: skip
    global_names = {s.name for f in REGISTRY.collect() for s in f.samples}
    assert exposed and not exposed & global_names
