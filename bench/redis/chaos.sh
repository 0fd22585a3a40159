#!/usr/bin/env bash
# The long form of tests/redis/delay_queue_chaos_test.cpp: 100,000 jobs (COGWHEEL_TEST_SCALE=50,
# due over 20 s) through the same kill -9, SIGSTOP of a worker for twice the visibility,
# SIGSTOP of redis-server for 1 s and its restart from the AOF (appendfsync always).
# Usage: bench/redis/chaos.sh [build dir, default build/rel] [scale, default 50]
set -euo pipefail
build=${1:-build/rel}
scale=${2:-50}
COGWHEEL_TEST_SCALE=$scale exec "$build/tests/redis/redis_delay_queue_chaos_test"
