"""The simulator's prefix cache: which prompt prefixes a request may reuse instead of prefilling.

Prompts are the simulator's word tokens (see sim.wire). The cache keeps chained
hashes of whole blocks of `block` tokens, as vLLM does (block 16; llama.cpp and SGLang match
token by token, block 1): the key of block i is the hash of (key of block i-1, the tokens of
block i), so a key stands for the whole prefix up to the end of its block. A request's cached
tokens are its leading blocks whose keys are present, at most prompt - 1 tokens (an engine
always computes the last prompt token to get the first output's logits; the captured
llama-server answer with a fully repeated prompt reports `prompt_n` 1). Keys are evicted least
recently used first, beyond `capacity_tokens`; a request's keys are touched last-block-first,
so a prefix's first blocks outlive its tails.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence


class PrefixCache:
    """Recently seen prompt prefixes, LRU-bounded to about `capacity_tokens` tokens."""

    __slots__ = ("_keys", "block", "capacity_blocks", "hits_tokens", "queries_tokens")

    def __init__(self, capacity_tokens: int, block: int = 1) -> None:
        if capacity_tokens < 1 or block < 1:
            raise ValueError("capacity_tokens and block must be >= 1")
        self.block = block
        self.capacity_blocks = max(1, capacity_tokens // block)
        self._keys: OrderedDict[int, None] = OrderedDict()
        # Prompt tokens looked up, and those found (vLLM's prefix_cache_queries / _hits).
        self.queries_tokens = 0
        self.hits_tokens = 0

    def keys(self, tokens: Sequence[str]) -> list[int]:
        """The chained key of each whole block of `tokens`, first block first."""
        block = self.block
        keys: list[int] = []
        key = 0
        for start in range(0, len(tokens) - block + 1, block):
            key = hash((key, tuple(tokens[start : start + block])))
            keys.append(key)
        return keys

    def lookup(self, keys: Sequence[int], prompt_tokens: int) -> int:
        """Cached tokens of a prompt of `prompt_tokens` tokens with these block keys (counted
        in the hit statistics; the blocks found become the most recently used)."""
        usable = max(0, (prompt_tokens - 1) // self.block)
        found = 0
        for key in keys[:usable]:
            if key not in self._keys:
                break
            found += 1
        for key in reversed(keys[:found]):
            self._keys.move_to_end(key)
        cached = found * self.block
        self.queries_tokens += prompt_tokens
        self.hits_tokens += cached
        return cached

    def insert(self, keys: Sequence[int]) -> None:
        """Remember a prefilled prompt's blocks, evicting the least recently used beyond
        capacity."""
        cache = self._keys
        for key in reversed(keys):
            cache[key] = None
            cache.move_to_end(key)
        while len(cache) > self.capacity_blocks:
            cache.popitem(last=False)

    @property
    def size_tokens(self) -> int:
        """Tokens held now (whole blocks)."""
        return len(self._keys) * self.block
