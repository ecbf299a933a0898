"""What guided decoding costs on a real llama.cpp server: structured answers (a job's
`structured` feature, the same response_format) against plain answers of the same length, on
this machine's CPU. Prints figures and the ratios of one run; asserts nothing.

    .venv/bin/python bench/engines/structured_latency.py --server BIN --model GGUF [--rounds 10]

(bench/engines/llamacpp.sh builds BIN and GGUF into ~/.cache/infercost-bench.) The server is
the benchmark's (llamacpp.py) with the chat template of the structured captures
(tiny_chat_template.jinja) and the tiny random-weight model; one request runs at a time. A structured answer ends when its grammar is complete, so ignore_eos
cannot fix its length (llama.cpp fails the request then): each round first asks for the
structured answer, then for a plain one of exactly as many tokens as usage said it had
(ignore_eos, max_tokens = that count), the two alternating so both see the same machine.
Both send the same prompt, which the server's prefix cache keeps after the first round.

Per kind: the client's time to the first content piece (TTFT) and to the end, the server's
own `timings` (prompt_ms, predicted_per_token_ms), medians over the rounds; then the ratios.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from llamacpp import start_llama_server
from llamacpp_fixtures import CONTENT, TEMPLATE, structured_body

from infercost.workload.tools import STRUCTURED_SCHEMA, response_format


def one(client: httpx.Client, url: str, body: dict[str, Any]) -> dict[str, float]:
    """One streamed request: client TTFT and end (s), tokens, and the server's timings."""
    sent = time.perf_counter()
    first: float | None = None
    usage: dict[str, Any] = {}
    timings: dict[str, Any] = {}
    # A fresh connection each time: llama-server closes a kept-alive one after a stream.
    headers = {"Connection": "close"}
    with client.stream(
        "POST", f"{url}/v1/chat/completions", json=body, headers=headers
    ) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            event = json.loads(line.removeprefix("data: "))
            if "error" in event:
                raise SystemExit(f"the server failed the request: {event['error']}")
            for choice in event.get("choices", ()):
                if first is None and (choice.get("delta") or {}).get("content"):
                    first = time.perf_counter()
            usage = event.get("usage") or usage
            timings = event.get("timings") or timings
    end = time.perf_counter()
    if first is None:
        raise SystemExit("no content came back")
    return {
        "ttft_s": first - sent,
        "end_s": end - sent,
        "tokens": float(usage["completion_tokens"]),
        "prompt_ms": float(timings["prompt_ms"]),
        "per_token_ms": float(timings["predicted_per_token_ms"]),
    }


def median(rows: list[dict[str, float]], key: str) -> float:
    return statistics.median(r[key] for r in rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", type=Path, required=True, help="the llama-server binary")
    parser.add_argument("--model", type=Path, required=True, help="the GGUF model")
    parser.add_argument("--rounds", type=int, default=30, help="measured rounds (after one)")
    parser.add_argument("--threads", type=int, default=0, help="llama-server --threads")
    args = parser.parse_args()
    args.port = 0
    logdir = Path(tempfile.mkdtemp(prefix="infercost-structured-"))
    structured = structured_body(
        args.model.stem,
        {"response_format": response_format(STRUCTURED_SCHEMA)},
        stream=True,
        exact_length=False,
    )
    rows: dict[str, list[dict[str, float]]] = {"structured": [], "plain": []}
    with ExitStack() as stack, httpx.Client(timeout=300) as client:
        url = start_llama_server(stack, args, logdir, TEMPLATE)
        for round_ in range(args.rounds + 1):
            s = one(client, url, structured)
            plain = {
                **{k: v for k, v in structured.items() if k != "response_format"},
                "max_tokens": int(s["tokens"]),
                "ignore_eos": True,
            }
            p = one(client, url, plain)
            if p["tokens"] != s["tokens"]:
                raise SystemExit(f"lengths differ: {p['tokens']} != {s['tokens']}")
            if round_:  # the first round fills the prefix cache and warms up
                rows["structured"].append(s)
                rows["plain"].append(p)
    n = int(rows["plain"][0]["tokens"])
    print(
        f"# {args.rounds} rounds, one request at a time, {n} output tokens each, prompt {CONTENT!r}"
    )
    print("# kind        TTFT p50 ms  end p50 ms  server prompt_ms  server ms/token")
    for kind, rs in rows.items():
        print(
            f"{kind:12s} {1000 * median(rs, 'ttft_s'):11.1f} {1000 * median(rs, 'end_s'):11.1f}"
            f" {median(rs, 'prompt_ms'):17.2f} {median(rs, 'per_token_ms'):16.2f}"
        )
    s_rows, p_rows = rows["structured"], rows["plain"]
    for key, label in (
        ("ttft_s", "TTFT"),
        ("end_s", "end-to-end"),
        ("per_token_ms", "server ms/token"),
    ):
        ratio = median(s_rows, key) / median(p_rows, key)
        print(f"ratio structured / plain, {label}: {ratio:.2f}")


if __name__ == "__main__":
    main()
