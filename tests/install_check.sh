#!/usr/bin/env bash
# Checks that cogwheel can be used from outside the repository, by each route a user has. Every
# route builds and runs tests/install/consumer.cpp:
#   1. cmake --install into a temporary prefix, then find_package(cogwheel) (CMAKE_PREFIX_PATH),
#      and the cogwheel.pc it installs through pkg-config;
#   2. meson install into another temporary prefix, then pkg-config (PKG_CONFIG_PATH);
#   3. a Meson parent project with cogwheel as a subproject (a copy of the tracked files);
#   4. a CMake parent project with add_subdirectory(<repo>).
# Installs relocate: route 1 installs again with `cmake --install --prefix` elsewhere and route 2
# moves its installed tree, each then used through pkg-config alone. The Redis client
# is always built, so every route must also ship it: tests/install/redis_consumer.cpp
# is built and run through cogwheel::redis, the cogwheel-redis pkg-config module and Meson's
# dependency('cogwheel-redis'). The Redis client speaks TLS where cogwheel::tls is built (OpenSSL
# 3 found): route 1c builds without it (COGWHEEL_TLS=OFF) and checks that nothing installed
# then names cogwheel::tls or cogwheel-tls, and redis_consumer checks which it got. Where
# cogwheel::tls is built, every route ships it too: tests/install/tls_consumer.cpp is built and
# run through cogwheel::tls (find_package and add_subdirectory), the cogwheel-tls pkg-config
# module and Meson's dependency('cogwheel-tls'); route 1c also checks that asking
# find_package for the tls component there fails with a message that names it.
# Also checks that only libraries, headers and package files are installed, and that a
# subproject builds no tests, examples or benchmarks. Build trees that compile cogwheel (those
# of routes 3 and 4 included) go under build/install-*, the prefixes and the consumers' builds
# under one mktemp directory, removed at exit.
# Non-interactive; prints each check; exits non-zero on the first failure. A consumer exiting
# 77 (no io_uring in this kernel or sandbox) is reported as built but not run.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

jobs=$(nproc)
# The CMake routes build the libraries with the flags of CI's Release build (tests/ci.sh:
# Release, warnings as errors) and through ccache when it is there, so that in CI they are
# cache hits of that build rather than three more compiles of the same files. (Meson's routes
# use ccache by themselves.) Paths under the checkout are hashed relative to it.
cmake_flags=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DCOGWHEEL_WERROR=ON)
if command -v ccache >/dev/null; then
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$repo}
  cmake_flags+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/cogwheel-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
check() { echo; echo "== $*"; }
# The Redis client is always built (its RESP parser is its own), so it must always be installed.
with_redis=true
# What redis_consumer must find (redis::tls_supported()): TLS wherever OpenSSL 3 is found.
if pkg-config --exists 'openssl >= 3'; then export COGWHEEL_EXPECT_REDIS_TLS=1; else export COGWHEEL_EXPECT_REDIS_TLS=0; fi
# Whether cogwheel::tls is built (and so must be installed and usable by every route).
with_tls=false
if [ "$COGWHEEL_EXPECT_REDIS_TLS" = 1 ]; then with_tls=true; fi
fail() { echo "FAIL: $*" >&2; exit 1; }
# run_consumer <executable>: runs it; 77 counts as skipped, anything else non-zero fails.
run_consumer() {
  local rc=0
  "$1" || rc=$?
  if [ "$rc" -eq 77 ]; then
    echo "skipped running $1: io_uring unavailable (the build and link were checked)"
  elif [ "$rc" -ne 0 ]; then
    fail "$1 exited with $rc"
  fi
}
# check_installed <prefix> [notls]: the libraries, the umbrella header and nothing executable;
# cogwheel::tls too where OpenSSL 3 is found, unless `notls` (a build with COGWHEEL_TLS=OFF).
check_installed() {
  local prefix=$1 lib
  for lib in timer runtime io; do
    [ -n "$(find "$prefix" -name "libcogwheel_$lib.*" -print -quit)" ] || fail "libcogwheel_$lib not installed"
  done
  [ -f "$prefix/include/cogwheel/cogwheel.hpp" ] || fail "<cogwheel/cogwheel.hpp> not installed"
  [ -f "$prefix/include/cogwheel/timer/wheel.hpp" ] || fail "<cogwheel/timer/wheel.hpp> not installed"
  [ -n "$(find "$prefix" -name cogwheel.pc -print -quit)" ] || fail "cogwheel.pc not installed"
  if $with_redis; then
    [ -n "$(find "$prefix" -name "libcogwheel_redis.*" -print -quit)" ] || fail "libcogwheel_redis not installed"
    [ -f "$prefix/include/cogwheel/redis/client.hpp" ] || fail "<cogwheel/redis/client.hpp> not installed"
    [ -n "$(find "$prefix" -name cogwheel-redis.pc -print -quit)" ] || fail "cogwheel-redis.pc not installed"
  fi
  if [ -d "$prefix/bin" ] || [ -n "$(find "$prefix" -type f -perm -u+x ! -name '*.so*' -print -quit)" ]; then
    fail "something executable was installed under $prefix (tests, examples or benchmarks?)"
  fi
  if [ "${2:-}" != notls ] && pkg-config --exists 'openssl >= 3'; then  # cogwheel::tls is built and installed with it
    [ -n "$(find "$prefix" -name "libcogwheel_tls.*" -print -quit)" ] || fail "libcogwheel_tls not installed"
    [ -f "$prefix/include/cogwheel/tls/stream.hpp" ] || fail "<cogwheel/tls/stream.hpp> not installed"
    [ -n "$(find "$prefix" -name cogwheel-tls.pc -print -quit)" ] || fail "cogwheel-tls.pc not installed"
  fi
  echo "installed: $(find "$prefix" -type f -path '*/lib*' | sed "s|^$prefix/||" | sort | tr '\n' ' ')"
  echo "           + $(find "$prefix/include" -name '*.hpp' | wc -l) headers under include/cogwheel"
}
# pkgconfig_consumers <prefix> <output stem>: builds and runs consumer.cpp through cogwheel.pc,
# with the Redis client redis_consumer.cpp through cogwheel-redis.pc and, where <prefix> has
# cogwheel-tls.pc (check_installed requires it wherever TLS is built), tls_consumer.cpp through
# it, all found in <prefix> only.
pkgconfig_consumers() {
  local pc tls=false
  pc=$(find "$1" -name cogwheel.pc -print -quit)
  if [ -n "$(find "$1" -name cogwheel-tls.pc -print -quit)" ]; then tls=true; fi
  PKG_CONFIG_PATH="$(dirname "$pc")${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  export PKG_CONFIG_PATH
  echo "pkg-config --cflags --libs cogwheel: $(pkg-config --cflags --libs cogwheel)"
  bash tests/install/pkgconfig/build.sh "$2"
  if $with_redis; then
    bash tests/install/pkgconfig/build.sh "$2-redis" tests/install/redis_consumer.cpp cogwheel-redis
  fi
  if $tls; then
    echo "pkg-config --libs cogwheel-tls: $(pkg-config --libs cogwheel-tls)"
    bash tests/install/pkgconfig/build.sh "$2-tls" tests/install/tls_consumer.cpp cogwheel-tls
  fi
  unset PKG_CONFIG_PATH
  run_consumer "$2"
  if $with_redis; then run_consumer "$2-redis"; fi
  if $tls; then run_consumer "$2-tls"; fi
}

check "1. cmake --install, find_package(cogwheel) from a consumer project"
cmake -S . -B build/install-cmake "${cmake_flags[@]}" \
  -DCMAKE_INSTALL_PREFIX="$tmp/cmake-prefix" \
  -DCOGWHEEL_BUILD_TESTS=OFF -DCOGWHEEL_BUILD_EXAMPLES=OFF -DCOGWHEEL_BENCH=OFF >/dev/null
cmake --build build/install-cmake -j "$jobs" >/dev/null
cmake --install build/install-cmake >/dev/null
check_installed "$tmp/cmake-prefix"
cmake -S tests/install/cmake -B "$tmp/consumer-cmake" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$tmp/cmake-prefix" >/dev/null
grep -q "cogwheel_DIR:PATH=$tmp/cmake-prefix/" "$tmp/consumer-cmake/CMakeCache.txt" \
  || fail "find_package(cogwheel) did not use the installed package"
cmake --build "$tmp/consumer-cmake" >"$tmp/consumer-cmake.log" || { cat "$tmp/consumer-cmake.log"; fail "the find_package consumer did not build"; }
run_consumer "$tmp/consumer-cmake/consumer"
if $with_redis; then
  [ -x "$tmp/consumer-cmake/redis_consumer" ] || fail "find_package(cogwheel) gave no cogwheel::redis"
  run_consumer "$tmp/consumer-cmake/redis_consumer"
fi
if $with_tls; then
  [ -x "$tmp/consumer-cmake/tls_consumer" ] || fail "find_package(cogwheel) gave no cogwheel::tls"
  run_consumer "$tmp/consumer-cmake/tls_consumer"
fi
# The CMake install ships cogwheel.pc (and cogwheel-redis.pc) too: a user of that route who
# builds with pkg-config.
pkgconfig_consumers "$tmp/cmake-prefix" "$tmp/consumer-cmake-pkgconfig"

if $with_tls; then  # find_package(cogwheel REQUIRED COMPONENTS tls), as the README says
  mkdir -p "$tmp/tls-find-package"
  printf '%s\n' 'cmake_minimum_required(VERSION 3.25)' 'project(tls_consumer LANGUAGES CXX)' \
    'find_package(cogwheel 0.1 REQUIRED COMPONENTS tls)' 'add_executable(tls_consumer main.cpp)' \
    'target_link_libraries(tls_consumer PRIVATE cogwheel::tls)' > "$tmp/tls-find-package/CMakeLists.txt"
  cp tests/install/tls_consumer.cpp "$tmp/tls-find-package/main.cpp"
  cmake -S "$tmp/tls-find-package" -B "$tmp/tls-find-package/build" -G Ninja \
    -DCMAKE_PREFIX_PATH="$tmp/cmake-prefix" >/dev/null
  cmake --build "$tmp/tls-find-package/build" >/dev/null
  run_consumer "$tmp/tls-find-package/build/tls_consumer"
  echo "find_package(cogwheel COMPONENTS tls): built and ran tls_consumer"
fi

check "1b. cmake --install --prefix elsewhere (not the configured prefix), used through pkg-config"
cmake --install build/install-cmake --prefix "$tmp/elsewhere" >/dev/null
check_installed "$tmp/elsewhere"
if grep -rq "$tmp/cmake-prefix" "$tmp/elsewhere"; then
  fail "files installed elsewhere still name the configured prefix: $(grep -rl "$tmp/cmake-prefix" "$tmp/elsewhere")"
fi
pkgconfig_consumers "$tmp/elsewhere" "$tmp/consumer-elsewhere"

check "1c. without OpenSSL (COGWHEEL_TLS=OFF): the Redis client installs and links without cogwheel::tls"
cmake -S . -B build/install-notls "${cmake_flags[@]}" -DCOGWHEEL_TLS=OFF \
  -DCMAKE_INSTALL_PREFIX="$tmp/notls-prefix" \
  -DCOGWHEEL_BUILD_TESTS=OFF -DCOGWHEEL_BUILD_EXAMPLES=OFF -DCOGWHEEL_BENCH=OFF >/dev/null
cmake --build build/install-notls -j "$jobs" >/dev/null
cmake --install build/install-notls >/dev/null
check_installed "$tmp/notls-prefix" notls
[ -z "$(find "$tmp/notls-prefix" -name 'libcogwheel_tls.*' -print -quit)" ] || fail "cogwheel::tls installed with COGWHEEL_TLS=OFF"
redis_files=$(find "$tmp/notls-prefix" -name 'cogwheelRedisTargets*.cmake' -o -name cogwheel-redis.pc)
[ -n "$redis_files" ] || fail "no Redis package files installed"
# shellcheck disable=SC2086
if grep -lE "cogwheel::tls|cogwheel-tls|ssl" $redis_files; then fail "the Redis package files above name TLS in a build without it"; fi
COGWHEEL_EXPECT_REDIS_TLS=0
pkgconfig_consumers "$tmp/notls-prefix" "$tmp/consumer-notls"
cmake -S tests/install/cmake -B "$tmp/consumer-notls-cmake" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$tmp/notls-prefix" >/dev/null
cmake --build "$tmp/consumer-notls-cmake" >/dev/null
run_consumer "$tmp/consumer-notls-cmake/redis_consumer"
[ ! -e "$tmp/consumer-notls-cmake/tls_consumer" ] || fail "find_package(cogwheel) gave cogwheel::tls in a build without it"
# Asking for the tls component there fails, and the message says which components exist.
mkdir -p "$tmp/notls-find-tls"
printf '%s\n' 'cmake_minimum_required(VERSION 3.25)' 'project(tls_consumer LANGUAGES CXX)' \
  'find_package(cogwheel 0.1 REQUIRED COMPONENTS tls)' > "$tmp/notls-find-tls/CMakeLists.txt"
if cmake -S "$tmp/notls-find-tls" -B "$tmp/notls-find-tls/build" -G Ninja \
  -DCMAKE_PREFIX_PATH="$tmp/notls-prefix" >"$tmp/notls-find-tls.log" 2>&1; then
  fail "find_package(cogwheel COMPONENTS tls) succeeded in a build without TLS"
fi
grep -q "timer, runtime, io, tls" "$tmp/notls-find-tls.log" \
  || { cat "$tmp/notls-find-tls.log"; fail "find_package's message does not name the tls component"; }
echo "find_package(cogwheel COMPONENTS tls) without TLS: fails, naming the components"
if pkg-config --exists 'openssl >= 3'; then COGWHEEL_EXPECT_REDIS_TLS=1; fi
if [ "$COGWHEEL_EXPECT_REDIS_TLS" = 1 ]; then  # and the build with TLS says so in its package files
  grep -q "cogwheel-tls" "$(find "$tmp/cmake-prefix" -name cogwheel-redis.pc -print -quit)" \
    || fail "cogwheel-redis.pc of the build with TLS does not require cogwheel-tls"
fi

check "2. meson install, cogwheel.pc through pkg-config"
meson_options=(-Dbuildtype=release "-Dprefix=$tmp/meson-prefix" -Dtests=false -Dexamples=false -Dbench=false)
if [ -d build/install-meson ]; then
  meson configure build/install-meson "${meson_options[@]}" >/dev/null
else
  meson setup build/install-meson "${meson_options[@]}" >/dev/null
fi
meson compile -C build/install-meson -j "$jobs" >/dev/null
meson install -C build/install-meson --quiet >/dev/null
check_installed "$tmp/meson-prefix"
# Moved after the install: the .pc files find the prefix from where they are.
mv "$tmp/meson-prefix" "$tmp/meson-moved"
pkgconfig_consumers "$tmp/meson-moved" "$tmp/consumer-pkgconfig"

check "3. Meson parent project, cogwheel as a subproject"
# Under build/ (not the temporary directory), so that a later run's compiles are ccache hits.
rm -rf build/install-meson-parent
parent=$repo/build/install-meson-parent/src
parent_build=build/install-meson-parent/build
mkdir -p "$parent/subprojects/cogwheel"
cp tests/install/meson-subproject/meson.build tests/install/consumer.cpp tests/install/redis_consumer.cpp \
  tests/install/tls_consumer.cpp "$parent/"
# The tracked files as they are in the working tree: what a checkout would give.
git ls-files -z | while IFS= read -r -d '' f; do
  [ -e "$f" ] && printf '%s\0' "$f"
done | xargs -0 cp --parents -t "$parent/subprojects/cogwheel"
meson setup "$parent_build" "$parent" --force-fallback-for=cogwheel,cogwheel-redis,cogwheel-tls >/dev/null
meson compile -C "$parent_build" -j "$jobs" >/dev/null
targets=$(meson introspect "$parent_build" --targets |
  python3 -c 'import json, sys; print(" ".join(sorted(t["name"] for t in json.load(sys.stdin))))')
echo "targets: $targets"
# cogwheel_redis joins them (a library, not a program), and so does the Redis client's consumer.
if $with_redis; then
  [[ " $targets " == *" cogwheel_redis "* && " $targets " == *" redis_consumer "* ]] \
    || fail "the subproject gave no dependency('cogwheel-redis')"
fi
# So do cogwheel_tls and the TLS consumer, where TLS is built.
if $with_tls; then
  [[ " $targets " == *" cogwheel_tls "* && " $targets " == *" tls_consumer"* ]] \
    || fail "the subproject gave no dependency('cogwheel-tls')"
fi
targets=$(echo "$targets" | sed 's/ cogwheel_redis//; s/ redis_consumer//; s/ cogwheel_tls//; s/ tls_consumer//')
[ "$targets" = "cogwheel_io cogwheel_runtime cogwheel_timer consumer consumer_get_variable" ] \
  || fail "the subproject built more than its libraries"
run_consumer "$parent_build/consumer"
run_consumer "$parent_build/consumer_get_variable"
if $with_redis; then run_consumer "$parent_build/redis_consumer"; fi
if $with_tls; then run_consumer "$parent_build/tls_consumer"; fi

check "4. CMake parent project, add_subdirectory(cogwheel)"
# Under build/ like the other builds of cogwheel itself: its compiles are cache hits too.
subdir=build/install-subdir
rm -rf "$subdir"
cmake -S tests/install/cmake -B "$subdir" "${cmake_flags[@]}" -DCOGWHEEL_SOURCE_DIR="$repo" >/dev/null
for t in $(ninja -C "$subdir" -t targets all | sed -n 's/^\(.*\): CXX_EXECUTABLE_LINKER.*/\1/p'); do
  [ "$t" = consumer ] || [ "$t" = redis_consumer ] || [ "$t" = tls_consumer ] \
    || fail "the add_subdirectory build defines executable $t"
done
cmake --build "$subdir" -j "$jobs" >/dev/null
run_consumer "$subdir/consumer"
if $with_redis; then run_consumer "$subdir/redis_consumer"; fi
if $with_tls; then
  [ -x "$subdir/tls_consumer" ] || fail "add_subdirectory(cogwheel) gave no cogwheel::tls"
  run_consumer "$subdir/tls_consumer"
fi

echo
echo "== all install checks passed"
