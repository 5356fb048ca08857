#!/usr/bin/env bash
# Side-by-side Pub/Sub and blocking-pop throughput: redis-server and Tollgate (release
# build) on this machine, the same load on both, Tollgate's rate printed as a ratio of
# Redis's. Four rows:
#
#   publish-50subs  redis-benchmark PUBLISH (50 clients, 64-byte payload) to one channel
#                   that 50 subscribers read (bench/pubsub_drain.py drains them and checks
#                   that every message reached every subscriber);
#   pingpong-pairs  issue 19's LPUSH/BLPOP ping-pong between pairs of clients (PAIRS pairs,
#                   default 25 = 50 clients, bench/blpop_pingpong.py): each client, woken
#                   with an element, pushes one to its partner's list and blocks again, so
#                   every pop is a blocked client woken by a push; run by PROCS client
#                   processes (default 5, PAIRS/PROCS pairs each); rate = pops per second;
#   pingpong-pairs-rust
#                   the same ping-pong, the same PAIRS, run by a compiled client
#                   (examples/blpop_pingpong.rs: CLIENT_THREADS threads, default 1, each an
#                   event loop over its share of the pairs, as redis-benchmark runs its
#                   clients) for PP_SECS seconds a round (default 5); rate = pops per
#                   second. The Python row's 5 processes need more CPU than either server
#                   on 2 cores (bench/pingpong_counts.sh), so that row measures the Python
#                   clients as much as the servers; this one gives the servers the CPU;
#   blpop-full-list 25 redis-benchmark clients RPUSH one list while 25 others BLPOP it
#                   (timeout 0); rate = pops per second of the two runs side by side.
#                   The pushers run ahead (the list holds thousands of elements through
#                   most of a run), so most pops find the list full and do not block (this
#                   row was named rpush-blpop before the ping-pong row came).
#
# bench/blocking_roundtrip.sh counts the instructions, system calls and context switches of
# a round trip (PAIRS=25 for the ping-pong): on a shared machine these rates move with the
# load, and the Python clients of the ping-pong row need more CPU than either server.
#
#   bench/pubsub.sh [requests]       (default 100000 per row and round)
#   ROUNDS=n (default 3): medians of n alternating runs. RPORT/TPORT (default 16491/16492).
#   TOLLGATE_BIN (default: build release). ROWS: the rows to run (default all four, e.g.
#   ROWS="pingpong-pairs pingpong-pairs-rust").
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-100000}
ROUNDS=${ROUNDS:-3}
RPORT=${RPORT:-16491}
TPORT=${TPORT:-16492}
PAIRS=${PAIRS:-25}
PROCS=${PROCS:-5}
if ! [[ $PAIRS =~ ^[0-9]+$ && $PROCS =~ ^[0-9]+$ ]] || ((PROCS == 0 || PAIRS == 0 || PAIRS % PROCS != 0)); then
  echo "PAIRS ($PAIRS) must be a positive multiple of PROCS ($PROCS)" >&2
  exit 2
fi
# shellcheck source=bench/lib.sh
source bench/lib.sh
require_tools redis-server redis-cli redis-benchmark python3
tollgate_binary
BIN=$TOLLGATE_BIN
CLIENT_THREADS=${CLIENT_THREADS:-1}
PP_SECS=${PP_SECS:-5}
ROWS=${ROWS:-publish-50subs pingpong-pairs pingpong-pairs-rust blpop-full-list}
cargo build --release -q --example blpop_pingpong
PP_CLIENT="${CARGO_TARGET_DIR:-target}/release/examples/blpop_pingpong"
WORK=$(mktemp -d)
redis-server --port "$RPORT" --save "" --appendonly no >"$WORK/redis.log" 2>&1 &
RPID=$!
"$BIN" --port "$TPORT" --log warn >"$WORK/tollgate.log" 2>&1 &
TPID=$!
trap 'kill $RPID $TPID 2>/dev/null || true; rm -rf "$WORK"' EXIT
for port in $RPORT $TPORT; do
  for _ in $(seq 1 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
done

# publish_rps <port>: PUBLISH requests/s with 50 draining subscribers.
publish_rps() {
  python3 bench/pubsub_drain.py "$1" 50 "$N" >"$WORK/drain.txt" &
  local drain=$!
  # Wait until the 50 subscriptions are in place.
  for _ in $(seq 1 100); do
    [ "$(redis-cli -p "$1" pubsub numsub bench | tail -1)" = 50 ] && break
    sleep 0.05
  done
  redis-benchmark -p "$1" -n "$N" -c 50 --csv PUBLISH bench \
    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx" 2>/dev/null \
    | tail -n +2 | tr -d '"' | cut -d, -f2
  wait "$drain" || { echo "subscribers missed messages: $(cat "$WORK/drain.txt")" >&2; exit 1; }
}

# blpop_rps <port>: pops/s of 25 BLPOP clients fed by 25 RPUSH clients.
blpop_rps() {
  redis-cli -p "$1" del q >/dev/null
  local start end
  start=$(date +%s.%N)
  redis-benchmark -p "$1" -n "$N" -c 25 BLPOP q 0 >/dev/null 2>&1 &
  local pops=$!
  redis-benchmark -p "$1" -n "$N" -c 25 RPUSH q x >/dev/null 2>&1
  wait "$pops"
  end=$(date +%s.%N)
  python3 -c "print(f'{$N / ($end - $start):.0f}')"
}

# pingpong_rps <port>: pops/s of PAIRS pairs of clients ping-ponging LPUSH/BLPOP.
pingpong_rps() {
  local start end pids=() pid
  start=$(date +%s.%N)
  for _ in $(seq 1 "$PROCS"); do
    python3 bench/blpop_pingpong.py "$1" $((N / PROCS)) 0 $((PAIRS / PROCS)) >/dev/null &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || { echo "ping-pong failed" >&2; exit 1; }; done
  end=$(date +%s.%N)
  python3 -c "print(f'{$((N / PROCS * PROCS)) / ($end - $start):.0f}')"
}

# pingpong_rust_rps <port>: the same ping-pong, by the compiled client.
pingpong_rust_rps() {
  "$PP_CLIENT" "$1" "$PP_SECS" "$PAIRS" "$CLIENT_THREADS" || { echo "ping-pong failed" >&2; exit 1; }
}

median() { tr ' ' '\n' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

printf '%-20s %14s %14s %8s\n' row redis tollgate ratio
for name in $ROWS; do
  case $name in
    publish-50subs) row=publish_rps ;;
    pingpong-pairs) row=pingpong_rps ;;
    pingpong-pairs-rust) row=pingpong_rust_rps ;;
    blpop-full-list) row=blpop_rps ;;
    *) echo "unknown row $name" >&2; exit 2 ;;
  esac
  r=(); t=()
  for _ in $(seq 1 "$ROUNDS"); do
    r+=("$($row "$RPORT")")
    t+=("$($row "$TPORT")")
  done
  rm=$(echo "${r[*]}" | median)
  tm=$(echo "${t[*]}" | median)
  printf '%-20s %14s %14s %8s\n' "$name" "$rm" "$tm" "$(python3 -c "print(f'{$tm/$rm:.2f}x')")"
done
