#!/usr/bin/env bash
# tests/install/consumer.cpp built against an installed cogwheel through pkg-config alone, as a
# user's Makefile would. Usage: [PKG_CONFIG_PATH=<prefix>/<libdir>/pkgconfig] build.sh <output>
set -euo pipefail
here=$(dirname "$0")
flags=$(pkg-config --cflags --libs cogwheel)
# shellcheck disable=SC2086  # $flags is a list of compiler arguments: split it
${CXX:-c++} -std=c++20 -Wall -Wextra -Werror "$here/../consumer.cpp" -o "$1" $flags
