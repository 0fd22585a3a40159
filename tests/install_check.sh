#!/usr/bin/env bash
# Checks that cogwheel can be used from outside the repository, by each route a user has. Every
# route builds and runs tests/install/consumer.cpp:
#   1. cmake --install into a temporary prefix, then find_package(cogwheel) (CMAKE_PREFIX_PATH),
#      and the cogwheel.pc it installs through pkg-config;
#   2. meson install into another temporary prefix, then pkg-config (PKG_CONFIG_PATH);
#   3. a Meson parent project with cogwheel as a subproject (a copy of the tracked files);
#   4. a CMake parent project with add_subdirectory(<repo>).
# Also checks that only libraries, headers and package files are installed, and that a
# subproject builds no tests, examples or benchmarks. Build trees of cogwheel itself go under
# build/install-*, everything else under one mktemp directory, removed at exit.
# Non-interactive; prints each check; exits non-zero on the first failure. A consumer exiting
# 77 (no io_uring in this kernel or sandbox) is reported as built but not run.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

jobs=$(nproc)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/cogwheel-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
check() { echo; echo "== $*"; }
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
# check_installed <prefix>: the libraries, the umbrella header and nothing executable.
check_installed() {
  local prefix=$1 lib
  for lib in timer runtime io; do
    [ -n "$(find "$prefix" -name "libcogwheel_$lib.*" -print -quit)" ] || fail "libcogwheel_$lib not installed"
  done
  [ -f "$prefix/include/cogwheel/cogwheel.hpp" ] || fail "<cogwheel/cogwheel.hpp> not installed"
  [ -f "$prefix/include/cogwheel/timer/wheel.hpp" ] || fail "<cogwheel/timer/wheel.hpp> not installed"
  if [ -d "$prefix/bin" ] || [ -n "$(find "$prefix" -type f -perm -u+x ! -name '*.so*' -print -quit)" ]; then
    fail "something executable was installed under $prefix (tests, examples or benchmarks?)"
  fi
  if pkg-config --exists 'openssl >= 3'; then  # cogwheel::tls is built and installed with it
    [ -n "$(find "$prefix" -name "libcogwheel_tls.*" -print -quit)" ] || fail "libcogwheel_tls not installed"
    [ -f "$prefix/include/cogwheel/tls/stream.hpp" ] || fail "<cogwheel/tls/stream.hpp> not installed"
    [ -n "$(find "$prefix" -name cogwheel-tls.pc -print -quit)" ] || fail "cogwheel-tls.pc not installed"
  fi
  echo "installed: $(find "$prefix" -type f -path '*/lib*' | sed "s|^$prefix/||" | sort | tr '\n' ' ')"
  echo "           + $(find "$prefix/include" -name '*.hpp' | wc -l) headers under include/cogwheel"
}

# check_tls_pkgconfig <prefix> <output>: a TLS program built through cogwheel-tls.pc alone.
check_tls_pkgconfig() {
  pkg-config --exists 'openssl >= 3' || return 0
  local pc
  pc=$(find "$1" -name cogwheel-tls.pc -print -quit)
  printf '%s\n' '#include <cogwheel/tls/stream.hpp>' \
    'int main() { auto c = cogwheel::tls::context::client(); return c && !c->is_server() ? 0 : 1; }' > "$2.cpp"
  # shellcheck disable=SC2046  # a list of compiler arguments: split it
  ${CXX:-c++} -std=c++20 -Wall -Wextra -Werror "$2.cpp" -o "$2" \
    $(PKG_CONFIG_PATH="$(dirname "$pc")" pkg-config --cflags --libs cogwheel-tls)
  "$2" || fail "$2 (a cogwheel-tls client context) exited with $?"
  echo "cogwheel-tls.pc: built and ran $2"
}

check "1. cmake --install, find_package(cogwheel) from a consumer project"
cmake -S . -B build/install-cmake -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_INSTALL_PREFIX="$tmp/cmake-prefix" \
  -DCOGWHEEL_BUILD_TESTS=OFF -DCOGWHEEL_BUILD_EXAMPLES=OFF -DCOGWHEEL_BENCH=OFF >/dev/null
cmake --build build/install-cmake -j "$jobs" >/dev/null
cmake --install build/install-cmake >/dev/null
check_installed "$tmp/cmake-prefix"
cmake -S tests/install/cmake -B "$tmp/consumer-cmake" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$tmp/cmake-prefix" >/dev/null
grep -q "cogwheel_DIR:PATH=$tmp/cmake-prefix/" "$tmp/consumer-cmake/CMakeCache.txt" \
  || fail "find_package(cogwheel) did not use the installed package"
cmake --build "$tmp/consumer-cmake" >/dev/null
run_consumer "$tmp/consumer-cmake/consumer"
# The CMake install ships cogwheel.pc too: a user of that route who builds with pkg-config.
pc=$(find "$tmp/cmake-prefix" -name cogwheel.pc -print -quit)
[ -n "$pc" ] || fail "cogwheel.pc not installed by cmake --install"
PKG_CONFIG_PATH="$(dirname "$pc")${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}" \
  bash tests/install/pkgconfig/build.sh "$tmp/consumer-cmake-pkgconfig"
run_consumer "$tmp/consumer-cmake-pkgconfig"
check_tls_pkgconfig "$tmp/cmake-prefix" "$tmp/tls-cmake-pkgconfig"
if pkg-config --exists 'openssl >= 3'; then  # find_package(cogwheel COMPONENTS tls)
  mkdir -p "$tmp/tls-find-package"
  printf '%s\n' 'cmake_minimum_required(VERSION 3.25)' 'project(tls_consumer LANGUAGES CXX)' \
    'find_package(cogwheel 0.1 REQUIRED COMPONENTS tls)' 'add_executable(tls_consumer main.cpp)' \
    'target_link_libraries(tls_consumer PRIVATE cogwheel::tls)' > "$tmp/tls-find-package/CMakeLists.txt"
  cp "$tmp/tls-cmake-pkgconfig.cpp" "$tmp/tls-find-package/main.cpp"
  cmake -S "$tmp/tls-find-package" -B "$tmp/tls-find-package/build" -G Ninja \
    -DCMAKE_PREFIX_PATH="$tmp/cmake-prefix" >/dev/null
  cmake --build "$tmp/tls-find-package/build" >/dev/null
  "$tmp/tls-find-package/build/tls_consumer" || fail "the find_package(cogwheel COMPONENTS tls) consumer failed"
  echo "find_package(cogwheel COMPONENTS tls): built and ran tls_consumer"
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
pc=$(find "$tmp/meson-prefix" -name cogwheel.pc -print -quit)
[ -n "$pc" ] || fail "cogwheel.pc not installed"
PKG_CONFIG_PATH="$(dirname "$pc")${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
export PKG_CONFIG_PATH
echo "pkg-config --cflags --libs cogwheel: $(pkg-config --cflags --libs cogwheel)"
bash tests/install/pkgconfig/build.sh "$tmp/consumer-pkgconfig"
unset PKG_CONFIG_PATH
run_consumer "$tmp/consumer-pkgconfig"
check_tls_pkgconfig "$tmp/meson-prefix" "$tmp/tls-meson-pkgconfig"

check "3. Meson parent project, cogwheel as a subproject"
parent=$tmp/meson-parent
mkdir -p "$parent/subprojects/cogwheel"
cp tests/install/meson-subproject/meson.build tests/install/consumer.cpp "$parent/"
# The tracked files as they are in the working tree: what a checkout would give.
git ls-files -z | while IFS= read -r -d '' f; do
  [ -e "$f" ] && printf '%s\0' "$f"
done | xargs -0 cp --parents -t "$parent/subprojects/cogwheel"
meson setup "$tmp/meson-parent-build" "$parent" --force-fallback-for=cogwheel >/dev/null
meson compile -C "$tmp/meson-parent-build" -j "$jobs" >/dev/null
targets=$(meson introspect "$tmp/meson-parent-build" --targets |
  python3 -c 'import json, sys; print(" ".join(sorted(t["name"] for t in json.load(sys.stdin))))')
echo "targets: $targets"
# cogwheel_redis joins them where hiredis is installed (an optional library, not a program).
targets=$(echo "$targets" | sed 's/ cogwheel_redis//; s/ cogwheel_tls//')
[ "$targets" = "cogwheel_io cogwheel_runtime cogwheel_timer consumer consumer_get_variable" ] \
  || fail "the subproject built more than its libraries"
run_consumer "$tmp/meson-parent-build/consumer"
run_consumer "$tmp/meson-parent-build/consumer_get_variable"

check "4. CMake parent project, add_subdirectory(cogwheel)"
cmake -S tests/install/cmake -B "$tmp/consumer-subdir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCOGWHEEL_SOURCE_DIR="$repo" >/dev/null
for t in $(ninja -C "$tmp/consumer-subdir" -t targets all | sed -n 's/^\(.*\): CXX_EXECUTABLE_LINKER.*/\1/p'); do
  [ "$t" = consumer ] || fail "the add_subdirectory build defines executable $t"
done
cmake --build "$tmp/consumer-subdir" -j "$jobs" >/dev/null
run_consumer "$tmp/consumer-subdir/consumer"

echo
echo "== all install checks passed"
