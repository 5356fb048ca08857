#!/usr/bin/env bash
# Side-by-side Lua scripting throughput: redis-server and Tollgate (release build) on this
# machine, the user's seed limiter scripts loaded with SCRIPT LOAD on both and driven by
# redis-benchmark EVALSHA with 50 clients, unpipelined and -P 32, keys spread over 10000
# values with __rand_int__. Prints Tollgate's requests/s as a ratio of Redis's.
#
#   bench/scripts.sh [requests]      (default 100000 per row)
#
# Ports 16481 (redis) and 16482 (tollgate); the script refuses to run if either is taken.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-100000}
CLIENTS=${CLIENTS:-50}
RPORT=16481
TPORT=16482
for tool in redis-server redis-cli redis-benchmark python3; do
  command -v "$tool" >/dev/null 2>&1 || { echo "missing $tool" >&2; exit 1; }
done
port_taken() {
  python3 -c "import socket,sys; s=socket.socket(); sys.exit(0 if s.connect_ex(('127.0.0.1', $1)) == 0 else 1)"
}
for port in $RPORT $TPORT; do
  if port_taken "$port"; then echo "port $port is in use; refusing to run" >&2; exit 1; fi
done
cargo build --release -q
BIN=${CARGO_TARGET_DIR:-target}/release/tollgate
WORK=$(mktemp -d)
redis-server --port "$RPORT" --save "" --appendonly no >"$WORK/redis.log" 2>&1 &
RPID=$!
"$BIN" --port "$TPORT" --log warn >"$WORK/tollgate.log" 2>&1 &
TPID=$!
trap 'kill $RPID $TPID 2>/dev/null || true; rm -rf "$WORK"' EXIT
for port in $RPORT $TPORT; do
  for _ in $(seq 1 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
  redis-cli -p "$port" ping >/dev/null || { echo "server on $port did not start" >&2; exit 1; }
done

# Seed 003 §5: token bucket on a hash (HMGET / HMSET / PEXPIRE), verbatim.
cat >"$WORK/token_bucket.lua" <<'LUA'
local subject = ARGV[1]
local key = "token.bucket." .. subject --桶的标识符
local burst = math.max(tonumber(ARGV[2]), 1) --桶中最大令牌数,最小值1,
local refillTime = tonumber(ARGV[3]) or 1000-- 向桶中添加令牌的周期,单位毫秒
local refillAmount = math.max(tonumber(ARGV[4]), 1) or 1 -- 每次refillTime向桶中添加的令牌数量,默认为1
local tokens_to_take = tonumber(ARGV[5]) or 1 --当前请求需要的令牌数量
local now = tonumber(ARGV[6]) --当前时间,单位毫秒
local available_tokens = burst --可用的令牌数默认等于桶的容量
local last_update = now --第一次的last_update等于当前时间
local current = redis.call('HMGET', key, 'last_update', 'available_tokens')
if current.err ~= nil then
redis.call('DEL', key)
current = {}
redis.log(redis.LOG_NOTICE, 'Cannot get ratelimit ' .. key)
return redis.error_reply('Cannot get ratelimit ' .. key)
end
--计算从上次的时间戳与当前时间戳计算应该添加的令牌数
if current[1] then
--上次请求的时间
last_update = current[1]
local content = current[2]
--计算应该生成的令牌数
local delta_ms = math.max(now - last_update, 0)
local refillCount = math.floor(delta_ms / refillTime) * refillAmount
--如果桶满,直接使用桶的容量
available_tokens = math.min(content + refillCount, burst)
end
-- 计算是否有足够的令牌给调用方
local enough_tokens = available_tokens >= tokens_to_take
--之后的请求要偿还之前发生的突发
-- 将令牌给调用方之后,桶中剩余的令牌数
if enough_tokens then
available_tokens = math.min(available_tokens - tokens_to_take, burst)
last_update = last_update + math.floor(tokens_to_take / refillAmount * refillTime)
else
redis.log(redis.LOG_NOTICE, 'Cannot get enough tokens, tokens_to_take:' .. tokens_to_take .. ',available_tokens:' .. available_tokens)
--计算恢复的时间
local reset_time = last_update - now
if reset_time < 0 then
reset_time = now - last_update
end
return { 0, math.max(available_tokens, 0), burst, reset_time}
end
--重新设置令牌桶
redis.call('HMSET', key,
'last_update', last_update,
'available_tokens', available_tokens)
--如果没有新的请求过来,在桶满之后可以直接将该令牌删除。
redis.call('PEXPIRE', key, math.ceil((burst / refillAmount) * refillTime))
return {1, math.max(available_tokens, 0), burst,last_update - now }
LUA

# Seed 003 §4: sliding window counter on a hash (HEXISTS / HGETALL / HINCRBY), verbatim.
cat >"$WORK/sliding_window.lua" <<'LUA'
local subject = "rate.limit." .. ARGV[1] --限流KEY
local limit = tonumber(ARGV[2]) --限流窗口允许的最大请求数
local interval = tonumber(ARGV[3]) --限流间隔,秒
local precision = tonumber(ARGV[4])
local now = tonumber(ARGV[5]) --当前Unix时间戳
--桶的大小不能超过限流的间隔
precision = math.min(precision, interval)
--重新计算限流的KEY,避免传入相同的key,不同的间隔导致冲突
subject = subject .. '.' .. limit .. '.' .. interval .. '.' .. precision
--桶的数量,与位置
local bucket_num = math.ceil(interval / precision)
local oldest_req_key = subject .. ':o'
local bucket_key = math.floor(now / precision)
local trim_before = bucket_key - bucket_num + 1 --需要删除的key
local oldest_req = tonumber(redis.call('GET', oldest_req_key)) or trim_before --最早请求时间,默认为0
trim_before = math.min(oldest_req, trim_before)
--判断当前桶是否存在
local current_bucket = redis.call("hexists", subject, bucket_key)
if current_bucket == 0 then
redis.call("hset", subject, bucket_key, 0)
end
--请求总数
local max_req = 0;
local subject_hash = redis.call("hgetall", subject) or {}
local last_req = now; --最近的访问时间,计算重置窗口
for i = 1, #subject_hash, 2 do
local ts_key = tonumber(subject_hash[i])
if ts_key < trim_before and #subject_hash > 2 then
redis.call("hdel", subject, ts_key)
-- table.insert(dele, ts_key)
else
local req_num =tonumber(subject_hash[i + 1])
max_req = max_req + req_num
if req_num ~= 0 then
last_req = math.min(last_req, math.floor(ts_key * precision))
end
end
end
local reset_time =interval - now+ last_req;
if max_req >= limit then
--返回值为:是否通过0或1,最大请求数,剩余令牌,限流窗口重置时间
return {0, 0, limit, reset_time}
end
-- 当前请求+1
local current = tonumber(redis.call("hincrby", subject, bucket_key, 1))
-- interval+precision之后过期
redis.call("expire", subject, interval+precision)
redis.call("setex", oldest_req_key,interval+precision , now )
--返回值为:是否通过0或1,最大请求数,剩余令牌,限流窗口重置时间
return {1, limit - max_req - 1, limit, reset_time}
LUA

load() { # load <port> <file> -> sha
  redis-cli -p "$1" -x SCRIPT LOAD <"$2"
}
TB_SHA=$(load $RPORT "$WORK/token_bucket.lua")
SW_SHA=$(load $RPORT "$WORK/sliding_window.lua")
for f in token_bucket sliding_window; do
  want=$(load $RPORT "$WORK/$f.lua"); got=$(load $TPORT "$WORK/$f.lua")
  [ "$want" = "$got" ] || { echo "SCRIPT LOAD $f: redis $want, tollgate $got" >&2; exit 1; }
done
# One sanity call on each server: the same script and input give the same reply.
for sha in "$TB_SHA" "$SW_SHA"; do
  args=(EVALSHA "$sha" 0 check 100 1000 1 1 1700000000000)
  [ "$sha" = "$SW_SHA" ] && args=(EVALSHA "$sha" 0 check 100 60 10 1700000000)
  r=$(redis-cli -p $RPORT "${args[@]}"); t=$(redis-cli -p $TPORT "${args[@]}")
  [ "$r" = "$t" ] || { echo "replies differ for $sha: redis [$r] tollgate [$t]" >&2; exit 1; }
done

# rps <port> <pipeline> <args...> -> requests per second
rps() {
  local port=$1 p=$2; shift 2
  redis-benchmark -p "$port" -n "$N" -c "$CLIENTS" -P "$p" -r 10000 --csv "$@" 2>/dev/null \
    | tail -n +2 | tr -d '"' | cut -d, -f2
}

printf '%-16s %-8s %14s %14s %8s\n' script pipeline redis_rps tollgate_rps ratio
for P in 1 32; do
  for name in token_bucket sliding_window; do
    if [ "$name" = token_bucket ]; then
      # burst 100, one token per second, take 1, now fixed: mostly the allow path.
      args=(EVALSHA "$TB_SHA" 0 "user:__rand_int__" 100 1000 1 1 1700000000000)
    else
      # limit 100 per 60 s in 10 s buckets.
      args=(EVALSHA "$SW_SHA" 0 "api:__rand_int__" 100 60 10 1700000000)
    fi
    # Alternate the servers so that machine noise hits both alike.
    r=$(rps $RPORT "$P" "${args[@]}")
    t=$(rps $TPORT "$P" "${args[@]}")
    if [ -n "$r" ] && [ -n "$t" ]; then
      ratio=$(python3 -c "print(f'{$t/$r:.2f}x')")
    else
      ratio="-"
    fi
    printf '%-16s %-8s %14s %14s %8s\n' "$name" "$P" "${r:-failed}" "${t:-failed}" "$ratio"
  done
done
