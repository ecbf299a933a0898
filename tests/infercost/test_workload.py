"""Synthetic workloads: drawn token lengths and prompts of a requested size."""

from __future__ import annotations

import numpy as np
import pytest

from infercost.workload.synthetic import PromptMaker, draw_lengths, lognormal_params


def test_lengths_are_clipped_integers_within_min_and_max() -> None:
    spec = {"mean": 100, "std": 50, "min": 60, "max": 140}
    lengths = draw_lengths(spec, 2000, np.random.default_rng(7))
    assert lengths.shape == (2000,)
    assert np.issubdtype(lengths.dtype, np.integer)
    assert lengths.min() == 60
    assert lengths.max() == 140
    # std 50 around 100 puts ~21% of draws below 60 and ~21% above 140: clipping, not luck
    assert (lengths == 60).sum() > 200
    assert (lengths == 140).sum() > 200
    # what lies strictly inside is spread out, not collapsed to the mean
    inside = lengths[(lengths > 60) & (lengths < 140)]
    assert len(np.unique(inside)) > 50
    assert 90 < lengths.mean() < 110


def test_lengths_are_at_least_one_without_a_min() -> None:
    lengths = draw_lengths({"mean": 3, "std": 20}, 1000, np.random.default_rng(1))
    assert np.issubdtype(lengths.dtype, np.integer)
    assert lengths.min() == 1
    # about 44% of normal(3, 20) lies below 0.5: all of those became 1
    assert (lengths == 1).sum() > 300


def test_fixed_length_without_std_is_rounded() -> None:
    lengths = draw_lengths({"mean": 128.4}, 5, np.random.default_rng(0))
    assert lengths.tolist() == [128] * 5


def test_same_seed_same_lengths() -> None:
    spec = {"mean": 512, "std": 64, "min": 16, "max": 1024}
    a = draw_lengths(spec, 100, np.random.default_rng(42))
    b = draw_lengths(spec, 100, np.random.default_rng(42))
    c = draw_lengths(spec, 100, np.random.default_rng(43))
    assert a.tolist() == b.tolist()
    assert a.tolist() != c.tolist()


@pytest.mark.parametrize("words", [1, 2, 17, 600, 3000])
def test_prompt_has_the_requested_word_count(words: int) -> None:
    maker = PromptMaker(np.random.default_rng(0), pool_words=1000)
    # twice, so the second prompt starts from the advanced cursor (600 words: past the pool's
    # end, so it starts over; 3000 words: more than the whole pool)
    for seq in (3, 4):
        prompt = maker.make(seq, words)
        assert len(prompt.split()) == words
        assert prompt.split()[0] == str(seq)


def test_prompts_have_distinct_prefixes_per_seq() -> None:
    maker = PromptMaker(np.random.default_rng(0))
    prompts = [maker.make(seq, 40) for seq in range(200)]
    assert len(set(prompts)) == 200
    # the sequence number leads, so no two prompts share even their first word
    assert len({p.split()[0] for p in prompts}) == 200
    # and the body after it differs too (the maker walks its word pool)
    assert len({tuple(p.split()[1:9]) for p in prompts}) == 200


def test_same_seed_same_prompts() -> None:
    a = PromptMaker(np.random.default_rng(5)).make(0, 50)
    b = PromptMaker(np.random.default_rng(5)).make(0, 50)
    c = PromptMaker(np.random.default_rng(6)).make(0, 50)
    assert a == b
    assert a != c


def test_calibration_from_observed_tokens() -> None:
    maker = PromptMaker(np.random.default_rng(0))
    # before any observation one word is taken as one token
    assert maker.words_for(130) == 130
    # the server counted 130 tokens for 100 words: 1.3 tokens per word
    maker.observe(100, 130)
    assert maker.tokens_per_word == pytest.approx(1.3)
    # 130 tokens / 1.3 tokens per word = 100 words
    assert maker.words_for(130) == 100
    # more observations are pooled: (130 + 270) / (100 + 300) = 1.0
    maker.observe(300, 270)
    assert maker.words_for(130) == 130
    # never fewer than one word
    assert maker.words_for(0) == 1


# --- distributions ----------------------------------------------------------------------------

N = 100_000


def _within(sample: float, expected: float, sigma: float, n: int, z: float = 5.0) -> bool:
    """|sample mean - expected| within z standard errors (sigma / sqrt(n))."""
    return abs(sample - expected) <= z * sigma / np.sqrt(n)


def test_normal_is_the_default_and_unchanged() -> None:
    spec = {"mean": 512, "std": 64, "min": 16, "max": 1024}
    plain = draw_lengths(spec, 1000, np.random.default_rng(3))
    named = draw_lengths({**spec, "distribution": "normal"}, 1000, np.random.default_rng(3))
    assert plain.tolist() == named.tolist()
    # the same draws as rng.normal, rounded (nothing near the bounds at 8 sigma)
    raw = np.rint(np.random.default_rng(3).normal(512, 64, 1000)).astype(np.int64)
    assert plain.tolist() == np.clip(raw, 16, 1024).tolist()


def test_normal_sample_moments() -> None:
    lengths = draw_lengths({"mean": 300, "std": 40}, N, np.random.default_rng(11))
    assert _within(lengths.mean(), 300, 40, N)
    # the std of a normal sample has standard error about sigma / sqrt(2n); rounding to
    # integers adds 1/12 to the variance
    assert abs(lengths.std() - np.sqrt(40**2 + 1 / 12)) < 5 * 40 / np.sqrt(2 * N)


def test_uniform_covers_min_to_max_evenly() -> None:
    spec = {"distribution": "uniform", "min": 10, "max": 29}
    lengths = draw_lengths(spec, N, np.random.default_rng(5))
    assert lengths.min() == 10
    assert lengths.max() == 29
    # 20 equally likely values: each about N / 20 = 5000 times (binomial sd ~ 69)
    counts = np.bincount(lengths - 10, minlength=20)
    assert len(counts) == 20
    assert np.all(np.abs(counts - N / 20) < 5 * np.sqrt(N / 20 * (1 - 1 / 20)))
    # discrete uniform on 20 values: mean (10 + 29) / 2 = 19.5, variance (20^2 - 1) / 12
    sigma = np.sqrt((20**2 - 1) / 12)
    assert _within(lengths.mean(), 19.5, sigma, N)
    assert lengths.std() == pytest.approx(sigma, rel=0.02)


def test_lognormal_mean_and_std_are_of_the_lengths() -> None:
    spec = {"distribution": "lognormal", "mean": 512, "std": 256}
    lengths = draw_lengths(spec, N, np.random.default_rng(9))
    assert _within(lengths.mean(), 512, 256, N)
    # the sample std of a lognormal converges slowly (heavy tail); 3% at n = 100k
    assert lengths.std() == pytest.approx(256, rel=0.03)
    # skewed right: median exp(mu) = 512 / sqrt(1.25) = 457.9 lies below the mean
    assert np.median(lengths) == pytest.approx(512 / np.sqrt(1.25), rel=0.01)
    assert lengths.min() >= 1


def test_lognormal_parameters_from_moments() -> None:
    mu, sigma = lognormal_params(512.0, 256.0)
    # sigma^2 = ln(1 + (256/512)^2) = ln(1.25); E = exp(mu + sigma^2/2) = 512;
    # Var = (exp(sigma^2) - 1) exp(2 mu + sigma^2) = 0.25 x 512^2 = 256^2
    assert sigma**2 == pytest.approx(np.log(1.25))
    assert np.exp(mu + sigma**2 / 2) == pytest.approx(512.0)
    assert (np.exp(sigma**2) - 1) * np.exp(2 * mu + sigma**2) == pytest.approx(256.0**2)


def test_lognormal_draws_are_clipped_to_the_bounds() -> None:
    spec = {"distribution": "lognormal", "mean": 200, "std": 400, "min": 50, "max": 600}
    lengths = draw_lengths(spec, 20_000, np.random.default_rng(2))
    assert lengths.min() == 50
    assert lengths.max() == 600
    # sigma^2 = ln(1 + 4) = 1.609, mu = ln 200 - 0.805 = 4.494: P(X < 49.5) = 0.32 and
    # P(X > 600.5) = 0.067, so both bounds collect many draws
    assert (lengths == 50).sum() > 0.28 * 20_000
    assert (lengths == 600).sum() > 0.05 * 20_000


def test_unknown_distribution_is_an_error() -> None:
    with pytest.raises(ValueError, match="gamma"):
        draw_lengths({"distribution": "gamma", "mean": 5}, 3, np.random.default_rng(0))


def test_prompt_text_depends_only_on_seq_and_words() -> None:
    maker = PromptMaker(np.random.default_rng(0))
    first = [maker.make(seq, 30) for seq in range(5)]
    # asked again in another order: the same texts (a checked prompt is rebuilt identically)
    again = [maker.make(seq, 30) for seq in reversed(range(5))][::-1]
    assert first == again
    # one word more appends a word and changes nothing before it
    longer = maker.make(3, 31)
    assert longer.startswith(first[3] + " ")


def test_shared_prefixes_start_prompts_and_the_rest_is_their_own() -> None:
    maker = PromptMaker(np.random.default_rng(7), prefixes=3, prefix_words=20)
    prompts = [maker.make(seq, 50) for seq in range(7)]
    words = [p.split() for p in prompts]
    # every prompt has 50 words: 20 of its prefix, then its number and 29 pool words
    assert [len(w) for w in words] == [50] * 7
    # seq, seq + 3, seq + 6 share their first 20 words, and only those
    assert words[0][:20] == words[3][:20] == words[6][:20]
    assert words[1][:20] == words[4][:20]
    assert words[0][:20] != words[1][:20] != words[2][:20]
    assert [w[20] for w in words] == [str(seq) for seq in range(7)]
    # without prefixes, the same generator gives the prompts it always gave
    plain = PromptMaker(np.random.default_rng(7))
    assert plain.make(3, 50) == PromptMaker(np.random.default_rng(7)).make(3, 50)
    assert not plain.make(3, 50).startswith(" ".join(words[3][:20]))
