# Sourced by bench/http/callgrind_per_request.sh and bench/peers/echo_callgrind.sh: the end of a
# callgrind window around one load run of a server started under valgrind with
# --instr-atstart=no and instrumentation switched on for the run.

# callgrind_window_close PID: instrumentation off, the counts dumped (callgrind.out.1; the file
# written at exit is empty), then the server stopped (valgrind may hold a signal to a server
# blocked in the kernel for long, hence the KILL after 5 s).
callgrind_window_close() {
  callgrind_control -i off "$1" >/dev/null
  callgrind_control -d "$1" >/dev/null
  kill -INT "$1"
  for _ in $(seq 50); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
}

# callgrind_window_total OUT_DIR: the instructions counted in the window.
callgrind_window_total() {
  callgrind_annotate "$1/callgrind.out.1" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",","",$1); print $1}'
}
