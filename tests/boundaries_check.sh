#!/usr/bin/env bash
# One door per boundary: no library reaches into another library's private sources. Fails
# (exit 1, naming each offence) when
#   - a library's build files name another library's src/ folder (include paths), or
#   - a quoted #include in a library's src/ does not resolve inside that same src/ folder
#     (a private header of another library found through an include path).
# Libraries: timer runtime io redis tls (those present). Usage: bash tests/boundaries_check.sh [root]
set -u
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root" || exit 2
libs=()
for l in timer runtime io redis tls; do [ -d "$l" ] && libs+=("$l"); done
bad=0
for l in "${libs[@]}"; do
  for other in "${libs[@]}"; do
    [ "$other" = "$l" ] && continue
    hits=$(grep -nE "(^|[^a-z_])${other}/src|${other}_private" "$l"/CMakeLists.txt "$l"/meson.build 2>/dev/null | grep -vE "^[^:]*:[0-9]+:[[:space:]]*#")
    if [ -n "$hits" ]; then
      echo "boundaries: $l's build reaches into $other/src:"; echo "$hits"; bad=1
    fi
  done
  while IFS= read -r -d '' f; do
    dir=$(dirname "$f")
    while IFS= read -r inc; do
      [ -f "$dir/$inc" ] || [ -f "$l/src/$inc" ] && continue
      echo "boundaries: $f includes \"$inc\", which is not in $l/src"; bad=1
    done < <(sed -nE 's/^[[:space:]]*#[[:space:]]*include[[:space:]]+"([^"]+)".*/\1/p' "$f")
  done < <(find "$l/src" -type f \( -name '*.cpp' -o -name '*.hpp' \) -print0 2>/dev/null)
done
[ "$bad" -eq 0 ] && echo "boundaries: ${libs[*]}: each reaches the others through public headers only"
exit "$bad"
