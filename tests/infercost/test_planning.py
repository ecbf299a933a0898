"""Cost planning against hand-computed figures (docs/figures.md: Cost, Physical limits)."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest

from infercost.errors import InvalidInput
from infercost.figures.cost import blended_per_million
from infercost.figures.metrics import SLO_METRICS
from infercost.hardware.catalog import PUBLIC_GPUS
from infercost.planning import (
    PRESETS,
    Deployment,
    Estimate,
    Evidence,
    Hardware,
    HostedApi,
    HostedEstimate,
    LevelResult,
    ModelFacts,
    NoEvidence,
    SelfHostedEstimate,
    Traffic,
    UnknownPreset,
    batch_step_time_bound_s,
    batch_throughput_bound_tokens_per_s,
    break_even,
    capacity_at_slo,
    decode_bound_tokens_per_s,
    get_preset,
    hosted_cost,
    peak_throughput_bound_tokens_per_s,
    plan,
    prefill_time_bound_s,
    project_capacity,
    replicas_for,
    roofline_bounds,
    self_hosted_cost,
    slo_margin,
)
from infercost.planning.presets import GOALS, SLO_PERCENTILES
from infercost.workload.synthetic import draw_lengths

GPUS = {g.name: g for g in PUBLIC_GPUS}
RUN = (Evidence("run-1", datetime(2026, 12, 1, tzinfo=UTC)),)


def deployment(
    name: str = "d", capacity_rps: float = 2.0, usd_per_hour: float = 10.0, **kw: Any
) -> Deployment:
    kw.setdefault("gpu_count", 1)
    return Deployment(name, capacity_rps, usd_per_hour, evidence=RUN, **kw)


# ---- cost at your traffic -------------------------------------------------------------


def test_worked_example_through_the_planner() -> None:
    # docs/figures.md: one H200 at USD 3.50/h producing 4,000 output tokens/s
    # -> 3.50 / (4,000 x 3,600) x 1e6 = USD 0.243 per million output tokens.
    # 40 requests/s of 100 output tokens each fill exactly one replica of capacity 40 rps.
    h200 = deployment("h200", capacity_rps=40.0, usd_per_hour=3.50, hardware="H200-SXM")
    est = self_hosted_cost(Traffic(requests_per_s=40.0, input_tokens=0, output_tokens=100), h200)
    assert est.replicas == 1
    assert est.utilization == 1.0
    assert est.usd_per_hour == 3.50
    assert round(est.per_million_output_tokens_usd, 3) == 0.243
    assert est.per_million_output_tokens_usd == pytest.approx(3.50 / (4000 * 3600) * 1e6)


def test_replicas_are_whole_and_utilisation_shows_idle_capacity() -> None:
    # 5 rps on replicas of 2 rps -> ceil(2.5) = 3 replicas of 2 GPUs at USD 7/h
    d = deployment(capacity_rps=2.0, usd_per_hour=7.0, gpu_count=2)
    est = self_hosted_cost(Traffic(requests_per_s=5.0, input_tokens=600, output_tokens=200), d)
    assert est.replicas == 3
    assert est.gpus == 6
    assert est.utilization == pytest.approx(5 / 6)
    assert est.headroom == pytest.approx(1 / 6)
    assert est.headroom_rps == pytest.approx(1.0)
    assert est.usd_per_hour == pytest.approx(21.0)
    assert est.usd_per_month == pytest.approx(21.0 * 730)
    # 21 / (5 x 200 x 3,600) x 1e6 = 5.8333; total tokens: 21 / (5 x 800 x 3,600) x 1e6
    assert est.per_million_output_tokens_usd == pytest.approx(5.833333333)
    assert est.per_million_total_tokens_usd == pytest.approx(1.458333333)
    assert est.basis == "measured"
    assert est.evidence == RUN


def test_replicas_for_edges() -> None:
    assert replicas_for(0.01, 2.0) == 1  # at least one replica
    assert replicas_for(2.0, 2.0) == 1  # exactly full
    assert replicas_for(2.0000001, 2.0) == 2
    assert replicas_for(0.3, 0.1) == 3  # 0.3 / 0.1 = 2.9999999999999996 in floats
    assert replicas_for(0.7, 0.1) * 0.1 >= 0.7


def test_peak_sizing_from_daily_requests() -> None:
    # 864,000 requests/day = 10 rps on average; a peak of 3x sizes for 30 rps
    t = Traffic.from_requests_per_day(864_000, input_tokens=500, output_tokens=100, peak_to_mean=3)
    assert t.requests_per_s == pytest.approx(30.0)
    assert t.average_requests_per_s == pytest.approx(10.0)
    assert t.peak_to_mean == pytest.approx(3.0)
    est = self_hosted_cost(t, deployment(capacity_rps=8.0, usd_per_hour=4.0))
    assert est.replicas == 4  # ceil(30 / 8)
    assert est.utilization == pytest.approx(30 / 32)
    assert est.mean_utilization == pytest.approx(10 / 32)
    # tokens are produced at the average rate: 16 / (10 x 100 x 3,600) x 1e6 = 4.444
    assert est.per_million_output_tokens_usd == pytest.approx(4.444444444)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"requests_per_s": 0, "input_tokens": 1, "output_tokens": 1}, "traffic.requests_per_s"),
        ({"requests_per_s": 1, "input_tokens": -1, "output_tokens": 1}, "traffic.input_tokens"),
        ({"requests_per_s": 1, "input_tokens": 1, "output_tokens": 0}, "traffic.output_tokens"),
        (
            {"requests_per_s": 1, "input_tokens": 1, "output_tokens": 1, "mean_requests_per_s": 2},
            "traffic.mean_requests_per_s",
        ),
    ],
)
def test_traffic_rejects_nonsense(kwargs: dict[str, float], field: str) -> None:
    with pytest.raises(InvalidInput) as err:
        Traffic(**kwargs)
    assert err.value.detail.startswith(field)


def test_hosted_cost_and_blended_price() -> None:
    # (3 x 3 + 15) / 4 = 6 USD per million tokens
    assert blended_per_million(3.0, 15.0) == pytest.approx(6.0)
    api = HostedApi("acme", usd_per_million_input_tokens=1.0, usd_per_million_output_tokens=4.0)
    est = hosted_cost(Traffic(requests_per_s=5.0, input_tokens=600, output_tokens=200), api)
    # per request (600 x 1 + 200 x 4) / 1e6 = 0.0014 USD; x 5 rps x 3,600 = 25.2 USD/h
    assert est.usd_per_hour == pytest.approx(25.2)
    assert est.usd_per_month == pytest.approx(25.2 * 730)
    assert est.per_million_output_tokens_usd == pytest.approx(7.0)
    assert est.per_million_total_tokens_usd == pytest.approx(1.75)
    assert est.blended_usd_per_million_tokens == pytest.approx(1.75)
    assert est.warnings  # list price only, nothing measured


# ---- break-even -----------------------------------------------------------------------

# U = USD 10/h per replica of c = 2 rps; hosted at 1 and 4 USD per million in/out tokens,
# 1,000 in and 250 out tokens per request: 0.002 USD a request, k = 7.2 USD/h per rps.
# First crossing U / k = 1.389 rps. Losing gaps: m < U / (c k - U) = 10 / 4.4 = 2.27, so
# m = 1: (2, 2.778] and m = 2: (4, 4.167]; m* = 3, always cheaper above 3 x 10 / 7.2 = 4.167.
BE_TRAFFIC = {"input_tokens": 1000, "output_tokens": 250}
BE_API = HostedApi("acme", 1.0, 4.0)


def test_break_even_first_crossing_and_step_gap() -> None:
    be = break_even(
        deployment(capacity_rps=2.0, usd_per_hour=10.0), BE_API, Traffic(1.0, **BE_TRAFFIC)
    )
    assert be.against == "acme"
    assert be.break_even_rps == pytest.approx(10 / 7.2)
    assert be.always_cheaper_above_rps == pytest.approx(30 / 7.2)


@pytest.mark.parametrize(
    ("rps", "self_hosting_cheaper"),
    [
        (1.3, False),  # below the first crossing: 10 > 9.36
        (1.5, True),  # 10 < 10.8
        (2.5, False),  # the first gap: 2 replicas, 20 > 18
        (3.5, True),  # 20 < 25.2
        (4.1, False),  # the second gap: 3 replicas, 30 > 29.52
        (4.2, True),  # above always_cheaper_above_rps: 30 < 30.24
        (5.9, True),  # 30 < 42.48
        (6.1, True),  # m = 3 has no gap: 40 < 43.92
    ],
)
def test_break_even_matches_the_costs(rps: float, self_hosting_cheaper: bool) -> None:
    t = Traffic(rps, **BE_TRAFFIC)
    own = self_hosted_cost(t, deployment(capacity_rps=2.0, usd_per_hour=10.0)).usd_per_hour
    hosted = hosted_cost(t, BE_API).usd_per_hour
    assert (own < hosted) is self_hosting_cheaper


def test_break_even_never_when_a_full_replica_costs_more() -> None:
    # a full replica: 2 rps x 7.2 = USD 14.4/h hosted, less than USD 20/h self-hosted
    be = break_even(
        deployment(capacity_rps=2.0, usd_per_hour=20.0), BE_API, Traffic(1.0, **BE_TRAFFIC)
    )
    assert be.break_even_rps is None
    assert be.always_cheaper_above_rps is None


def test_break_even_counts_the_peak_to_mean_ratio() -> None:
    # At peak 3x average, the hosted API bills a third of k per sizing rps: k' = 2.4, and a
    # full replica (2 rps x 2.4 = 4.8 USD/h) no longer beats USD 10/h.
    t = Traffic(3.0, mean_requests_per_s=1.0, **BE_TRAFFIC)
    be = break_even(deployment(capacity_rps=2.0, usd_per_hour=10.0), BE_API, t)
    assert be.break_even_rps is None


# ---- ranking and the planner ----------------------------------------------------------


def test_plan_ranks_cheapest_first_with_break_even() -> None:
    t = Traffic(3.0, **BE_TRAFFIC)  # hosted acme: 3 x 7.2 = USD 21.6/h
    small = deployment("small", capacity_rps=2.0, usd_per_hour=10.0)  # 2 replicas: 20
    big = deployment("big", capacity_rps=4.0, usd_per_hour=18.0)  # 1 replica: 18
    pricey = HostedApi("pricey", 2.0, 8.0)  # USD 43.2/h
    result = plan(t, [small, big], [pricey, BE_API])
    assert isinstance(result, Estimate)
    assert [c.name for c in result.candidates] == ["big", "small", "acme", "pricey"]
    assert [c.usd_per_hour for c in result.candidates] == pytest.approx([18.0, 20.0, 21.6, 43.2])
    assert result.cheapest_hosted == "acme"
    first = result.candidates[0]
    assert isinstance(first, SelfHostedEstimate)
    assert first.break_even is not None
    assert first.break_even.against == "acme"
    assert first.break_even.break_even_rps == pytest.approx(18 / 7.2)
    assert isinstance(result.candidates[2], HostedEstimate)


def test_plan_ties_go_to_more_headroom() -> None:
    t = Traffic(3.0, **BE_TRAFFIC)
    tight = deployment("a-tight", capacity_rps=3.0, usd_per_hour=10.0)
    roomy = deployment("b-roomy", capacity_rps=5.0, usd_per_hour=10.0)
    result = plan(t, [tight, roomy])
    assert isinstance(result, Estimate)
    assert [c.name for c in result.candidates] == ["b-roomy", "a-tight"]
    assert result.cheapest_hosted is None
    assert all(
        isinstance(c, SelfHostedEstimate) and c.break_even is None for c in result.candidates
    )


def test_no_evidence_is_an_outcome_not_zeros() -> None:
    result = plan(Traffic(1.0, 100, 100))
    assert isinstance(result, NoEvidence)
    assert "benchmark" in result.reason
    with pytest.raises(ValueError, match="evidence"):
        Deployment("x", 1.0, 1.0, gpu_count=1, evidence=())


def test_warnings_are_sentences_for_each_flag() -> None:
    flags = {
        "projection": "projected",
        "capacity_is_lower_bound": "at least",
        "extrapolated": "beyond",
        "client_bound": "client-bound",
        "stale": "stale",
        "workload_mismatch": "token lengths",
    }
    t = Traffic(1.5, 100, 100)  # 75% of one 2-rps replica: no utilisation or headroom note
    assert self_hosted_cost(t, deployment()).warnings == ()
    for flag, phrase in flags.items():
        (warning,) = self_hosted_cost(t, deployment(**{flag: True})).warnings
        assert phrase in warning
        assert warning.endswith(".")
    assert "idle" in self_hosted_cost(Traffic(0.5, 100, 100), deployment()).warnings[0]
    assert "headroom" in self_hosted_cost(Traffic(1.95, 100, 100), deployment()).warnings[0]
    over = deployment(capacity_rps=2.0, measured_range_rps=(0.5, 1.5))
    assert "beyond" in self_hosted_cost(t, over).warnings[0]


def test_projection_scales_by_the_bound_ratio() -> None:
    model = ModelFacts(params_b=8, bytes_per_param=2)
    h100 = decode_bound_tokens_per_s(model, Hardware.from_gpu(GPUS["H100-SXM"]))
    h200 = decode_bound_tokens_per_s(model, Hardware.from_gpu(GPUS["H200-SXM"]))
    assert h100 == pytest.approx(209.375)  # 3.35e12 / 16e9
    p = project_capacity(10.0, h100, h200)
    assert p.basis == "projection"
    assert p.ratio == pytest.approx(300 / 209.375)
    assert p.requests_per_s == pytest.approx(10.0 * 300 / 209.375)
    d = deployment(capacity_rps=p.requests_per_s, projection=True)
    assert self_hosted_cost(Traffic(1.0, 10, 10), d).basis == "projection"


# ---- capacity at the SLO --------------------------------------------------------------


def level(lv: float, passed: bool, margin: float | None, rps: float, tps: float) -> LevelResult:
    return LevelResult(lv, "concurrency", rps, tps, passed, margin)


def test_slo_margin_is_the_tightest_ratio() -> None:
    slo = {"ttft_ms": {"p95": 500}, "tpot_ms": {"p95": 50}}
    stats = {"ttft_ms": {"p50": 300.0, "p95": 400.0}, "tpot_ms": {"p95": 45.0}}
    assert slo_margin(stats, slo) == pytest.approx(0.9)  # max(400/500, 45/50)
    assert slo_margin({"ttft_ms": {"p95": 400.0}}, slo) is None  # tpot not measured
    assert slo_margin({"ttft_ms": {"p95": None}, "tpot_ms": {"p95": 1.0}}, slo) is None
    assert slo_margin(stats, {}) is None


def test_capacity_interpolates_the_crossing() -> None:
    # margins 0.8 at 8 streams and 1.6 at 32: margin = 1 at weight (1 - 0.8) / 0.8 = 0.25
    levels = [
        level(32, False, 1.6, 20.0, 2000.0),
        level(1, True, 0.4, 1.0, 100.0),
        level(8, True, 0.8, 7.0, 700.0),
    ]
    cap = capacity_at_slo(levels)
    assert cap is not None
    assert cap.interpolated
    assert cap.between == (8, 32)
    assert cap.level == pytest.approx(14.0)  # 8 + 0.25 x 24
    assert cap.requests_per_s == pytest.approx(10.25)  # 7 + 0.25 x 13
    assert cap.output_tokens_per_s == pytest.approx(1025.0)  # 700 + 0.25 x 1300
    assert cap.basis_run_indices == (2, 0)
    assert not cap.limited_by_measurements


def test_capacity_when_all_pass_none_pass_or_margins_are_missing() -> None:
    all_pass = capacity_at_slo([level(1, True, 0.2, 1, 10), level(4, True, 0.5, 4, 40)])
    assert all_pass is not None
    assert (all_pass.level, all_pass.requests_per_s) == (4, 4)
    assert all_pass.limited_by_measurements and not all_pass.interpolated

    assert capacity_at_slo([level(1, False, 1.2, 1, 10), level(4, False, 2.0, 4, 40)]) is None
    assert capacity_at_slo([]) is None

    no_margin = capacity_at_slo([level(1, True, None, 1, 10), level(4, False, None, 4, 40)])
    assert no_margin is not None
    assert (no_margin.level, no_margin.interpolated, no_margin.basis_run_indices) == (
        1,
        False,
        (0,),
    )


def test_capacity_stays_below_the_first_failure() -> None:
    noisy = [
        level(1, True, 0.5, 1, 10),
        level(4, False, 1.5, 4, 40),
        level(16, True, 0.9, 15, 150),
    ]
    cap = capacity_at_slo(noisy)
    assert cap is not None
    assert cap.passed_after_failure
    assert cap.between == (1, 4)
    assert 1 <= cap.level <= 4


def test_capacity_refuses_mixed_modes() -> None:
    with pytest.raises(ValueError, match="mix"):
        capacity_at_slo([level(1, True, 0.5, 1, 10), LevelResult(2, "rate", 2, 20, True, 0.5)])


# ---- physical limits ------------------------------------------------------------------

LLAMA_8B = ModelFacts(params_b=8, bytes_per_param=2, kv_bytes_per_token=131_072)
H200 = Hardware.from_gpu(GPUS["H200-SXM"])


def test_roofline_8b_bf16_on_h200() -> None:
    assert H200.memory_bandwidth_bytes_s == 4.8e12
    assert H200.peak_flops == 989e12
    # 4.8e12 / (8e9 x 2) = 300 tokens/s for one stream
    assert decode_bound_tokens_per_s(LLAMA_8B, H200) == pytest.approx(300.0)
    # 64 streams of 2,000 tokens: memory (16e9 + 64 x 2,000 x 131,072) / 4.8e12 = 6.829 ms
    # beats compute 2 x 8e9 x 64 / 989e12 = 1.035 ms
    step = batch_step_time_bound_s(LLAMA_8B, H200, 64, 2000)
    assert step == pytest.approx((16e9 + 64 * 2000 * 131_072) / 4.8e12)
    assert batch_throughput_bound_tokens_per_s(LLAMA_8B, H200, 64, 2000) == pytest.approx(64 / step)
    # short contexts, big batch: compute-bound, 2 x 8e9 x 4096 / 989e12
    assert batch_step_time_bound_s(LLAMA_8B, H200, 4096, 0) == pytest.approx(
        2 * 8e9 * 4096 / 989e12
    )
    # prefill of 1,000 tokens: 2 x 8e9 x 1,000 / 989e12 = 16.18 ms
    assert prefill_time_bound_s(LLAMA_8B, H200, 1000) == pytest.approx(0.016178, rel=1e-4)
    # peak: F / 2P = 61,812.5 tokens/s; with 2,000 tokens of context B / (c kv) = 18,310.5
    assert peak_throughput_bound_tokens_per_s(LLAMA_8B, H200) == pytest.approx(61_812.5)
    assert peak_throughput_bound_tokens_per_s(LLAMA_8B, H200, 2000) == pytest.approx(
        4.8e12 / (2000 * 131_072)
    )


def test_roofline_precision_and_gpu_count() -> None:
    fp8 = Hardware.from_gpu(GPUS["H200-SXM"], "fp8", gpu_count=2)
    assert fp8.flops == 2 * 1979e12
    assert fp8.bandwidth == 2 * 4.8e12
    assert decode_bound_tokens_per_s(ModelFacts(8, 1), fp8) == pytest.approx(1200.0)
    # A100 has no fp8 compute: the bound uses bf16
    assert Hardware.from_gpu(GPUS["A100-SXM-80GB"], "fp8").peak_flops == 312e12


def test_roofline_bounds_and_narrow_precisions() -> None:
    bounds = roofline_bounds(LLAMA_8B, H200)
    assert bounds.decode_tokens_per_s == pytest.approx(300.0)
    assert bounds.peak_output_tokens_per_s == pytest.approx(61_812.5)
    # Weights of one byte or less use the GPU's fp8 compute; wider ones its bf16 compute.
    for precision, tflops in (("int8", 1979), ("fp4", 1979), ("fp16", 989), ("fp32", 989)):
        assert Hardware.from_gpu(GPUS["H200-SXM"], precision).peak_flops == tflops * 1e12


# ---- presets --------------------------------------------------------------------------


def test_presets_are_complete_and_valid() -> None:
    assert set(PRESETS) == {
        "interactive-chatbot",
        "coding-assistant",
        "batch-documents",
        "high-volume-api",
        "internal-tool",
    }
    for name, p in PRESETS.items():
        assert p.name == name
        assert p.description
        assert p.optimises in GOALS
        assert set(p.also_watch) <= set(GOALS)
        for dist in (p.input_tokens, p.output_tokens):
            assert set(dist) == {"mean", "std", "min", "max"}
            assert 1 <= dist["min"] <= dist["mean"] <= dist["max"]
        assert p.slo
        for metric, limits in p.slo.items():
            assert metric in SLO_METRICS
            assert set(limits) <= set(SLO_PERCENTILES)
            assert all(v > 0 for v in limits.values())
        json.dumps(p.as_dict())


def test_chatbot_preset_figures_and_job_blocks() -> None:
    chat = get_preset("interactive-chatbot")
    assert chat.slo == {"ttft_ms": {"p95": 500}, "tpot_ms": {"p95": 50}}
    assert chat.optimises == "cost_at_slo"
    assert chat.input_tokens["mean"] == 1000
    # the workload block feeds the job's length sampler as it is
    lengths = draw_lengths(chat.workload()["input_tokens"], 2000, np.random.default_rng(0))
    assert 950 < lengths.mean() < 1050
    assert get_preset("batch-documents").slo == {"e2e_ms": {"p95": 60000}}
    assert get_preset("batch-documents").optimises == "throughput"
    # the blocks handed out are copies: changing one leaves the preset alone
    chat.default_slo()["ttft_ms"]["p95"] = 1
    assert chat.slo["ttft_ms"]["p95"] == 500


def test_unknown_preset_lists_the_known_names() -> None:
    with pytest.raises(UnknownPreset) as err:
        get_preset("chatbot")
    assert isinstance(err.value, InvalidInput)
    assert "'chatbot'" in err.value.detail
    for name in PRESETS:
        assert name in err.value.detail


# --- sizing with a target utilisation, and the capacity's interval -------------------------


def test_sizing_leaves_the_target_headroom() -> None:
    # 10 req/s per replica at a target of 0.8: 8 req/s fills one replica to 0.8 exactly ...
    assert replicas_for(8.0, 10.0, 0.8) == 1
    # ... and 9 req/s needs a second one (9 / 8 = 1.125).
    assert replicas_for(9.0, 10.0, 0.8) == 2
    eight = self_hosted_cost(Traffic(8.0, 100, 100), deployment(capacity_rps=10.0), 0.8)
    assert (eight.replicas, eight.utilization, eight.target_utilization) == (1, 0.8, 0.8)
    assert eight.headroom == pytest.approx(0.2)
    nine = self_hosted_cost(Traffic(9.0, 100, 100), deployment(capacity_rps=10.0), 0.8)
    assert nine.replicas == 2 and nine.utilization == pytest.approx(0.45)
    with pytest.raises(InvalidInput):
        replicas_for(1.0, 10.0, 0.0)


def test_the_capacity_interval_gives_replica_and_cost_ranges() -> None:
    d = deployment(capacity_rps=10.0, usd_per_hour=3.0)
    d = replace(d, capacity_rps_low=6.0, capacity_rps_high=14.0)
    est = self_hosted_cost(Traffic(9.0, 100, 100), d, 0.8)
    # 9 / (0.8 x 14) = 0.80 -> 1 replica; 9 / (0.8 x 6) = 1.875 -> 2 replicas.
    assert est.replicas_range == (1, 2)
    assert est.usd_per_hour_range == pytest.approx((3.0, 6.0))
    # USD 3/h over 9 x 100 x 3600 output tokens per hour.
    assert est.per_million_output_tokens_usd_range == pytest.approx(
        (3.0 / 3_240_000 * 1e6, 6.0 / 3_240_000 * 1e6)
    )
    # A lower bound (no failing level) has no top, so no range.
    open_top = replace(d, capacity_rps_high=None)
    assert self_hosted_cost(Traffic(9.0, 100, 100), open_top, 0.8).replicas_range is None


def test_capacity_interval_comes_from_the_bracketing_levels() -> None:
    levels = [
        LevelResult(1, "concurrency", 2.0, 200.0, True, 0.4),
        LevelResult(4, "concurrency", 8.0, 800.0, True, 0.6),
        LevelResult(16, "concurrency", 16.0, 1600.0, False, 1.4),
    ]
    cap = capacity_at_slo(levels)
    assert cap is not None
    assert cap.requests_per_s == pytest.approx(12.0)
    assert (cap.requests_per_s_low, cap.requests_per_s_high) == (8.0, 16.0)
    passing = capacity_at_slo(levels[:2])
    assert passing is not None
    assert (passing.requests_per_s_low, passing.requests_per_s_high) == (8.0, None)


def test_an_extrapolation_is_labelled() -> None:
    est = self_hosted_cost(Traffic(1.0, 10, 10), deployment(workload_mismatch=True))
    assert est.basis == "extrapolation"
    assert est.warnings[0].startswith("Extrapolation")
