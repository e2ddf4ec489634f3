#!/usr/bin/env bash
# Runs the fuzz targets built by tests/fuzz/build.sh (in build/fuzz/, or $FUZZ_OUT).
#   tests/fuzz/run.sh replay [TARGET...]           every committed seed of tests/fuzz/corpus/ once
#   tests/fuzz/run.sh fuzz SECONDS [TARGET...]     libFuzzer for SECONDS per target (clang builds only);
#                                                  new inputs go to build/fuzz/work/<target>, findings
#                                                  to build/fuzz/artifacts/
# Exits non-zero if any target reports a sanitizer error, a range violation, a crash or a hang.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${FUZZ_OUT:-build/fuzz}
ALL="cpu per_cpu meminfo diskstats netdev loadavg process process_tree pressure cgroup_memory cgroup_cpu cgroup_io vmstat"
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
cmd=${1:-}
shift || true
[[ $cmd == fuzz ]] && { secs=${1:?usage: run.sh fuzz SECONDS [TARGET...]}; shift; }
targets=${*:-$ALL}
[[ -x $OUT/fuzz_cpu ]] || { echo "run.sh: no fuzz targets in $OUT; run tests/fuzz/build.sh first" >&2; exit 2; }
failed=()
case $cmd in
  replay)
    for t in $targets; do
      files=(tests/fuzz/corpus/"$t"/*)
      if "$OUT/fuzz_$t" "${files[@]}" >"$OUT/replay_$t.log" 2>&1; then
        echo "replay $t: ${#files[@]} inputs, clean"
      else
        echo "replay $t: FAILED (full log: $OUT/replay_$t.log)"
        grep -E '=== range violation|runtime error|ERROR: AddressSanitizer|ERROR: LeakSanitizer|^Running: ' "$OUT/replay_$t.log" |
          grep -B1 -E 'violation|error|ERROR' | head -6
        failed+=("$t")
      fi
    done ;;
  fuzz)
    [[ $(cat "$OUT/mode" 2>/dev/null) == libfuzzer ]] || { echo "run.sh: fuzzing needs the clang build" >&2; exit 2; }
    mkdir -p "$OUT/artifacts"
    printf '%-14s %10s %10s  %s\n' target inputs exec/s result
    for t in $targets; do
      mkdir -p "$OUT/work/$t"
      log="$OUT/fuzz_$t.log"
      "$OUT/fuzz_$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -dict="tests/fuzz/dict/$t.dict" -artifact_prefix="$OUT/artifacts/$t-" \
        "$OUT/work/$t" "tests/fuzz/corpus/$t" >"$log" 2>&1
      rc=$?
      runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
      eps=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
      if ((rc == 0)); then res=clean; else
        res="FAILED: $(grep -m1 -E '=== range violation|runtime error|ERROR: [A-Za-z]+Sanitizer|ERROR: libFuzzer' "$log" | cut -c1-160)"
        failed+=("$t")
      fi
      printf '%-14s %10s %10s  %s\n' "$t" "${runs:-?}" "${eps:-?}" "$res"
    done ;;
  *) echo "usage: run.sh replay [TARGET...] | run.sh fuzz SECONDS [TARGET...]" >&2; exit 2 ;;
esac
if ((${#failed[@]})); then echo "failed: ${failed[*]}"; exit 1; fi
