# Sourced by echo_compare.sh and sleepers_compare.sh: builds one of bench/peers' tokio programs
# with cargo. Its crates come from Debian's packaged registry when that has tokio (offline,
# --locked to the committed Cargo.lock), otherwise from crates.io, resolved afresh in a copy under
# the build directory (the committed lock carries Debian's checksums).

# On a fresh Debian machine, as root: Debian's cargo and tokio crates (offline builds need no
# network beyond the package mirror). Anything that fails here only leaves the row skipped.
install_tokio_packages() {  # CALLER (for messages)
  [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null || return 0
  local -a want=()
  command -v cargo >/dev/null || [ -x "$HOME/.cargo/bin/cargo" ] || want+=(cargo)
  compgen -G "/usr/share/cargo/registry/tokio-1.*" >/dev/null ||
    want+=(librust-tokio-dev librust-tokio+rt-dev librust-tokio+net-dev librust-tokio+time-dev
           librust-tokio+io-util-dev librust-tokio+macros-dev librust-tokio+signal-dev librust-libc-dev)
  [ ${#want[@]} -eq 0 ] && return 0
  echo "$1: installing ${want[*]}" >&2
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${want[@]}"; } >/dev/null 2>&1 ||
    echo "$1: could not install ${want[*]}" >&2
}

# cargo_peer_build CALLER NAME BUILD_DIR WORK_DIR: builds bench/peers/NAME into BUILD_DIR/NAME.
# Sets cargo_peer_bin to the program, or leaves it empty and sets cargo_peer_skip to why not.
cargo_peer_build() {
  local caller=$1 name=$2 build=$3 work=$4
  cargo_peer_bin=""
  cargo_peer_skip=""
  local cargo=${CARGO:-$(command -v cargo || echo "$HOME/.cargo/bin/cargo")}
  if [ ! -x "$cargo" ]; then cargo_peer_skip="skipped (no cargo)"; return; fi
  local target src
  src=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$name
  target=$(mkdir -p "$build/$name" && cd "$build/$name" && pwd)
  local -a how
  if compgen -G "/usr/share/cargo/registry/tokio-1.*" >/dev/null; then
    how=(--offline --locked --config 'source.crates-io.replace-with="debian"'
         --config 'source.debian.directory="/usr/share/cargo/registry"')
  else
    rm -rf "$target/src-copy" && mkdir -p "$target/src-copy"
    cp -r "$src/Cargo.toml" "$src/src" "$target/src-copy/"
    src=$target/src-copy
    how=()
  fi
  if ! (cd "$src" && timeout 900 "$cargo" build --release --quiet "${how[@]}" \
          --target-dir "$target") >"$work/cargo.log" 2>&1; then
    echo "$caller: cargo build of $name failed:" >&2
    tail -n 5 "$work/cargo.log" >&2
    cargo_peer_skip="skipped (cargo build failed: $(grep -m1 -i error "$work/cargo.log" | cut -c1-80))"
    return
  fi
  cargo_peer_bin=$target/release/$name
}
