#!/usr/bin/env bash
# Installs the Debian packages cogwheel builds, tests and benchmarks with, when any is missing.
# Sourced by tests/ci.sh and examples/demo.sh; safe to run again (a no-op when all are there).
cogwheel_deps=(g++ cmake ninja-build meson pkg-config liburing-dev libgtest-dev libgmock-dev
               libbenchmark-dev clang-16 libclang-rt-16-dev)
# ccache: tests/ci.sh compiles through it (each stage's libraries and tests, again in later runs).
cogwheel_deps+=(ccache)
# The API reference (cmake --build build --target docs, and its CI stage).
cogwheel_deps+=(doxygen)
# The peers of bench/peers/: optional for a build (skipped when absent), installed here so that
# CI compiles the comparisons and they cannot rot.
cogwheel_deps+=(libasio-dev libuv1-dev libevent-dev)
# What sits on top (the HTTP example, the Redis client) and the real servers and clients their
# tests and benchmarks start: optional for a build, installed here so CI runs those tests.
cogwheel_deps+=(libhttp-parser-dev nginx-light wrk slowhttptest redis-server curl apache2-utils)
# io's resolver links c-ares (required); dnsmasq is the local DNS server bench/resolve_bench.cpp
# measures against.
cogwheel_deps+=(libc-ares-dev dnsmasq-base)
# cogwheel::tls (optional: built when OpenSSL 3 is found) and the openssl tool its tests run.
cogwheel_deps+=(libssl-dev openssl ca-certificates)
# promtool checks the metrics exposition (tests/runtime/metrics_prometheus_test.cpp).
cogwheel_deps+=(prometheus)
# The plots of bench/plot.py and bench/plot_lateness.py.
cogwheel_deps+=(python3-matplotlib)
cogwheel_missing=()
for p in "${cogwheel_deps[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || cogwheel_missing+=("$p")
done
if [ ${#cogwheel_missing[@]} -gt 0 ]; then
  echo "== installing: ${cogwheel_missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${cogwheel_missing[@]}" >/dev/null
fi
