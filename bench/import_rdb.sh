#!/usr/bin/env bash
# Import speed of a ~1 GB RDB file: redis-server loading it at start-up against
# `tollgate import-rdb` loading it into a running (empty) Tollgate, printed as a ratio.
#
#   bench/import_rdb.sh [scale]     (default 1.0: about 1 GB of RDB; 0.1 for a quick run)
#
# The file is generated once with redis-server (random, incompressible values: strings,
# listpack and hash-table hashes, listpack and skiplist sorted sets, lists, intsets and
# hash-table sets) and kept in $CACHE for later runs. Ports: RPORT, TPORT (defaults in
# 21400-21499). Needs about 3 GB of disk and 8 GB of memory at scale 1.
set -euo pipefail
cd "$(dirname "$0")/.."
SCALE=${1:-1.0}
RPORT=${RPORT:-21410}
TPORT=${TPORT:-21411}
CACHE=${CACHE:-/tmp/tollgate-import-bench}
FILE="$CACHE/dump-$SCALE.rdb"
mkdir -p "$CACHE"
if ! command -v redis-server >/dev/null 2>&1; then
  apt-get update -qq && apt-get install -y -qq redis-server redis-tools >/dev/null
fi
cargo build --release -q
# shellcheck source=bench/lib.sh
source bench/lib.sh
name_binary target/release/tollgate

PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
wait_loaded() {
  for _ in $(seq 1 6000); do
    [ "$(redis-cli -p "$1" ping 2>/dev/null)" = PONG ] && return 0
    sleep 0.01
  done
  echo "server on port $1 did not answer" >&2
  return 1
}

if [ ! -s "$FILE" ]; then
  echo "generating $FILE (scale $SCALE) ..."
  GEN=$(mktemp -d "$CACHE/gen.XXXX")
  redis-server --port "$RPORT" --save "" --appendonly no --dir "$GEN" \
    --logfile "$GEN/redis.log" &
  GPID=$!
  PIDS+=("$GPID")
  wait_loaded "$RPORT"
  python3 - "$SCALE" <<'EOF' | redis-cli -p "$RPORT" --pipe >/dev/null
import base64, os, sys
scale = float(sys.argv[1])
out = sys.stdout.buffer
def cmd(*args):
    parts = [b"*%d\r\n" % len(args)]
    for a in args:
        if not isinstance(a, bytes):
            a = str(a).encode()
        parts.append(b"$%d\r\n%s\r\n" % (len(a), a))
    out.write(b"".join(parts))
def rnd(n):
    return base64.b64encode(os.urandom(n * 3 // 4 + 1))[:n]
n = lambda x: max(1, int(x * scale))
for i in range(n(4_000_000)):
    cmd("SET", b"str:%d" % i, rnd(100))
for i in range(n(100_000)):
    args = ["HSET", b"hash:small:%d" % i]
    for f in range(20):
        args += [b"f%d" % f, rnd(20)]
    cmd(*args)
for i in range(n(5_000)):
    args = ["HSET", b"hash:big:%d" % i]
    for f in range(200):
        args += [b"field:%d" % f, rnd(50)]
    cmd(*args)
for i in range(n(50_000)):
    args = ["ZADD", b"zset:small:%d" % i]
    for m in range(50):
        args += [int.from_bytes(os.urandom(3), "little") / 7, rnd(12)]
    cmd(*args)
for i in range(n(2_000)):
    args = ["ZADD", b"zset:big:%d" % i]
    for m in range(1000):
        args += [int.from_bytes(os.urandom(4), "little") / 3, rnd(12)]
    cmd(*args)
for i in range(n(50_000)):
    cmd("RPUSH", b"list:%d" % i, *[rnd(20) for _ in range(100)])
for i in range(n(50_000)):
    cmd("SADD", b"set:%d" % i, *[rnd(16) for _ in range(50)])
for i in range(n(50_000)):
    cmd("SADD", b"intset:%d" % i, *[int.from_bytes(os.urandom(4), "little") for _ in range(100)])
for i in range(n(100_000)):
    cmd("SET", b"ttl:%d" % i, rnd(50), "EX", 86400 * 30)
EOF
  redis-cli -p "$RPORT" save >/dev/null
  redis-cli -p "$RPORT" shutdown nosave >/dev/null 2>&1 || true
  wait "$GPID" 2>/dev/null || true
  mv "$GEN/dump.rdb" "$FILE"
  rm -rf "$GEN"
fi
BYTES=$(stat -c %s "$FILE")
echo "file: $FILE, $((BYTES / 1024 / 1024)) MiB"

# Redis: start with the file and wait until it answers (it answers only after loading).
LOAD=$(mktemp -d "$CACHE/load.XXXX")
ln "$FILE" "$LOAD/dump.rdb" 2>/dev/null || cp "$FILE" "$LOAD/dump.rdb"
START=$(date +%s.%N)
redis-server --port "$RPORT" --save "" --appendonly no --dir "$LOAD" \
  --logfile "$LOAD/redis.log" &
RPID=$!
PIDS+=("$RPID")
wait_loaded "$RPORT"
REDIS_S=$(python3 -c "import time; print(f'{time.time() - $START:.3f}')")
REDIS_KEYS=$(redis-cli -p "$RPORT" dbsize)
REDIS_OWN=$(grep -o 'DB loaded from disk: [0-9.]* seconds' "$LOAD/redis.log" | grep -o '[0-9.]*' || echo "?")
redis-cli -p "$RPORT" shutdown nosave >/dev/null 2>&1 || true
wait "$RPID" 2>/dev/null || true
rm -rf "$LOAD"

# Tollgate: an empty server, then the import tool.
target/release/tollgate --port "$TPORT" --log warn >"$CACHE/tollgate.log" 2>&1 &
TPID=$!
PIDS+=("$TPID")
wait_loaded "$TPORT"
START=$(date +%s.%N)
target/release/tollgate import-rdb "$FILE" --port "$TPORT" 2>&1 | sed 's/^/  /'
TOLLGATE_S=$(python3 -c "import time; print(f'{time.time() - $START:.3f}')")
TOLLGATE_KEYS=$(redis-cli -p "$TPORT" dbsize)
RSS=$(ps -o rss= -p "$TPID" | tr -d ' ')

python3 - "$BYTES" "$REDIS_S" "$REDIS_OWN" "$REDIS_KEYS" "$TOLLGATE_S" "$TOLLGATE_KEYS" "$RSS" <<'EOF'
import sys
size, r, own, rk, t, tk, rss = sys.argv[1:]
mib = int(size) / 2**20
r, t = float(r), float(t)
print(f"{'':28}{'seconds':>10}{'MiB/s':>10}{'keys':>12}")
print(f"{'redis-server load at start':28}{r:>10.2f}{mib / r:>10.1f}{rk:>12}   (its log: {own} s)")
print(f"{'tollgate import-rdb':28}{t:>10.2f}{mib / t:>10.1f}{tk:>12}   (server RSS {int(rss) // 1024} MiB)")
print(f"import speed ratio (tollgate / redis): {r / t:.2f}x")
EOF
