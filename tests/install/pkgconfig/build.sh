#!/usr/bin/env bash
# A consumer program built against an installed cogwheel through pkg-config alone, as a user's
# Makefile would. Usage: [PKG_CONFIG_PATH=<prefix>/<libdir>/pkgconfig] build.sh <output>
#   [<source, default tests/install/consumer.cpp> <pkg-config module, default cogwheel>]
set -euo pipefail
here=$(dirname "$0")
flags=$(pkg-config --cflags --libs "${3:-cogwheel}")
# shellcheck disable=SC2086  # $flags is a list of compiler arguments: split it
${CXX:-c++} -std=c++20 -Wall -Wextra -Werror "${2:-$here/../consumer.cpp}" -o "$1" $flags
