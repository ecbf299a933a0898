"""Synthetic workloads: drawn token lengths and prompts of a requested size."""

from __future__ import annotations

import numpy as np
import pytest

from infercost.workload import PromptMaker, draw_lengths


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
