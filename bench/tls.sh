#!/usr/bin/env bash
# TLS throughput side by side: redis-server and Tollgate, both with TLS only (`--port 0
# --tls-port`), the same certificates (a CA, a server certificate and a client certificate
# made here with the openssl CLI; clients authenticate, the default `tls-auth-clients yes`),
# and the same redis-benchmark --tls load. Rows: SET, GET, INCR, and Tollgate's LIMIT.TOKEN
# against Redis's INCR (the cheapest counter Redis has), unpipelined and with -P 32, 50
# clients, random keys. Each round runs every row on both servers, alternating which goes
# first; printed are the medians over the rounds and Tollgate's ratio to Redis.
#
#   bench/tls.sh [requests] [rounds]     (default 100000 per row, 3 rounds)
#   RPORT / TPORT choose the ports (default 16391 / 16392); TOLLGATE_BIN skips the build.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-100000}
ROUNDS=${2:-3}
CLIENTS=${CLIENTS:-50}
RPORT=${RPORT:-16391}
TPORT=${TPORT:-16392}
for tool in redis-benchmark redis-server openssl python3; do
  command -v "$tool" >/dev/null 2>&1 || { echo "$tool is required" >&2; exit 1; }
done
# shellcheck source=bench/lib.sh
source bench/lib.sh
tollgate_binary # TOLLGATE_BIN, or the release build
BIN=$TOLLGATE_BIN

WORK=$(mktemp -d /tmp/bench-tls.XXXXXX)
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

# Certificates: a CA, a server certificate for 127.0.0.1, a client certificate.
bash tests/tls_support/make_certs.sh "$WORK" bench-ca
TLS_FILES=(--tls-cert-file "$WORK/server.crt" --tls-key-file "$WORK/server.key" --tls-ca-cert-file "$WORK/ca.crt")

redis-server --port 0 --tls-port "$RPORT" "${TLS_FILES[@]}" --save "" --appendonly no \
  >"$WORK/redis.log" 2>&1 &
PIDS+=($!)
"$BIN" --port 0 --tls-port "$TPORT" "${TLS_FILES[@]}" --log warn >"$WORK/tollgate.log" 2>&1 &
PIDS+=($!)
CLIENT_TLS=(--tls --cacert "$WORK/ca.crt" --cert "$WORK/client.crt" --key "$WORK/client.key")
for port in $RPORT $TPORT; do
  for _ in $(seq 1 100); do
    redis-cli "${CLIENT_TLS[@]}" -p "$port" ping >/dev/null 2>&1 && break
    sleep 0.1
  done
  redis-cli "${CLIENT_TLS[@]}" -p "$port" ping >/dev/null || { echo "server on $port did not start" >&2; cat "$WORK"/*.log >&2; exit 1; }
done

# bench <port> <pipeline> <row> -> requests/s
bench() {
  local port=$1 p=$2 row=$3 args
  case $row in
    set | get | incr) args=(-t "$row") ;;
    limit.token) args=(LIMIT.TOKEN "bucket:__rand_int__" 100 10 1000) ;;
  esac
  redis-benchmark "${CLIENT_TLS[@]}" -p "$port" -n "$N" -c "$CLIENTS" -P "$p" -r 100000 --csv \
    "${args[@]}" 2>/dev/null | tail -n 1 | tr -d '"' | cut -d, -f2
}

RESULTS=$WORK/results.csv
for round in $(seq 1 "$ROUNDS"); do
  for p in 1 32; do
    for row in set get incr limit.token; do
      # Redis has no LIMIT.TOKEN: it runs INCR in that row.
      rrow=$row; [[ $row == limit.token ]] && rrow=incr
      if (( round % 2 )); then
        r=$(bench "$RPORT" "$p" "$rrow"); t=$(bench "$TPORT" "$p" "$row")
      else
        t=$(bench "$TPORT" "$p" "$row"); r=$(bench "$RPORT" "$p" "$rrow")
      fi
      echo "$row,$p,$r,$t" >>"$RESULTS"
    done
  done
done

python3 - "$RESULTS" "$ROUNDS" <<'EOF'
import csv, statistics, sys
rows = {}
for name, p, r, t in csv.reader(open(sys.argv[1])):
    rows.setdefault((name, int(p)), []).append((float(r or 0), float(t or 0)))
print(f"TLS, median of {sys.argv[2]} rounds (requests/s)")
print(f"{'row':<28} {'pipeline':>8} {'redis':>12} {'tollgate':>12} {'ratio':>7}")
for (name, p), v in rows.items():
    r = statistics.median(x[0] for x in v)
    t = statistics.median(x[1] for x in v)
    label = "LIMIT.TOKEN vs Redis INCR" if name == "limit.token" else name.upper()
    ratio = f"{t / r:.2f}x" if r else "-"
    print(f"{label:<28} {p:>8} {r:>12.0f} {t:>12.0f} {ratio:>7}")
EOF
