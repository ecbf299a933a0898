#!/usr/bin/env bash
# Builds llama-server (CPU only) from the llama.cpp source vendored in PyPI's llama-cpp-python
# sdist, into the bench cache outside the repository. Idempotent: does nothing when the binary
# exists. Prints the binary's path on its last line.
set -euo pipefail

CACHE="${INFERCOST_BENCH_CACHE:-$HOME/.cache/infercost-bench}"
PY="${PYTHON:-python3}"
JOBS="${JOBS:-2}"
mkdir -p "$CACHE/sdist"

src=$(ls -d "$CACHE"/src/llama_cpp_python-*/vendor/llama.cpp 2>/dev/null | head -n1 || true)
if [[ -z "$src" ]]; then
  # The sdist pins one llama.cpp commit; --no-binary makes pip fetch the source tarball.
  "$PY" -m pip download --no-deps --no-binary :all: -d "$CACHE/sdist" llama-cpp-python >&2
  tarball=$(ls "$CACHE"/sdist/llama_cpp_python-*.tar.gz | head -n1)
  mkdir -p "$CACHE/src"
  tar -xzf "$tarball" -C "$CACHE/src"
  src=$(ls -d "$CACHE"/src/llama_cpp_python-*/vendor/llama.cpp | head -n1)
fi

bin="$src/build/bin/llama-server"
if [[ ! -x "$bin" ]]; then
  cmake -S "$src" -B "$src/build" -G Ninja \
    -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF \
    -DGGML_NATIVE=ON -DCMAKE_BUILD_TYPE=Release >&2
  cmake --build "$src/build" --target llama-server -j "$JOBS" >&2
fi
echo "$bin"
