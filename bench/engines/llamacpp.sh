#!/usr/bin/env bash
# infercost against a real llama.cpp server on this machine's CPU (docs/engines.md, "A real engine
# in the loop"). Prints figures and PASS/MISS lines; asserts nothing; not part of `make test`.
#
#   bench/engines/llamacpp.sh [--fixtures DIR] [--fixtures-only] [llamacpp.py options]
#
# 1. builds llama-server from the llama.cpp vendored in PyPI's llama-cpp-python sdist
#    (build_llamacpp.sh; skipped when the binary exists),
# 2. installs the `gguf` package into the project venv when missing and writes a tiny
#    random-weight llama GGUF with the Llama-2 vocabulary (skipped when it exists),
# 3. runs bench/engines/llamacpp.py, which starts the server and infercost, runs the job,
#    prints the comparison and stops everything it started.
# Everything built or downloaded lives in ${INFERCOST_BENCH_CACHE:-~/.cache/infercost-bench}.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cache="${INFERCOST_BENCH_CACHE:-$HOME/.cache/infercost-bench}"
py="${PYTHON:-$root/.venv/bin/python}"
export INFERCOST_BENCH_CACHE="$cache"

driver=""
cleanup() {
  # The driver stops its own children (llama-server, api, worker) and drops the database on
  # SIGTERM; this only makes sure it gets the signal when the script is interrupted.
  if [[ -n "$driver" ]] && kill -0 "$driver" 2>/dev/null; then
    kill -TERM "$driver" 2>/dev/null || true
    wait "$driver" 2>/dev/null || true
  fi
}
trap cleanup EXIT INT TERM

for arg in "$@"; do
  if [[ "$arg" == "-h" || "$arg" == "--help" ]]; then
    # The header above, then the driver's own options; nothing is built or started.
    sed -n '2,13p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
    echo
    exec "$py" "$here/llamacpp.py" --help
  fi
done

server="$(PYTHON="$py" "$here/build_llamacpp.sh" | tail -n1)"
src="$(cd "$(dirname "$server")/../.." && pwd)"

if ! "$py" -c 'import gguf' 2>/dev/null; then
  "$py" -m pip install --quiet 'gguf>=0.17'
fi
model="$cache/tiny-llama-4x256.gguf"
if [[ ! -f "$model" ]]; then
  "$py" "$here/tiny_llama_gguf.py" "$src/models/ggml-vocab-llama-spm.gguf" "$model" \
    --layers 4 --dim 256 --ff 768 --heads 4
fi

cd "$root"
"$py" "$here/llamacpp.py" --server "$server" --model "$model" "$@" &
driver=$!
status=0
wait "$driver" || status=$?
driver=""
exit "$status"
