# Set-up shared by the bench scripts that count (sourced, not run):
#   require_tools <tool...>   exit with a message when one is not on PATH
#   tollgate_binary           TOLLGATE_BIN as given, or build the release binary and use it;
#                             names the binary on stderr (path, modification time, the first
#                             12 digits of its SHA-256), so that every run says what it measured
#   name_binary <path>        that line for a binary a script runs without tollgate_binary
#   port_free <port>          exit with a message when something answers on <port>
#   tls_workdir <name>        a scratch folder WORK (removed on exit, after stop_all stops the
#                             processes listed in PIDS) holding a CA with server and client
#                             certificates: TLS_FILES are a server's arguments, CLIENT_TLS
#                             redis-benchmark's and redis-cli's
#   row_commands <row>        tcmd and rcmd, the commands Tollgate and Redis run for a row of
#                             the per-request counting scripts (LIMIT.TOKEN's Redis side is
#                             INCR); exits on an unknown row
#   durable_row_commands <row>
#                             tcmd and rcmd (strings, split at use) for a row of the durable
#                             counting scripts: INCR, SET, LIMIT.TOKEN (Redis side: INCR)
#   stop_all                  stop the processes listed in PIDS
#   start_callgrind_server <redis|tollgate> <file> [valgrind option...]
#                             the server under callgrind on PORT (SPID), once it answers PING
#   start_tls_server <redis|tollgate> [wrapper...]
#                             a TLS-only server on PORT with tls_workdir's certificates
#                             (SPID, added to PIDS), once it answers PING

require_tools() {
  local tool
  for tool in "$@"; do
    command -v "$tool" >/dev/null 2>&1 || { echo "$tool is needed" >&2; exit 1; }
  done
}

tollgate_binary() {
  if [ -z "${TOLLGATE_BIN:-}" ]; then
    cargo build --release -q
    TOLLGATE_BIN="${CARGO_TARGET_DIR:-target}/release/tollgate"
  fi
  name_binary "$TOLLGATE_BIN"
}

name_binary() {
  [ -x "$1" ] || { echo "$1 is not an executable file" >&2; exit 1; }
  echo "tollgate binary: $1, modified $(date -u -r "$1" '+%Y-%m-%d %H:%M UTC')," \
    "sha256 $(sha256sum "$1" | cut -c1-12)" >&2
}

port_free() {
  if redis-cli -p "$1" ping >/dev/null 2>&1; then
    echo "port $1 is already in use; set PORT to a free port" >&2
    exit 1
  fi
}

# wait_ping <redis-cli args...>: wait up to 30 s for the server those arguments reach to
# answer PING; otherwise print the logs in $WORK and stop.
wait_ping() {
  for _ in $(seq 1 300); do redis-cli "$@" ping >/dev/null 2>&1 && return; sleep 0.1; done
  echo "no server answers redis-cli $*:" >&2
  cat "$WORK"/*.log >&2 2>/dev/null || true
  exit 1
}

stop_all() {
  local pid
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  PIDS=()
}

tls_workdir() {
  PIDS=()
  WORK=$(mktemp -d "/tmp/$1.XXXXXX")
  trap 'stop_all; rm -rf "$WORK"' EXIT
  bash tests/tls_support/make_certs.sh "$WORK" bench-ca >/dev/null 2>&1
  TLS_FILES=(--tls-cert-file "$WORK/server.crt" --tls-key-file "$WORK/server.key" --tls-ca-cert-file "$WORK/ca.crt")
  CLIENT_TLS=(--tls --cacert "$WORK/ca.crt" --cert "$WORK/client.crt" --key "$WORK/client.key")
}

# start_callgrind_server <redis|tollgate> <callgrind-out-file> [valgrind option...]: the
# server in plaintext on $PORT under callgrind (Redis with no persistence; the options go to
# valgrind, e.g. --toggle-collect); sets SPID (callgrind's pid, which callgrind_control
# takes) and returns once it answers PING or after 30 s.
start_callgrind_server() {
  local server=$1 file=$2
  shift 2
  if [ "$server" = tollgate ]; then
    valgrind --tool=callgrind --callgrind-out-file="$file" "$@" \
      "$TOLLGATE_BIN" --port "$PORT" --log warn >/dev/null 2>&1 &
  else
    valgrind --tool=callgrind --callgrind-out-file="$file" "$@" \
      redis-server --port "$PORT" --save "" --appendonly no >/dev/null 2>&1 &
  fi
  SPID=$!
  for _ in $(seq 1 300); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
}

# callgrind_events <callgrind-out-file>: the file's totals as "event=count ..." (its `events:`
# line names them, its `totals:` or `summary:` line counts them), e.g. "Ir=123 I1mr=4 ...".
callgrind_events() {
  awk '/^events:/ { for (i = 2; i <= NF; i++) name[i - 1] = $i }
    /^(summary|totals):/ { for (i = 2; i <= NF; i++) printf "%s=%s ", name[i - 1], $i; exit }' "$1"
}

# callgrind_per <callgrind-out-file> <n> <sum>...: each sum of events ("Ir", "D1mr+D1mw")
# divided by n, one field each: whole above 100, two decimals below, "-" when the file
# lacks an event of the sum (a simulator that was off).
callgrind_per() {
  local file=$1 n=$2
  shift 2
  callgrind_events "$file" | awk -v n="$n" -v sums="$*" '{
    for (i = 1; i <= NF; i++) { split($i, kv, "="); t[kv[1]] = kv[2] }
    k = split(sums, want, " ")
    for (j = 1; j <= k; j++) {
      m = split(want[j], evs, "+"); v = 0; ok = 1
      for (e = 1; e <= m; e++) { if (!(evs[e] in t)) ok = 0; v += t[evs[e]] }
      if (!ok) out = "-"; else if (v / n >= 100) out = sprintf("%.0f", v / n); else out = sprintf("%.2f", v / n)
      printf "%s%s", out, (j < k ? " " : "\n")
    }
  }'
}

# start_tls_server <redis|tollgate> [wrapper...]: a TLS-only server on $PORT with
# tls_workdir's certificates, under the wrapper if one is given, its log in
# $WORK/server.log; sets SPID and returns once it answers PING (prints the log and exits if
# it never does).
start_tls_server() {
  local server=$1
  shift
  if [ "$server" = redis ]; then
    "$@" redis-server --port 0 --tls-port "$PORT" "${TLS_FILES[@]}" --save "" --appendonly no \
      >"$WORK/server.log" 2>&1 &
  else
    "$@" "$TOLLGATE_BIN" --port 0 --tls-port "$PORT" "${TLS_FILES[@]}" --log warn \
      >"$WORK/server.log" 2>&1 &
  fi
  SPID=$!
  PIDS+=("$SPID")
  for _ in $(seq 1 300); do
    redis-cli "${CLIENT_TLS[@]}" -p "$PORT" ping >/dev/null 2>&1 && return
    sleep 0.1
  done
  echo "$server did not start:" >&2
  cat "$WORK/server.log" >&2
  exit 1
}

row_commands() {
  case $1 in
    SETBIT) tcmd=(setbit "bits:__rand_int__" 7 1) ;;
    BITCOUNT) tcmd=(bitcount bits) ;;
    PFADD) tcmd=(pfadd hll "__rand_int__") ;;
    GET) tcmd=(get "key:__rand_int__") ;;
    SET) tcmd=(set "key:__rand_int__" xxx) ;;
    INCR) tcmd=(incr "n:__rand_int__") ;;
    LIMIT.TOKEN) tcmd=(LIMIT.TOKEN "bucket:__rand_int__" 100 10 1000) ;;
    *) echo "unknown row $1" >&2; exit 1 ;;
  esac
  rcmd=("${tcmd[@]}")
  if [ "$1" = LIMIT.TOKEN ]; then rcmd=(incr "n:__rand_int__"); fi
}

# durable_row_commands <row>: the commands of a row of bench/durable_syscalls.sh and
# bench/durable_fsync_gaps.sh, as strings (tcmd Tollgate's, rcmd Redis's, word-split where
# used); exits on an unknown row.
durable_row_commands() {
  case $1 in
    INCR) rcmd="INCR n:__rand_int__" tcmd=$rcmd ;;
    SET) rcmd="SET s:__rand_int__ xxx" tcmd=$rcmd ;;
    LIMIT.TOKEN) rcmd="INCR n:__rand_int__" tcmd="LIMIT.TOKEN t:__rand_int__ 1000000 1000 1s" ;;
    *) echo "unknown row $1" >&2; exit 1 ;;
  esac
}
