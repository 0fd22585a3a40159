#!/usr/bin/env bash
# The test command of README.md, and what CI runs: installs what is missing, then
#   1. CMake Release build (g++, -Werror) and every test; then the runtime, io, HTTP and
#      Redis tests again on the epoll backend (COGWHEEL_BACKEND=epoll);
#   2. Meson Debug build with clang-16 (-O1, -Werror, -fsanitize=address,undefined) and every
#      test again, then again on epoll;
#   3. CMake Debug build with g++ (-Werror, -DCOGWHEEL_SANITIZE=address,undefined, as README
#      documents it): the libraries, the examples and one test per library, on both backends;
#   4. CMake Debug build with -fsanitize=thread and the multi-core tests (label multicore), on
#      both backends;
#   5. the libFuzzer targets (clang-16) for a bounded time each: the timer differential, the
#      RESP parser, the HTTP request parser;
#   6. installs by each route (CMake package, pkg-config, Meson subproject) and builds an
#      outside program against each (tests/install_check.sh);
#   7. the API reference (Doxygen): an undocumented public name in a header listed in
#      tests/api_documented.txt is an error (tests/api_docs.sh).
# Build trees go under build/ci-*. Prints a summary line per stage; exits non-zero on failure.
set -euo pipefail
cd "$(dirname "$0")/.."
source tests/deps.sh

jobs=$(nproc)
# ccache (tests/deps.sh installs it): Meson uses it on its own when it is on PATH; the CMake
# builds get it as their compiler launcher. Paths under the checkout are hashed relative to
# it, so a fresh clone anywhere reuses what an earlier run compiled; within one run, the
# install routes' Release builds of the libraries are hits of the Release stage's (the same
# flags: tests/install_check.sh). Without ccache everything still builds, only slower.
cmake_launcher=()
if command -v ccache >/dev/null; then
  export CCACHE_BASEDIR=$PWD
  # What this run's compiles found in the cache, printed at the end (ccache --show-log-stats).
  export CCACHE_STATSLOG=$PWD/build/ci-ccache-stats.log
  mkdir -p build && rm -f "$CCACHE_STATSLOG"
  cmake_launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
# The fuzzers keep their corpora under build/ci-fuzz, so a run starts where the last one stopped:
# 30 s (15 s for the parsers) per run, COGWHEEL_FUZZ_SECONDS for a longer campaign.
fuzz_seconds=${COGWHEEL_FUZZ_SECONDS:-30}
started=$SECONDS
# Each stage's header says how long CI has run so far (CI has a 30-minute budget) and the CPU
# time it has used (user + system, of every command waited for): on a shared machine the CPU
# time of a stage is the steadier measure of its cost.
cpu_file=$(mktemp)
trap 'rm -f "$cpu_file"' EXIT
# `times >"$cpu_file"` first, in this shell (a subshell's `times` does not count this one's
# children), then $(cpu_seconds).
cpu_seconds() {
  awk 'NR == 2 { split($1, u, /[ms]/); split($2, s, /[ms]/); printf "%.0f", u[1] * 60 + u[2] + s[1] * 60 + s[2] }' "$cpu_file"
}
stage() { times >"$cpu_file"; echo; echo "== [$((SECONDS - started)) s, $(cpu_seconds) s CPU] $*"; }
# ctest with its output kept, then one line: how many tests ran, passed and were skipped (a
# skipped test exits 77: a missing kernel feature or server, never counted as passed).
ctest_counted() {
  local log
  log=$(mktemp)
  set +e
  ctest "$@" 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  set -e
  local total skipped
  total=$(grep -Eo 'tests failed out of [0-9]+' "$log" | grep -Eo '[0-9]+$' || echo 0)
  skipped=$(grep -c 'Skipped  ' "$log" || true)
  echo "== tests: ${total} ran, ${skipped} skipped"
  rm -f "$log"
  return "$rc"
}

stage "cmake release (g++)"
cmake -S . -B build/ci-release -G Ninja -DCMAKE_BUILD_TYPE=Release -DCOGWHEEL_WERROR=ON \
  "${cmake_launcher[@]}" >/dev/null
cmake --build build/ci-release -j "$jobs"
(cd build/ci-release && ctest_counted --output-on-failure -j "$jobs")

# The tests of io_uring's own ring (its SQ/CQ counters, injected io_uring_submit faults) are
# left out on epoll, which has no ring; every other test runs unchanged.
ring_only='-loop.tiny_ring*:loop.a_frame_destroyed*'
backend_labels='runtime|io|http|redis|tls|multicore'

stage "cmake release (g++), epoll backend"
(cd build/ci-release && COGWHEEL_BACKEND=epoll GTEST_FILTER="$ring_only" \
  ctest_counted --output-on-failure -j "$jobs" -L "$backend_labels")

# One build serves three checks: the Meson route builds every library, test and example; clang 16
# builds them all with -Werror; and ASan+UBSan run every test, on both backends. (clang compiles
# the sanitized tree in about half g++'s time; g++ stays the reference compiler of the Release
# stage above and the TSan stage below.)
stage "meson debug (clang-16) + address,undefined sanitizers"
if [ ! -d build/ci-meson-asan ]; then
  CXX=clang++-16 CC=clang-16 meson setup build/ci-meson-asan --buildtype=debug -Doptimization=1 \
    -Db_sanitize=address,undefined -Db_lundef=false -Dwerror=true -Dbench=false \
    -Dcpp_args=-fno-sanitize-recover=all -Dcpp_link_args=-fno-sanitize-recover=all >/dev/null
fi
meson compile -C build/ci-meson-asan -j "$jobs"
sanitized=(env ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1
  "COGWHEEL_TEST_SCALE=${COGWHEEL_TEST_SCALE:-0.1}")
"${sanitized[@]}" meson test -C build/ci-meson-asan --print-errorlogs --num-processes "$jobs"
stage "meson debug (clang-16) + address,undefined sanitizers, epoll backend"
"${sanitized[@]}" COGWHEEL_BACKEND=epoll GTEST_FILTER="$ring_only" meson test -C build/ci-meson-asan \
  --print-errorlogs --num-processes "$jobs" --suite runtime --suite io --suite http --suite redis --suite tls

# g++ compiles what clang does not (and the reverse) under -fsanitize: g++ 12 does not fold a
# function pointer's comparison with null into a constant expression under UBSan, so the
# sanitized build README documents is built here with g++ too, through CMake as README gives it.
# Its libraries and examples are all built; of the tests one per library runs (each among the
# cheaper to compile: the whole suite runs sanitized in the clang stage above), on both
# backends. At -O0: what this stage is for is what the compiler accepts, and g++ compiles a
# sanitized test about 2.7x faster than at -O1 (37 s against 14 s of CPU for io_tcp_test).
stage "cmake debug (g++) + address,undefined sanitizers: libraries, examples, one test per library"
cmake -S . -B build/ci-gcc-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug \
  -DCOGWHEEL_SANITIZE=address,undefined -DCOGWHEEL_BENCH=OFF -DCOGWHEEL_WERROR=ON "${cmake_launcher[@]}" >/dev/null
gcc_asan_tests='^(timer_expire_registry_test|runtime_timeout_test|io_tcp_test|tls_failure_test|redis_client_test)$'
# Those of them that are configured (tls_failure_test needs OpenSSL 3), and every library and
# example folder there is (tls/ likewise).
mapfile -t gcc_asan_targets < <(cd build/ci-gcc-asan && ctest -N -R "$gcc_asan_tests" | sed -n 's/^ *Test *#[0-9]*: //p')
mapfile -t -O "${#gcc_asan_targets[@]}" gcc_asan_targets < <(ninja -C build/ci-gcc-asan -t targets all |
  sed -n 's#^\(\(timer\|runtime\|io\|tls\|redis\|examples\)/all\): phony$#\1#p')
cmake --build build/ci-gcc-asan -j "$jobs" --target "${gcc_asan_targets[@]}"
(cd build/ci-gcc-asan && export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  COGWHEEL_TEST_SCALE="${COGWHEEL_TEST_SCALE:-0.1}" &&
  ctest_counted -R "$gcc_asan_tests" --output-on-failure -j "$jobs" &&
  COGWHEEL_BACKEND=epoll GTEST_FILTER="$ring_only" ctest_counted -R "$gcc_asan_tests" --output-on-failure -j "$jobs")

stage "cmake debug + thread sanitizer (multicore tests)"
cmake -S . -B build/ci-tsan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS=-O1 \
  -DCOGWHEEL_SANITIZE=thread -DCOGWHEEL_BENCH=OFF -DCOGWHEEL_WERROR=ON "${cmake_launcher[@]}" >/dev/null
# Only what runs there: the tests labelled multicore (each test is named as its target), so
# a test given the label is built here without this list being edited.
mapfile -t tsan_targets < <(cd build/ci-tsan && ctest -N -L multicore | sed -n 's/^ *Test *#[0-9]*: //p')
cmake --build build/ci-tsan -j "$jobs" --target "${tsan_targets[@]}"
(cd build/ci-tsan && TSAN_OPTIONS=halt_on_error=1 ctest_counted -L multicore --output-on-failure -j "$jobs")
(cd build/ci-tsan && TSAN_OPTIONS=halt_on_error=1 COGWHEEL_BACKEND=epoll \
  ctest_counted -L multicore --output-on-failure -j "$jobs")

if [ -d tests/fuzz ]; then
  stage "libFuzzer: timer differential ${fuzz_seconds}s, RESP and HTTP parsers $((fuzz_seconds / 2))s each, expiry_map $((fuzz_seconds / 4))s (clang-16)"
  cmake -S . -B build/ci-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_COMPILER=clang++-16 -DCOGWHEEL_FUZZ=ON -DCOGWHEEL_BENCH=OFF -DCOGWHEEL_WERROR=ON \
    "${cmake_launcher[@]}" >/dev/null
  fuzz_targets=(timer_fuzz resp_fuzz expiry_map_fuzz)
  # The HTTP target exists where Node's http_parser does (libhttp-parser-dev, which deps.sh installs).
  cmake --build build/ci-fuzz --target help > build/ci-fuzz/targets.txt
  if grep -q 'http_request_fuzz' build/ci-fuzz/targets.txt; then fuzz_targets+=(http_request_fuzz); fi
  cmake --build build/ci-fuzz -j "$jobs" --target "${fuzz_targets[@]}"
  mkdir -p build/ci-fuzz/corpus build/ci-fuzz/resp-corpus build/ci-fuzz/http-corpus build/ci-fuzz/expiry-corpus
  build/ci-fuzz/tests/fuzz/timer_fuzz -max_total_time="$fuzz_seconds" -print_final_stats=1 \
    build/ci-fuzz/corpus 2>&1 | tail -n 15
  # The RESP parser: chunking must not change a parse, and no header may allocate what it
  # announces (-malloc_limit_mb: any single allocation past 64 MiB fails the run).
  build/ci-fuzz/tests/fuzz/resp_fuzz -max_total_time="$((fuzz_seconds / 2))" -malloc_limit_mb=64 \
    -print_final_stats=1 build/ci-fuzz/resp-corpus 2>&1 | tail -n 15
  # The HTTP request parser: whole, byte by byte, in random reads and without the simple-head
  # shortcut, every stream must parse the same (a request smuggled past one of them differs).
  if [ -x build/ci-fuzz/tests/fuzz/http_request_fuzz ]; then
    build/ci-fuzz/tests/fuzz/http_request_fuzz -max_total_time="$((fuzz_seconds / 2))" -malloc_limit_mb=64 \
      -print_final_stats=1 build/ci-fuzz/http-corpus 2>&1 | tail -n 15
  else
    echo "http_request_fuzz: skipped (libhttp-parser-dev missing)"
  fi
  # expiry_map against its reference model (tests/runtime/expiry_map_model.hpp), both queues.
  build/ci-fuzz/tests/fuzz/expiry_map_fuzz -max_total_time="$((fuzz_seconds / 4))" -print_final_stats=1 \
    build/ci-fuzz/expiry-corpus 2>&1 | tail -n 15
fi

stage "install routes (CMake package, pkg-config, Meson subproject)"
bash tests/install_check.sh

# The public headers listed in tests/api_documented.txt have a doc comment on every public name:
# Doxygen's warnings about them fail this stage (detail/ namespaces and folders are not part of
# the contract and are left out). Until every header is listed, the full list of what is left is
# printed first (it does not fail the stage).
mapfile -t api_documented < <(grep -v '^#' tests/api_documented.txt)
stage "API reference (Doxygen): what is left undocumented in every public header"
bash tests/api_docs.sh build/ci-docs-all
stage "API reference (Doxygen, warnings as errors) for the documented headers"
bash tests/api_docs.sh --check build/ci-docs "${api_documented[@]}"

if [ ${#cmake_launcher[@]} -gt 0 ]; then
  echo
  echo "== ccache, this run's compiles:"
  ccache --show-log-stats 2>/dev/null | grep -E 'Hits|Misses|Cacheable' || true
fi

times >"$cpu_file"
echo
echo "== [$((SECONDS - started)) s, $(cpu_seconds) s CPU] all stages passed"
