"""Writes a tiny random-weight llama GGUF with the real Llama-2 vocabulary, so llama-server
runs a genuine model graph (tokenizer, attention, KV cache, sampling) fast on a few CPU cores.

`python tiny_llama_gguf.py VOCAB.gguf OUT.gguf [--layers 4 --dim 256 --ff 768 --heads 4]`

VOCAB.gguf is llama.cpp's models/ggml-vocab-llama-spm.gguf (tokenizer only, no tensors): its
tokenizer.* key-value pairs are copied as they are. The weights are seeded random numbers,
so the text is gibberish; the benchmark sends ignore_eos and max_tokens to fix its length.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import gguf
import numpy as np


def copy_tokenizer(reader: gguf.GGUFReader, writer: gguf.GGUFWriter) -> int:
    """Copies every tokenizer.* field of `reader` into `writer`; returns the vocabulary size."""
    n_vocab = 0
    for key, field in reader.fields.items():
        if not key.startswith("tokenizer."):
            continue
        kind = field.types[0]
        sub = field.types[1] if kind == gguf.GGUFValueType.ARRAY else None
        value = field.contents()
        writer.add_key_value(key, value, kind, sub)
        if key == "tokenizer.ggml.tokens":
            n_vocab = len(value)
    if not n_vocab:
        raise SystemExit("the vocabulary file has no tokenizer.ggml.tokens")
    return n_vocab


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("vocab", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--dim", type=int, default=256)
    parser.add_argument("--ff", type=int, default=768)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--ctx", type=int, default=4096, help="the model's trained context")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    reader = gguf.GGUFReader(args.vocab)
    tmp = args.out.with_suffix(".partial")
    writer = gguf.GGUFWriter(tmp, "llama")
    writer.add_name(f"infercost-tiny-llama-{args.layers}x{args.dim}")
    n_vocab = copy_tokenizer(reader, writer)
    head_dim = args.dim // args.heads
    writer.add_vocab_size(n_vocab)
    writer.add_context_length(args.ctx)
    writer.add_embedding_length(args.dim)
    writer.add_block_count(args.layers)
    writer.add_feed_forward_length(args.ff)
    writer.add_head_count(args.heads)
    writer.add_head_count_kv(args.heads)
    writer.add_rope_dimension_count(head_dim)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16)

    rng = np.random.default_rng(args.seed)

    def matrix(rows: int, cols: int) -> np.ndarray:
        # numpy (rows, cols) is ggml ne = [cols, rows]: y = W x maps cols -> rows. A scale of
        # 1/sqrt(cols) keeps activations near unit size so the logits stay finite in f16.
        return (rng.standard_normal((rows, cols)) / np.sqrt(cols)).astype(np.float16)

    ones = np.ones(args.dim, dtype=np.float32)  # norm weights stay f32, as llama.cpp expects
    writer.add_tensor("token_embd.weight", matrix(n_vocab, args.dim))
    for i in range(args.layers):
        writer.add_tensor(f"blk.{i}.attn_norm.weight", ones)
        for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
            writer.add_tensor(f"blk.{i}.{name}.weight", matrix(args.dim, args.dim))
        writer.add_tensor(f"blk.{i}.ffn_norm.weight", ones)
        writer.add_tensor(f"blk.{i}.ffn_gate.weight", matrix(args.ff, args.dim))
        writer.add_tensor(f"blk.{i}.ffn_up.weight", matrix(args.ff, args.dim))
        writer.add_tensor(f"blk.{i}.ffn_down.weight", matrix(args.dim, args.ff))
    writer.add_tensor("output_norm.weight", ones)
    writer.add_tensor("output.weight", matrix(n_vocab, args.dim))

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    tmp.replace(args.out)  # only a complete file gets the final name (the script skips it then)
    print(args.out)


if __name__ == "__main__":
    main()
