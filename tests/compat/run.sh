#!/usr/bin/env bash
# Start redis-server and Tollgate on free ports and diff their replies to every case file.
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build -q
RPORT=${RPORT:-16390}
TPORT=${TPORT:-16391}
redis-server --port "$RPORT" --save "" --appendonly no --daemonize no >/tmp/compat-redis.log 2>&1 &
RPID=$!
target/debug/tollgate --port "$TPORT" >/tmp/compat-tollgate.log 2>&1 &
TPID=$!
trap 'kill $RPID $TPID 2>/dev/null || true' EXIT
for port in "$RPORT" "$TPORT"; do
  for _ in $(seq 1 100); do
    redis-cli -p "$port" ping >/dev/null 2>&1 && break
    sleep 0.1
  done
done
python3 tests/compat/diff.py "$RPORT" "$TPORT" tests/compat/*.txt
# ACL users: the same rules on both servers, then the same commands as each user.
python3 tests/compat/acl_diff.py "$RPORT" "$TPORT"
# Random calls and malformed input (fixed seeds, bounded): the server must never crash,
# hang or corrupt the reply stream. Reply differences from Redis are printed, not fatal.
fuzz() {
  local out
  out=$(python3 tests/compat/fuzz.py "$RPORT" "$TPORT" "$@") || { echo "$out"; return 1; }
  echo "$out" | grep '^calls:'
}
fuzz --seed 1 --count 5000 --seconds 60
fuzz --seed 11 --count 5000 --seconds 60 --resp 3
