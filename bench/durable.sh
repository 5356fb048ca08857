#!/usr/bin/env bash
# A durable single Tollgate node against redis-server with its append-only file, on this
# machine: `appendfsync everysec` against `appendonly yes appendfsync everysec`, and `always`
# against `always`. Both servers write to fresh directories under one temp dir on the same
# disk.
#
# Rows (50 clients, 10,000 random keys, unpipelined and -P 32):
#   - INCR and SET on both;
#   - LIMIT.TOKEN on Tollgate against Redis running the token-bucket Lua script of seed 003
#     section 5 via EVALSHA (how one gets a real limiter out of Redis), and against Redis INCR
#     (the cheapest possible write).
# Each row is REPS rounds of Redis then Tollgate, back to back (the machine is shared and
# noisy); printed are the median rps of each side and the median of the rounds' ratios.
#
#   bench/durable.sh                  (REPS=3)
#   RPORT/TPORT/CLIENTS/REPS/MODES/PIPELINES/N_EVERYSEC/N_ALWAYS/CARGO_TARGET_DIR override the
#   defaults (MODES="everysec always", PIPELINES="1 32"). N_* are requests per run
#   unpipelined; -P 32 runs 10 times as many. SKIP_BUILD=1 uses the release binary as it is.
set -euo pipefail
cd "$(dirname "$0")/.."
CLIENTS=${CLIENTS:-50}
REPS=${REPS:-3}
MODES=${MODES:-everysec always}
PIPELINES=${PIPELINES:-1 32}
N_EVERYSEC=${N_EVERYSEC:-100000}
N_ALWAYS=${N_ALWAYS:-20000}
RPORT=${RPORT:-6398}
TPORT=${TPORT:-6399}
if ! command -v redis-benchmark >/dev/null 2>&1; then
  apt-get update -qq && apt-get install -y -qq redis-server redis-tools >/dev/null
fi
[ -n "${SKIP_BUILD:-}" ] || cargo build --release -q
BIN="${CARGO_TARGET_DIR:-target}/release/tollgate"
# shellcheck source=bench/lib.sh
source bench/lib.sh
name_binary "$BIN"
# shellcheck source=bench/durable_servers.sh
source "$(dirname "$0")/durable_servers.sh"

BUCKET_LUA=$(cat tests/seeds/seed_003_token_bucket.lua)
NOW_MS=$(($(date +%s) * 1000))

# rps <port> <pipeline> <requests> <command...> -> requests per second
rps() {
  local port=$1 pipeline=$2 n=$3
  shift 3
  redis-benchmark -p "$port" -n "$n" -c "$CLIENTS" -P "$pipeline" -r 10000 --csv "$@" 2>/dev/null \
    | tail -n 1 | tr -d '"' | cut -d, -f2
}
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
fmt_ratio() { python3 -c "print(f'{$1:.2f}x')"; }

printf '%-9s %-12s %-4s %12s %12s %8s   %s\n' fsync row pipe redis_rps tollgate_rps ratio "(redis side)"
for MODE in $MODES; do
  start_servers "$MODE"
  SHA=$(redis-cli -p "$RPORT" SCRIPT LOAD "$BUCKET_LUA")
  ROWS=(
    "INCR|INCR n:__rand_int__|INCR n:__rand_int__"
    "SET|SET s:__rand_int__ xxx|SET s:__rand_int__ xxx"
    "LIMIT.TOKEN|EVALSHA $SHA 0 __rand_int__ 1000000 1000 10 1 $NOW_MS|LIMIT.TOKEN t:__rand_int__ 1000000 1000 1s|lua"
    "LIMIT.TOKEN|INCR n:__rand_int__|LIMIT.TOKEN t:__rand_int__ 1000000 1000 1s|incr"
  )
  for P in $PIPELINES; do
    if [ "$MODE" = always ]; then N=$N_ALWAYS; else N=$N_EVERYSEC; fi
    [ "$P" = 1 ] || N=$((N * 10))
    for row in "${ROWS[@]}"; do
      IFS='|' read -r name rcmd tcmd side <<<"$row"
      rs=() ts=() ratios=()
      for _ in $(seq 1 "$REPS"); do
        # shellcheck disable=SC2086
        r=$(rps "$RPORT" "$P" "$N" $rcmd)
        # shellcheck disable=SC2086
        t=$(rps "$TPORT" "$P" "$N" $tcmd)
        [ -n "$r" ] && [ -n "$t" ] || break
        rs+=("$r") ts+=("$t") ratios+=("$(python3 -c "print($t / $r)")")
      done
      if [ "${#ts[@]}" -lt "$REPS" ]; then
        printf '%-9s %-12s %-4s %12s\n' "$MODE" "$name" "$P" failed
        continue
      fi
      printf '%-9s %-12s %-4s %12s %12s %8s   %s\n' "$MODE" "$name" "$P" "$(median "${rs[@]}")" \
        "$(median "${ts[@]}")" "$(fmt_ratio "$(median "${ratios[@]}")")" "${side:-same command}"
    done
  done
  stop_servers
done
echo "(medians of $REPS rounds of Redis then Tollgate; ratio = median of the rounds' tollgate/redis)"
