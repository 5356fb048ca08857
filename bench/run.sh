#!/usr/bin/env bash
# Side-by-side throughput: redis-server and Tollgate on this machine, same redis-benchmark
# load, Tollgate's requests/s printed as a ratio of Redis's.
#
#   bench/run.sh [requests]      (default 200000 per row; RPORT/TPORT override the ports)
#   DATA=bytes (default 3, redis-benchmark's -d): the value size of redis-benchmark's own
#   tests (SET, GET, ...); DATA=200000 TESTS=set,get EXTRA="" MORE="" measures large values.
#   TOLLGATE_BIN=<binary> runs that binary instead of building target/release/tollgate.
#   ROUNDS=n (default 3): each row runs n times on each server, Redis first in odd rounds and
#   Tollgate first in even ones; printed are the median rps of each side and the median of
#   the rounds' ratios (one -P 32 row moved by 2x between single runs a minute apart).
#
# Besides redis-benchmark's own tests (TESTS), HINCRBY on random small hashes (the token
# bucket's and sliding window's write) runs at each pipeline depth, then rows for commands
# redis-benchmark has no test for (EXTRA, ';'-separated, __rand_int__ replaced by
# redis-benchmark): SETBIT of bit 7 in random keys (redis-benchmark pads __rand_int__ with
# zeros, which a bit offset may not have, so the offset is fixed and the key random),
# BITCOUNT of one 12.5 KB bitmap written before the rows (the same bytes on both servers),
# PFADD of random elements to one HyperLogLog (dense after the first few thousand).
# EXTRA="" leaves them out. After them come command rows on prepared data (`zunionstore`:
# ZUNIONSTORE of two 100-member sorted sets with 50 members in common). Last, the seed
# sliding log's step as a 4-command pipeline (see below). MORE (default "hincrby zunionstore
# slidelog", space-separated) names which of these three fixed rows run; MORE="" with
# EXTRA="" runs only TESTS.
#
# Rounds share the servers: LPUSH's one list and SADD's one set keep growing from round to
# round (by the same pushes on both servers).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-200000}
TESTS=${TESTS:-set,get,incr,hset,zadd,lpush,sadd}
CLIENTS=${CLIENTS:-50}
ROUNDS=${ROUNDS:-3}
if ! command -v redis-benchmark >/dev/null 2>&1; then
  apt-get update -qq && apt-get install -y -qq redis-server redis-tools >/dev/null
fi
DATA=${DATA:-3}
# shellcheck source=bench/lib.sh
source bench/lib.sh
tollgate_binary
MORE=${MORE-hincrby zunionstore slidelog}
more() { [[ " $MORE " == *" $1 "* ]]; }
for m in $MORE; do
  case $m in hincrby | zunionstore | slidelog) ;; *) echo "MORE: unknown row '$m' (hincrby, zunionstore, slidelog)" >&2; exit 2 ;; esac
done
EXTRA=${EXTRA-setbit bits:__rand_int__ 7 1;bitcount bits;pfadd hll __rand_int__}
RPORT=${RPORT:-16379}
TPORT=${TPORT:-16380}
redis-server --port "$RPORT" --save "" --appendonly no >/tmp/bench-redis.log 2>&1 &
RPID=$!
"$TOLLGATE_BIN" --port "$TPORT" --log warn >/tmp/bench-tollgate.log 2>&1 &
TPID=$!
trap 'kill $RPID $TPID 2>/dev/null || true' EXIT
for port in $RPORT $TPORT; do
  for _ in $(seq 1 100); do redis-cli -p $port ping >/dev/null 2>&1 && break; sleep 0.1; done
done
# The bitmap BITCOUNT counts: 12,500 bytes of a fixed pseudo-random pattern.
bitmap=$(python3 -c "import random; r = random.Random(7); print(bytes(r.randrange(256) for _ in range(12500)).hex())")
for port in $RPORT $TPORT; do
  python3 -c "import sys; sys.stdout.buffer.write(bytes.fromhex(sys.argv[1]))" "$bitmap" \
    | redis-cli -p "$port" -x set bits >/dev/null
done

# median <numbers...> -> their median (the lower middle one for an even count), as
# bench/limiters.sh and bench/durable.sh take it
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }

# once <port> <pipeline> <row> -> requests/s of one redis-benchmark run (empty if it failed).
# A row is `test:<name>` (one of redis-benchmark's own tests, `-t`) or a command line.
once() {
  local port=$1 p=$2 row=$3
  if [[ $row == test:* ]]; then
    redis-benchmark -p "$port" -n "$N" -c "$CLIENTS" -P "$p" -r 100000 -d "$DATA" -t "${row#test:}" --csv \
      2>/dev/null | tail -n +2 | tr -d '"' | cut -d, -f2
  else
    # No globbing of the command's words: set -f.
    set -f
    # shellcheck disable=SC2086
    redis-benchmark -p "$port" -n "$N" -c "$CLIENTS" -P "$p" -r 100000 --csv $row 2>/dev/null \
      | tail -n +2 | tr -d '"' | cut -d, -f2
    set +f
  fi
}

# row <name> <pipeline> <measure> <args...>: ROUNDS rounds of `<measure> <port> <args...>`
# on both servers, Redis first in odd rounds and Tollgate first in even ones, so that
# machine noise (and whatever the previous run left running) hits both alike; prints the
# median rps of each side and the median of the rounds' ratios. A row whose command failed
# in any round (redis-benchmark then prints no figures) says so instead of vanishing.
row() {
  local name=$1 p=$2 measure=$3 round r t
  shift 3
  local rs=() ts=() ratios=()
  for round in $(seq 1 "$ROUNDS"); do
    if [ $((round % 2)) -eq 1 ]; then
      r=$("$measure" "$RPORT" "$@" || true) t=$("$measure" "$TPORT" "$@" || true)
    else
      t=$("$measure" "$TPORT" "$@" || true) r=$("$measure" "$RPORT" "$@" || true)
    fi
    if [ -z "$r" ] || [ -z "$t" ]; then
      printf '%-10s %-8s %14s %14s %8s\n' "$name" "$p" "${r:-failed}" "${t:-failed}" -
      return
    fi
    rs+=("$r") ts+=("$t") ratios+=("$(python3 -c "print($t / $r)")")
  done
  printf '%-10s %-8s %14s %14s %8s\n' "$name" "$p" "$(median "${rs[@]}")" "$(median "${ts[@]}")" \
    "$(python3 -c "print(f'{$(median "${ratios[@]}"):.2f}x')")"
}

# The rows at each pipeline depth: redis-benchmark's tests, HINCRBY, then EXTRA.
IFS=, read -ra tests <<<"$TESTS"
IFS=';' read -ra extras <<<"$EXTRA"
printf '%-10s %-8s %14s %14s %8s\n' test pipeline redis_rps tollgate_rps ratio
for P in 1 32; do
  for test in "${tests[@]}"; do
    row "$(echo "$test" | tr '[:lower:]' '[:upper:]')" "$P" once "$P" "test:$test"
  done
  if more hincrby; then
    row HINCRBY "$P" once "$P" "hincrby rl:h:__rand_int__ tokens 1"
  fi
  for cmd in "${extras[@]}"; do
    row "${cmd%% *}" "$P" once "$P" "$cmd"
  done
done

# Command rows on prepared data: the same keys on both servers, then one command line.
if more zunionstore; then
for port in $RPORT $TPORT; do
  za=(ZADD za) zb=(ZADD zb)
  for i in $(seq 0 99); do
    za+=("$i" "m$i")
    zb+=("$((i * 2))" "m$((i + 50))")
  done
  redis-cli -p "$port" "${za[@]}" >/dev/null
  redis-cli -p "$port" "${zb[@]}" >/dev/null
done
for P in 1 32; do
  row zunionstore "$P" once "$P" "ZUNIONSTORE zdst 2 za zb"
done
fi

# The seed sliding log's step as a pipeline (ZREMRANGEBYSCORE + ZADD + ZCARD + PEXPIRE on a
# per-client key, 100,000 clients): redis-benchmark runs one command per test, so STEPS
# steps are written as RESP to 4 files and sent by 4 parallel `redis-cli --pipe` (each a
# single connection streaming its whole file), timed by wall clock; steps/s per server.
if more slidelog; then
STEPS=${STEPS:-200000}
SLTMP=$(mktemp -d)
python3 - "$STEPS" "$SLTMP" <<'PY'
import random, sys
steps, out = int(sys.argv[1]), sys.argv[2]
def resp(args):
    return "".join([f"*{len(args)}\r\n"] + [f"${len(a)}\r\n{a}\r\n" for a in args])
rng = random.Random(1)
for f in range(4):
    with open(f"{out}/{f}.resp", "w") as fh:
        for i in range(steps // 4):
            now = 1700000000000 + i
            key = f"rl:log:{rng.randrange(100000)}"
            fh.write(resp(["ZREMRANGEBYSCORE", key, "-inf", str(now - 60000)]))
            fh.write(resp(["ZADD", key, str(now), f"{now}-{f}"]))
            fh.write(resp(["ZCARD", key]))
            fh.write(resp(["PEXPIRE", key, "60000"]))
PY
slidelog() {
  local port=$1 start end
  redis-cli -p "$port" flushall >/dev/null
  start=$(date +%s.%N)
  local pids=() pid f
  for f in 0 1 2 3; do
    redis-cli -p "$port" --pipe <"$SLTMP/$f.resp" >"$SLTMP/$f.out" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || { echo "redis-cli --pipe failed on port $port" >&2; exit 1; }; done
  end=$(date +%s.%N)
  # Every reply must have been a success: redis-cli --pipe ends with "errors: N, replies: M".
  for f in 0 1 2 3; do
    grep -q "errors: 0," "$SLTMP/$f.out" || { echo "sliding-log step refused on port $port: $(tail -1 "$SLTMP/$f.out")" >&2; exit 1; }
  done
  python3 -c "print(int($STEPS / ($end - $start)))"
}
row slidelog pipe slidelog
rm -rf "$SLTMP"
fi
echo "(medians of $ROUNDS rounds, Redis first in odd rounds and Tollgate first in even ones;"
echo " ratio = median of the rounds' tollgate/redis)"
