#!/usr/bin/env bash
# Builds one fuzz target per parser into build/fuzz/ (or $FUZZ_OUT), under ASan + UBSan.
#   tests/fuzz/build.sh            libFuzzer binaries with clang++ (-fsanitize=fuzzer,address,undefined);
#                                  without clang, replay-only binaries with $CXX (default g++)
#   tests/fuzz/build.sh --replay   replay-only binaries with $CXX even where clang exists
# Each binary runs the files named on its command line once (libFuzzer's behaviour for file
# arguments); a libFuzzer binary given a directory fuzzes with it as the corpus.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${FUZZ_OUT:-build/fuzz}
TARGETS="cpu per_cpu meminfo diskstats netdev loadavg process process_tree pressure cgroup_memory cgroup_cpu cgroup_io vmstat"
MODE=libfuzzer
if [[ "${1:-}" == "--replay" ]] || ! command -v "${FUZZ_CLANG:-clang++}" >/dev/null 2>&1; then MODE=replay; fi

# The channel and GPU metric tables generated from the registry and sysprof/sampling/gpu_metrics.py (as
# csrc/CMakeLists.txt does): each rewritten only when it changes.
GEN="$OUT/generated"
"${PYTHON:-python3}" csrc/gen/gen_channels.py "$GEN/gen/channels.hpp"
"${PYTHON:-python3}" csrc/gen/gen_gpu_metrics.py "$GEN/gen/gpu_metrics.hpp"

SAN="-fsanitize=address,undefined,float-cast-overflow -fno-sanitize-recover=all -fno-omit-frame-pointer"
CFLAGS="-std=c++17 -O1 -g -pthread -Icsrc -I$GEN $SAN"
if [[ $MODE == libfuzzer ]]; then
  CXX=${FUZZ_CLANG:-clang++}
  OBJ_FLAGS="$CFLAGS -fsanitize=fuzzer-no-link"
  LINK_FLAGS="$SAN -fsanitize=fuzzer -pthread"
else
  CXX=${CXX:-g++}
  OBJ_FLAGS="$CFLAGS"
  LINK_FLAGS="$SAN -pthread"
fi
mkdir -p "$OUT/obj"
echo "$MODE" > "$OUT/mode"
JOBS=$(nproc 2>/dev/null || echo 2)

# Objects of every csrc/**/*.cpp but the Python bindings, rebuilt when a csrc file is newer.
SRCS=$(find csrc -name "*.cpp" ! -name bindings.cpp ! -path "csrc/tests/*" | sort)
stamp="$OUT/obj/flags"
if [[ ! -f $stamp || "$(cat "$stamp")" != "$CXX $OBJ_FLAGS" ]]; then rm -f "$OUT"/obj/*.o; echo "$CXX $OBJ_FLAGS" > "$stamp"; fi
newest_header=$(ls -t $(find csrc "$GEN" -name "*.hpp") tests/fuzz/*.cpp | head -1)
jobs=()
for s in $SRCS; do
  o="$OUT/obj/$(echo "${s%.cpp}" | tr / _).o"
  if [[ ! -f $o || $s -nt $o || $newest_header -nt $o ]]; then jobs+=("$CXX $OBJ_FLAGS -c $s -o $o"); fi
done
for t in $TARGETS; do
  o="$OUT/obj/harness_$t.o"
  if [[ ! -f $o || tests/fuzz/harness.cpp -nt $o || $newest_header -nt $o ]]; then
    jobs+=("$CXX $OBJ_FLAGS -DSYSPROF_FUZZ_TARGET=$t -c tests/fuzz/harness.cpp -o $o")
  fi
done
if [[ $MODE == replay ]]; then jobs+=("$CXX $OBJ_FLAGS -c tests/fuzz/replay_main.cpp -o $OUT/obj/replay_main.o"); fi
if ((${#jobs[@]})); then printf '%s\n' "${jobs[@]}" | xargs -P "$JOBS" -I{} sh -c '{}'; fi

LIB_OBJS=$(for s in $SRCS; do echo "$OUT/obj/$(echo "${s%.cpp}" | tr / _).o"; done)
MAIN=""
[[ $MODE == replay ]] && MAIN="$OUT/obj/replay_main.o"
pids=()
for t in $TARGETS; do
  # shellcheck disable=SC2086
  $CXX $LINK_FLAGS -o "$OUT/fuzz_$t" "$OUT/obj/harness_$t.o" $MAIN $LIB_OBJS -ldl &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
echo "built ($MODE, $CXX): $(for t in $TARGETS; do printf 'fuzz_%s ' "$t"; done)in $OUT"
