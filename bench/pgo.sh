#!/usr/bin/env bash
# A profile-guided release build of Tollgate (README "Release build profile", branch pgo83).
#
# Three steps, each in its own target folder so that the plain release build
# (target/release, what `cargo build --release` and every other bench script use) is never
# rebuilt or replaced:
#   1. an instrumented release build (`-Cprofile-generate`) in target/pgo-gen;
#   2. training: the instrumented server runs a fixed set of loads (below), each server
#      writing its .profraw on its graceful exit (SIGTERM), and `llvm-profdata merge` sums
#      them into one .profdata;
#   3. the optimised release build (`-Cprofile-use`) in target/pgo: its binary is
#      target/pgo/release/tollgate.
# The flags go in CARGO_BUILD_RUSTFLAGS, which cargo appends to .cargo/config.toml's
# rustflags (RUSTFLAGS would replace them, dropping `--cfg tokio_unstable`).
#
# The training set (what the binary is optimised for; keep it to the loads the benchmarks
# compare with Redis): redis-benchmark INCR, SET and GET unpipelined (10 and 50 clients)
# and at -P 32; LIMIT.TOKEN unpipelined and at -P 32; PUBLISH to one subscriber; the seed
# token-bucket Lua script by EVALSHA; the 25-pair LPUSH/BLPOP ping-pong
# (bench/blpop_pingpong.py); then durable (`--data-dir`) servers, `--appendfsync everysec`
# and `always`, with unpipelined INCR and LIMIT.TOKEN and -P 32 INCR. Left out on purpose, so
# that they can show whether code the profile did not see got slower: LIMIT.SLIDING and the
# other limiters, hashes, sorted sets, sets, TLS and cluster mode.
#
#   bench/pgo.sh
#   PORT (default 6395), SCALE (requests per load in thousands, default 20: 11-40 s of
#   training on this machine, as its load goes), LLVM_PROFDATA (default: the llvm-profdata of
#   rustc's LLVM major version, /usr/lib/llvm-<major>/bin/llvm-profdata: Debian's llvm-<major>
#   package), PROFDATA (where the merged profile goes, default target/pgo-gen/tollgate.profdata),
#   USE_PROFDATA (skip steps 1 and 2 and build with this profile).
set -euo pipefail
cd "$(dirname "$0")/.."
PORT=${PORT:-6395}
SCALE=${SCALE:-20}
ROOT=$PWD
GEN_DIR=$ROOT/target/pgo-gen
USE_DIR=$ROOT/target/pgo
PROFDATA=${PROFDATA:-$GEN_DIR/tollgate.profdata}
# shellcheck source=bench/lib.sh
source bench/lib.sh
require_tools cargo rustc redis-benchmark redis-cli python3

llvm_major=$(rustc -vV | sed -n 's/^LLVM version: \([0-9]*\).*/\1/p')
LLVM_PROFDATA=${LLVM_PROFDATA:-/usr/lib/llvm-$llvm_major/bin/llvm-profdata}
if [ -z "${USE_PROFDATA:-}" ] && [ ! -x "$LLVM_PROFDATA" ]; then
  echo "$LLVM_PROFDATA is missing: rustc uses LLVM $llvm_major, whose llvm-profdata reads its" \
    "profiles (Debian: apt-get install llvm-$llvm_major; or set LLVM_PROFDATA)" >&2
  exit 1
fi

build() { # <target dir> <extra rustflags>
  echo "+ CARGO_BUILD_RUSTFLAGS='$2' cargo build --release --locked --bin tollgate --target-dir $1" >&2
  CARGO_BUILD_RUSTFLAGS=$2 cargo build --release --locked --bin tollgate --target-dir "$1"
}

PIDS=()
WORK=$(mktemp -d /tmp/bench-pgo.XXXXXX)
trap 'stop_all; rm -rf "$WORK"' EXIT

# serve [tollgate option...]: the instrumented server on PORT (SPID), once it answers PING.
serve() {
  port_free "$PORT"
  "$GEN_DIR/release/tollgate" --port "$PORT" --log warn "$@" >"$WORK/server.log" 2>&1 &
  SPID=$!
  PIDS=("$SPID")
  for _ in $(seq 1 300); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && return; sleep 0.1; done
  echo "the instrumented server did not answer on port $PORT:" >&2
  cat "$WORK/server.log" >&2
  exit 1
}

# stop: SIGTERM, so that the server returns from main and the profile runtime writes its
# .profraw (a SIGKILL writes none).
stop() {
  kill -TERM "$SPID"
  wait "$SPID" || { echo "the instrumented server exited with $?" >&2; cat "$WORK/server.log" >&2; exit 1; }
  PIDS=()
}

# bench <clients> <pipeline> <requests> <redis-benchmark arguments...>
bench() {
  local c=$1 p=$2 n=$3
  shift 3
  redis-benchmark -p "$PORT" -c "$c" -P "$p" -n "$n" -r 10000 -q "$@" >>"$WORK/bench.log" 2>&1 ||
    { echo "redis-benchmark $* failed:" >&2; tail -n 5 "$WORK/bench.log" >&2; exit 1; }
}

train() {
  local k=$((SCALE * 1000)) sha sub
  serve
  bench 10 1 "$k" -t incr,set,get
  bench 50 1 "$k" -t incr,set,get
  bench 50 32 $((k * 10)) -t incr,set,get
  bench 10 1 "$k" LIMIT.TOKEN "bucket:__rand_int__" 100 10 1000
  bench 50 1 "$k" LIMIT.TOKEN "bucket:__rand_int__" 100 10 1000
  bench 50 32 $((k * 10)) LIMIT.TOKEN "bucket:__rand_int__" 100 10 1000
  redis-cli -p "$PORT" subscribe news >/dev/null &
  sub=$!
  bench 50 1 "$k" PUBLISH news hello
  kill "$sub"
  wait "$sub" 2>/dev/null || true
  sha=$(redis-cli -p "$PORT" SCRIPT LOAD "$(cat tests/seeds/seed_003_token_bucket.lua)")
  bench 50 1 "$k" EVALSHA "$sha" 0 "__rand_int__" 1000000 1000 10 1 "$(date +%s%3N)"
  (cd bench && python3 blpop_pingpong.py "$PORT" $((k * 2)) 0 25 >/dev/null)
  stop
  local mode
  for mode in everysec always; do
    rm -rf "$WORK/data"
    mkdir "$WORK/data"
    serve --data-dir "$WORK/data" --appendfsync "$mode"
    bench 10 1 "$k" -t incr
    bench 50 1 "$k" -t incr
    bench 50 1 "$k" LIMIT.TOKEN "t:__rand_int__" 1000000 1000 1s
    bench 50 32 $((k * 5)) -t incr
    stop
  done
}

if [ -z "${USE_PROFDATA:-}" ]; then
  build "$GEN_DIR" "-Cprofile-generate=$GEN_DIR/profraw"
  # The build's own build scripts and proc macros are instrumented too and write profiles
  # as they run: only the server's training counts.
  rm -rf "$GEN_DIR/profraw"
  started=$SECONDS
  train
  echo "training took $((SECONDS - started)) s" >&2
  "$LLVM_PROFDATA" merge -o "$PROFDATA" "$GEN_DIR"/profraw/*.profraw
  USE_PROFDATA=$PROFDATA
fi
# A function whose code changed since the profile was taken is named in a rustc warning
# ("function control flow change detected (hash mismatch)"; LLVM's default, turned off by
# -Cllvm-args=-no-pgo-warn-mismatch): its profile is dropped, the rest is used.
build "$USE_DIR" "-Cprofile-use=$(realpath "$USE_PROFDATA")"
echo "profile: $USE_PROFDATA ($(du -h "$USE_PROFDATA" | cut -f1)); binary: $USE_DIR/release/tollgate" >&2
