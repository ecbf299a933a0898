#!/usr/bin/env bash
# infercost against a real llama.cpp server on this machine's CPU (docs/engines.md, "A real engine
# in the loop"). Prints figures and PASS/MISS lines; asserts nothing; not part of `make test`.
#
#   bench/engines/llamacpp.sh [--check] [--fixtures DIR] [--fixtures-only] [llamacpp.py options]
#
# 0. checks what it needs (--check: only that): the project's .venv (made with `make install`
#    when missing), a C++ compiler, cmake and ninja (pip-installed into .venv when missing),
#    network for the llama.cpp source, Postgres (INFERCOST_TEST_PG) and Redis (INFERCOST_TEST_REDIS),
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

check_only=0
args=()
pg_next=0
for arg in "$@"; do
  # The driver's --pg names the Postgres server: the check below tries that one.
  if (( pg_next )); then export INFERCOST_TEST_PG="$arg"; pg_next=0; fi
  case "$arg" in
    --check) check_only=1; continue ;;
    --pg) pg_next=1 ;;
    --pg=*) export INFERCOST_TEST_PG="${arg#--pg=}" ;;
  esac
  args+=("$arg")
done
set -- "${args[@]+"${args[@]}"}"

# A fresh clone has no .venv: make it as `make install` does (the driver imports the project).
if [[ ! -x "$py" ]]; then
  if [[ -n "${PYTHON:-}" ]]; then
    echo "llamacpp.sh: PYTHON=$PYTHON is not an executable" >&2
    exit 2
  fi
  echo "llamacpp.sh: no $root/.venv yet: creating it with \`make install\` (once)" >&2
  make -C "$root" install >&2
fi

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
    sed -n '2,17p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
    echo
    exec "$py" "$here/llamacpp.py" --help
  fi
done

# What the build and the run need, said before 20 minutes of building rather than after.
missing=()
built="$(ls "$cache"/src/llama_cpp_python-*/vendor/llama.cpp/build/bin/llama-server 2>/dev/null | head -n1 || true)"
if [[ -z "$built" ]]; then
  command -v c++ >/dev/null 2>&1 || command -v g++ >/dev/null 2>&1 || command -v clang++ >/dev/null 2>&1 \
    || missing+=("a C++ compiler (apt-get install g++)")
  for tool in cmake ninja; do
    if ! command -v "$tool" >/dev/null 2>&1 && [[ ! -x "$root/.venv/bin/$tool" ]]; then
      echo "llamacpp.sh: no $tool on PATH: installing PyPI's $tool into .venv" >&2
      "$py" -m pip install --quiet "$tool" >&2 || missing+=("$tool (apt-get install $tool, or pip)")
    fi
  done
  export PATH="$root/.venv/bin:$PATH"
fi
if ! "$py" - <<'PY' >&2; then
import asyncio, os, sys
import asyncpg, redis

pg = os.environ.get("INFERCOST_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
queue = os.environ.get("INFERCOST_TEST_REDIS", "redis://127.0.0.1:6379/0")
bad = []


async def reach() -> None:
    conn = await asyncio.wait_for(asyncpg.connect(pg), 5)
    await conn.close()


try:
    asyncio.run(reach())
except Exception as exc:  # noqa: BLE001 (any failure is the same answer: not reachable)
    bad.append(f"Postgres at {pg} ({type(exc).__name__}): set INFERCOST_TEST_PG or --pg")
try:
    redis.Redis.from_url(queue, socket_connect_timeout=5).ping()
except Exception as exc:  # noqa: BLE001
    bad.append(f"Redis at {queue} ({type(exc).__name__}): set INFERCOST_TEST_REDIS")
for line in bad:
    print(f"llamacpp.sh: cannot reach {line}")
sys.exit(1 if bad else 0)
PY
  missing+=("a reachable Postgres and Redis (see above)")
fi
if (( ${#missing[@]} )); then
  printf 'llamacpp.sh: missing: %s\n' "${missing[@]}" >&2
  exit 2
fi
if (( check_only )); then
  echo "llamacpp.sh: ready (venv $py; llama-server ${built:-to be built into $cache})"
  exit 0
fi

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
