"""Is a run's latency different from its baseline's beyond noise? (README, "History and
regressions".)

Both runs measured the same workload on the same endpoint; each stored one value per
request. Per metric (TTFT, TPOT, E2E) these decide:

- **significance**: a two-sided Mann-Whitney U test on the two samples. It compares whole
  distributions by rank, so it needs no normality (latency is skewed and often bimodal)
  and one slow outlier cannot dominate it.
- **size**: the relative change of the median, with a seeded bootstrap confidence
  interval, and Cliff's delta (P(current > baseline) - P(current < baseline)), which says
  how much the distributions overlap whatever their units.
- **practical threshold**: a shift smaller than `min_effect` (5 % by default) is reported
  but never flagged. With hundreds of requests per run the test detects shifts of a
  fraction of a millisecond (a busier client machine, another kernel build), which no one
  can act on; a regression has to be both real and big enough to matter.
- **tail**: a change confined to the slowest requests (one request in ten now three
  times slower) barely moves the median or the ranks, yet it is what a p95 SLO sees. So
  the p95 is checked the way the median is: significance from a quantile test (Mood's:
  how many of each run's requests lie above the pooled p95, Fisher's exact test, p <
  `alpha`), size from the relative change of the p95 with a seeded bootstrap interval
  that must exclude 0, and a practical threshold `min_tail_effect` (10 %: a p95 rests on
  the few slowest requests and moves more run to run than a median). It needs
  `min_tail_samples` (100) requests a side; below that the tail check is
  `insufficient_data` and the median check decides alone.

A metric regressed when either check regressed; it improved when either improved and
neither regressed.

Pure functions on arrays: no database, deterministic for a given input and seed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

Verdict = Literal["regression", "improvement", "no_change", "insufficient_data"]
#: The checks a metric's verdict comes from, as named in `MetricChange.flagged_by`.
Check = Literal["median", "p95"]
RunVerdict = Literal[
    "regression", "improvement", "no_change", "insufficient_data", "baseline", "incomparable"
]

#: The per-request metrics tested, in the order reports show them. ITL is left out on
#: purpose: its gaps are pooled over requests, so they are not independent draws (one slow
#: request contributes hundreds of correlated gaps) and a rank test would overstate its
#: confidence; TPOT is the same quantity averaged per request, one independent value each.
METRICS: tuple[str, ...] = ("ttft_ms", "tpot_ms", "e2e_ms")

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class Thresholds:
    """How a change is decided; the defaults are documented in the README.

    alpha: the p-value below which a difference is significant (0.01: a job finishes many
    levels and metrics at once, so 0.05 would raise a false alarm every few jobs).
    min_effect: the smallest relative change of the median that is flagged (0.05).
    min_samples: fewer successful measured requests than this on either side decides
    nothing (`insufficient_data`): neither the test nor the interval means much below it.
    max_samples: each side is subsampled (seeded) to at most this many values for the rank
    test, so a run of a million requests is tested in milliseconds; power at 20,000 per
    side is far beyond what the practical threshold needs.
    resamples: bootstrap draws for the confidence interval.
    tail_quantile: the tail quantile checked beside the median (0.95, the p95 SLOs use).
    min_tail_effect: the smallest relative change of that quantile that is flagged (0.10:
    twice the median's, as the p95 of a few hundred requests rests on its slowest dozen
    and moves run to run by several per cent on an unchanged endpoint).
    min_tail_samples: fewer requests than this on either side leave the tail check
    `insufficient_data` (100: at least 5 requests above the p95, so it is not one
    request's luck); the median check still decides.
    The tail check's quantile test uses `alpha` too: in a simulation run while choosing
    these values (not kept), the 95 % interval alone flagged the p95 of an unchanged
    endpoint in up to 4 % of comparisons of 100 to 500 requests (the bootstrap of a p95
    only reshuffles the sample's few slowest values, so a bunched tail gives too narrow an
    interval); with the test, about 1 % or less.
    """

    alpha: float = 0.01
    min_effect: float = 0.05
    min_samples: int = 20
    max_samples: int = 20_000
    confidence: float = 0.95
    resamples: int = 2000
    seed: int = 0
    tail_quantile: float = 0.95
    min_tail_effect: float = 0.10
    min_tail_samples: int = 100

    def as_dict(self) -> dict[str, Any]:
        """The thresholds as stored next to a decision, so it can be read back later."""
        return {
            "test": "mann_whitney_u",
            "alpha": self.alpha,
            "min_effect": self.min_effect,
            "min_samples": self.min_samples,
            "max_samples": self.max_samples,
            "confidence": self.confidence,
            "bootstrap_resamples": self.resamples,
            "seed": self.seed,
            "tail_quantile": self.tail_quantile,
            "min_tail_effect": self.min_tail_effect,
            "min_tail_samples": self.min_tail_samples,
            "tail_test": "mood_quantile_fisher_exact",
        }


DEFAULT_THRESHOLDS = Thresholds()


@dataclass(frozen=True, slots=True)
class MetricChange:
    """One metric of a run against the same metric of its baseline.

    `relative_change` = current median / baseline median - 1 (0.5: 50 % slower), with its
    bootstrap interval [`ci_low`, `ci_high`]; `cliffs_delta` in [-1, 1], positive when the
    current run tends to be slower. `p95_relative_change` = current p95 / baseline p95 - 1,
    with its interval [`p95_ci_low`, `p95_ci_high`] and the quantile test's `p95_p_value`.
    `median_verdict` and `p95_verdict` are
    each check's own verdict; `verdict` adds them up and `flagged_by` names the checks that
    gave it (empty unless it is regression or improvement). Figures are null when there was
    too little data.
    """

    metric: str
    verdict: Verdict
    n_baseline: int
    n_current: int
    baseline_p50: float | None = None
    current_p50: float | None = None
    relative_change: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    p_value: float | None = None
    cliffs_delta: float | None = None
    median_verdict: Verdict = "insufficient_data"
    p95_verdict: Verdict = "insufficient_data"
    baseline_p95: float | None = None
    current_p95: float | None = None
    p95_relative_change: float | None = None
    p95_ci_low: float | None = None
    p95_ci_high: float | None = None
    p95_p_value: float | None = None
    flagged_by: tuple[Check, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        """The JSON form stored in runs.change and served by the API."""
        return {
            "verdict": self.verdict,
            "n_baseline": self.n_baseline,
            "n_current": self.n_current,
            "baseline_p50_ms": self.baseline_p50,
            "current_p50_ms": self.current_p50,
            "relative_change": self.relative_change,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "p_value": self.p_value,
            "cliffs_delta": self.cliffs_delta,
            "median_verdict": self.median_verdict,
            "p95_verdict": self.p95_verdict,
            "baseline_p95_ms": self.baseline_p95,
            "current_p95_ms": self.current_p95,
            "p95_relative_change": self.p95_relative_change,
            "p95_ci_low": self.p95_ci_low,
            "p95_ci_high": self.p95_ci_high,
            "p95_p_value": self.p95_p_value,
            "flagged_by": list(self.flagged_by),
        }


@dataclass(frozen=True, slots=True)
class RateChange:
    """A run-level figure (output tokens/s) against the baseline's: one number per run, so
    there is no sample to test; reported for context, never flagged."""

    baseline: float | None
    current: float | None

    @property
    def relative_change(self) -> float | None:
        """current / baseline - 1, null when either is unknown or the baseline is 0."""
        if self.baseline is None or self.current is None or self.baseline <= 0:
            return None
        return self.current / self.baseline - 1.0

    def as_dict(self) -> dict[str, Any]:
        """The JSON form stored in runs.change."""
        return {
            "baseline": self.baseline,
            "current": self.current,
            "relative_change": self.relative_change,
        }


@dataclass(frozen=True, slots=True)
class RunComparison:
    """Every tested metric of a run against its baseline, and the verdict they add up to."""

    metrics: dict[str, MetricChange]
    output_tokens_per_s: RateChange
    thresholds: Thresholds = field(default=DEFAULT_THRESHOLDS)

    @property
    def verdict(self) -> Verdict:
        """regression when any metric regressed (a faster TTFT does not excuse a slower
        TPOT), else improvement when any improved, else no_change; insufficient_data
        when no metric had enough samples."""
        verdicts = [m.verdict for m in self.metrics.values()]
        for verdict in ("regression", "improvement"):
            if verdict in verdicts:
                return verdict
        if verdicts and all(v == "insufficient_data" for v in verdicts):
            return "insufficient_data"
        return "no_change"


def _finite(values: Sequence[float] | FloatArray) -> FloatArray:
    array = np.asarray(values, dtype=np.float64)
    return array[np.isfinite(array)]


def subsample(values: FloatArray, limit: int, rng: np.random.Generator) -> FloatArray:
    """At most `limit` of `values`, drawn without replacement by `rng` (all when fewer)."""
    if len(values) <= limit:
        return values
    return rng.choice(values, size=limit, replace=False)


def bootstrap_quantiles(
    values: FloatArray, quantile: float, resamples: int, rng: np.random.Generator
) -> FloatArray:
    """The `quantile` (0 to 1, as NumPy's default linear interpolation takes it) of each of
    `resamples` bootstrap resamples of `values` (n draws with replacement each), drawn
    without building any resample.

    That quantile of a sorted resample lies between its j-th and (j+1)-th smallest values
    (0-based, j = floor((n - 1) x quantile)). The k-th smallest of n uniform indices into
    the sorted values is floor(n x U(k)), where U(k), the k-th smallest of n uniforms on
    [0, 1), follows Beta(k, n + 1 - k); the next one is U(k) plus the smallest of the n - k
    uniforms above it. So each resample's quantile costs one or two Beta draws instead of n
    draws and a partition, and a run of a million requests is bootstrapped as fast as one
    of a hundred, exactly, with no cap on n.
    """
    ordered = np.sort(values)
    n = len(ordered)
    if n == 1:
        return np.full(resamples, ordered[0])
    position = (n - 1) * quantile
    j = min(math.floor(position), n - 1)
    fraction = position - j
    k = j + 1
    low = rng.beta(k, n + 1 - k, resamples)
    first = np.minimum((low * n).astype(np.int64), n - 1)
    result: FloatArray = ordered[first]
    if fraction == 0.0 or k == n:
        return result
    high = low + (1.0 - low) * rng.beta(1, n - k, resamples)
    second = np.minimum((high * n).astype(np.int64), n - 1)
    interpolated: FloatArray = (1.0 - fraction) * result + fraction * ordered[second]
    return interpolated


def bootstrap_medians(values: FloatArray, resamples: int, rng: np.random.Generator) -> FloatArray:
    """The medians of `resamples` bootstrap resamples of `values` (see
    `bootstrap_quantiles`)."""
    return bootstrap_quantiles(values, 0.5, resamples, rng)


def _relative_interval(
    base: FloatArray,
    cur: FloatArray,
    quantile: float,
    rng: np.random.Generator,
    *,
    confidence: float,
    resamples: int,
) -> tuple[float, float]:
    """The `confidence` bootstrap interval of current quantile / baseline quantile - 1."""
    base_q = bootstrap_quantiles(base, quantile, resamples, rng)
    cur_q = bootstrap_quantiles(cur, quantile, resamples, rng)
    ratios = cur_q / np.maximum(base_q, np.finfo(np.float64).tiny) - 1.0
    tail = (1.0 - confidence) / 2.0 * 100.0
    low, high = np.percentile(ratios, [tail, 100.0 - tail])
    return float(low), float(high)


def _scipy_stats() -> Any:
    """scipy.stats, imported on the first comparison: it takes some 0.9 s of CPU to import,
    and every process that imports the models (the API, the workers, each CLI command that
    migrates) would pay it at start. scipy ships no type hints (scipy-stubs is a separate
    project); its results are typed through the float() conversions at the call sites."""
    import scipy.stats  # type: ignore[import-untyped]

    return scipy.stats


def quantile_test(baseline: FloatArray, current: FloatArray, quantile: float) -> float:
    """The two-sided p-value of Mood's quantile test: do the two samples put the same share
    of their values above the pooled `quantile`? Fisher's exact test on the 2 x 2 counts,
    exact for any n and valid whatever the distribution (under no change the two samples
    are exchangeable). Values tied at the cut count as below it."""
    cut = np.percentile(np.concatenate([baseline, current]), quantile * 100.0)
    above_base, above_cur = int(np.sum(baseline > cut)), int(np.sum(current > cut))
    table = [
        [above_cur, len(current) - above_cur],
        [above_base, len(baseline) - above_base],
    ]
    return float(_scipy_stats().fisher_exact(table).pvalue)


def _direction(relative: float, ci_low: float, ci_high: float, min_effect: float) -> Verdict:
    """regression / improvement when the change is at least `min_effect` and its interval
    lies wholly on the same side of 0, else no_change."""
    if abs(relative) >= min_effect:
        if relative > 0 and ci_low > 0:
            return "regression"
        if relative < 0 and ci_high < 0:
            return "improvement"
    return "no_change"


def _combine(median: Verdict, p95: Verdict) -> tuple[Verdict, tuple[Check, ...]]:
    """A metric's verdict from its two checks, and the checks that gave it: regression
    when either regressed, else improvement when either improved, else the median's."""
    checks: tuple[tuple[Check, Verdict], ...] = (("median", median), ("p95", p95))
    for verdict in ("regression", "improvement"):
        fired = tuple(name for name, v in checks if v == verdict)
        if fired:
            return verdict, fired
    return median, ()


def compare_samples(
    metric: str,
    baseline: Sequence[float] | FloatArray,
    current: Sequence[float] | FloatArray,
    thresholds: Thresholds = DEFAULT_THRESHOLDS,
) -> MetricChange:
    """Decide whether `current` differs from `baseline` (same metric, higher is slower)
    beyond noise, at the median and at the p95; see the module docstring for how.
    Deterministic: the same inputs and seed give the same figures on every call."""
    base, cur = _finite(baseline), _finite(current)
    n_base, n_cur = len(base), len(cur)
    if min(n_base, n_cur) < thresholds.min_samples:
        return MetricChange(metric, "insufficient_data", n_base, n_cur)
    base_p50, cur_p50 = float(np.median(base)), float(np.median(cur))
    if base_p50 <= 0:
        # A relative change of a zero median means nothing (no real latency is zero).
        return MetricChange(metric, "insufficient_data", n_base, n_cur, base_p50, cur_p50)

    rng = np.random.default_rng(thresholds.seed)
    tested_base = subsample(base, thresholds.max_samples, rng)
    tested_cur = subsample(cur, thresholds.max_samples, rng)
    result = _scipy_stats().mannwhitneyu(tested_cur, tested_base, alternative="two-sided")
    p_value = float(result.pvalue)
    if not math.isfinite(p_value):
        p_value = 1.0  # every value tied across both samples: nothing to tell apart
    # U counts the pairs (current, baseline) where current is larger, ties as half.
    pairs = len(tested_cur) * len(tested_base)
    cliffs_delta = 2.0 * float(result.statistic) / pairs - 1.0

    relative = cur_p50 / base_p50 - 1.0
    ci_low, ci_high = _relative_interval(
        base, cur, 0.5, rng, confidence=thresholds.confidence, resamples=thresholds.resamples
    )
    median_verdict: Verdict = "no_change"
    if p_value < thresholds.alpha:
        median_verdict = _direction(relative, ci_low, ci_high, thresholds.min_effect)

    # The tail: drawn after the median's interval, so the median figures do not depend on
    # whether the tail was checked.
    q = thresholds.tail_quantile * 100.0
    base_p95, cur_p95 = float(np.percentile(base, q)), float(np.percentile(cur, q))
    p95_relative = cur_p95 / base_p95 - 1.0 if base_p95 > 0 else None
    p95_ci: tuple[float | None, float | None] = (None, None)
    p95_p_value: float | None = None
    p95_verdict: Verdict = "insufficient_data"
    if p95_relative is not None and min(n_base, n_cur) >= thresholds.min_tail_samples:
        low, high = _relative_interval(
            base,
            cur,
            thresholds.tail_quantile,
            rng,
            confidence=thresholds.confidence,
            resamples=thresholds.resamples,
        )
        p95_ci = (low, high)
        p95_p_value = quantile_test(base, cur, thresholds.tail_quantile)
        p95_verdict = "no_change"
        if p95_p_value < thresholds.alpha:
            p95_verdict = _direction(p95_relative, low, high, thresholds.min_tail_effect)

    verdict, flagged_by = _combine(median_verdict, p95_verdict)
    return MetricChange(
        metric,
        verdict,
        n_base,
        n_cur,
        baseline_p50=base_p50,
        current_p50=cur_p50,
        relative_change=relative,
        ci_low=ci_low,
        ci_high=ci_high,
        p_value=p_value,
        cliffs_delta=cliffs_delta,
        median_verdict=median_verdict,
        p95_verdict=p95_verdict,
        baseline_p95=base_p95,
        current_p95=cur_p95,
        p95_relative_change=p95_relative,
        p95_ci_low=p95_ci[0],
        p95_ci_high=p95_ci[1],
        p95_p_value=p95_p_value,
        flagged_by=flagged_by,
    )


def compare_runs(
    baseline: Mapping[str, Sequence[float] | FloatArray],
    current: Mapping[str, Sequence[float] | FloatArray],
    *,
    baseline_output_tokens_per_s: float | None,
    current_output_tokens_per_s: float | None,
    thresholds: Thresholds = DEFAULT_THRESHOLDS,
) -> RunComparison:
    """Every metric of METRICS (one with too few samples on either side is
    insufficient_data) and the change of output tokens/s."""
    metrics = {
        name: compare_samples(name, baseline.get(name, ()), current.get(name, ()), thresholds)
        for name in METRICS
    }
    return RunComparison(
        metrics=metrics,
        output_tokens_per_s=RateChange(baseline_output_tokens_per_s, current_output_tokens_per_s),
        thresholds=thresholds,
    )
