#!/usr/bin/env bash
# Renders the API reference (docs/Doxyfile) into <output dir>/html and lists every warning
# Doxygen gives: an undocumented public name, a broken doc command. With --check, any warning
# fails (exit 1) after the whole list is printed, so one run shows everything left to do.
# Usage: tests/api_docs.sh [--check] <output dir> [header or folder ...]
#   (no headers: every public header of every library; detail/ is always left out)
set -euo pipefail
cd "$(dirname "$0")/.."
check=false
if [ "${1:-}" = "--check" ]; then check=true; shift; fi
out=${1:?usage: tests/api_docs.sh [--check] <output dir> [header ...]}
shift
command -v doxygen >/dev/null || { echo "doxygen is not installed (Debian: doxygen)" >&2; exit 1; }
mkdir -p "$out"
log="$out/warnings.log"
{
  cat docs/Doxyfile
  echo "OUTPUT_DIRECTORY = $out"
  echo "WARN_LOGFILE = $log"
  if [ $# -gt 0 ]; then echo "INPUT = docs/api.dox $*"; fi
} | doxygen - >/dev/null
count=$(grep -c . "$log" || true)
if [ "$count" -gt 0 ]; then
  echo "Doxygen: $count warning(s):"
  cat "$log"
fi
echo "API reference: $out/html/index.html"
if $check && [ "$count" -gt 0 ]; then exit 1; fi
exit 0
