#!/usr/bin/env bash
# The suite, again and again, on a machine kept busy by `stress --cpu N`: does it stay green when
# the cores are not the tests' own? Prints one line a run (result, minutes, failed tests) and a
# summary; stops at the first red run unless --keep-going. Not part of `make test`.
#
#   bench/suite_under_stress.sh [--runs 20] [--cpu 2] [--workers 5] [--keep-going] [pytest args]
#
# Needs Debian's `stress` (apt-get install stress). Logs: test-artifacts/stress/run-N.log.
set -euo pipefail
cd "$(dirname "$0")/.."

runs=20 cpu=2 workers="${PYTEST_WORKERS:-5}" keep_going=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --cpu) cpu="$2"; shift 2 ;;
    --workers) workers="$2"; shift 2 ;;
    --keep-going) keep_going=1; shift ;;
    -h|--help) sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) break ;;
  esac
done
command -v stress >/dev/null || { echo "stress is not installed: apt-get install stress" >&2; exit 2; }

logs=test-artifacts/stress
mkdir -p "$logs"
stress --cpu "$cpu" >/dev/null 2>&1 &
stress_pid=$!
trap 'kill "$stress_pid" 2>/dev/null || true; pkill -P "$stress_pid" 2>/dev/null || true' EXIT

green=0 red=0
for ((i = 1; i <= runs; i++)); do
  log="$logs/run-$i.log"
  start=$(date +%s)
  # as `make pytest` runs it (Makefile: bytecode cached, no schemathesis plugin)
  if env -u PYTHONDONTWRITEBYTECODE .venv/bin/pytest -p no:schemathesis -n "$workers" \
      --dist loadfile --ignore=tests/schemathesis --ignore=tests/faults -q -p no:cacheprovider \
      "$@" >"$log" 2>&1; then
    result=green; green=$((green + 1))
  else
    result=red; red=$((red + 1))
  fi
  minutes=$(awk -v s="$(( $(date +%s) - start ))" 'BEGIN { printf "%.1f", s / 60 }')
  load=$(cut -d' ' -f1 /proc/loadavg)
  failed=$(grep -E '^(FAILED|ERROR) ' "$log" | cut -d' ' -f2 | tr '\n' ' ' || true)
  echo "run $i: $result in $minutes min (load average $load) $(tail -n1 "$log") ${failed}"
  if [[ $result == red && $keep_going == 0 ]]; then break; fi
done
echo "stress --cpu $cpu, $workers xdist workers: $green green, $red red of $((green + red)) runs"
[[ $red == 0 ]]
