// ioredis_standalone.js PORT PROTOCOL [redis]
//
// Drives one server through ioredis (RESP2 or RESP3, as PROTOCOL says) and through
// rate-limiter-flexible's RateLimiterRedis (its Lua script via EVALSHA/EVAL, its MULTI
// paths), and prints one JSON line per step. tests/clients/run.sh runs it against
// redis-server and against Tollgate and requires the same lines. Without the `redis`
// argument it also checks Tollgate's native commands, whose replies are fixed here.
const Redis = require('ioredis');
const { RateLimiterRedis, BurstyRateLimiter, RateLimiterUnion } = require('rate-limiter-flexible');

const port = Number(process.argv[2]);
const protocol = Number(process.argv[3]);
const isRedis = process.argv[4] === 'redis';
const out = [];
const rec = (name, v) => out.push([name, v]);
function expect(name, got, want) {
  if (JSON.stringify(got) !== JSON.stringify(want)) {
    throw new Error(`${name}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
  }
}

async function main() {
  const r = new Redis({ port, protocol, lazyConnect: true, maxRetriesPerRequest: 1 });
  await r.connect();
  await r.flushall();
  rec('set', await r.set('k', 'v'));
  rec('get', await r.get('k'));
  rec('incr', await r.incr('n'));
  rec('incrby', await r.incrby('n', 41));
  rec('expire', await r.expire('n', 100));
  rec('ttl', await r.ttl('n'));
  rec('hset', await r.hset('h', 'a', '1', 'b', '2'));
  rec('hgetall', await r.hgetall('h'));
  rec('zadd', await r.zadd('z', 1, 'a', 2, 'b', 3, 'c'));
  rec('zrange', await r.zrange('z', 0, -1, 'WITHSCORES'));
  rec('zremrangebyscore', await r.zremrangebyscore('z', '-inf', 1));
  rec('zcard', await r.zcard('z'));
  rec('lpush', await r.lpush('l', 'x', 'y'));
  rec('lrange', await r.lrange('l', 0, -1));
  rec('sadd', await r.sadd('s', 'x', 'y', 'x'));
  rec('smembers', (await r.smembers('s')).sort());
  rec('pipeline', await r.pipeline().incr('p').incr('p').get('p').exec());
  rec('multi', await r.multi().incr('m').expire('m', 10).get('m').exec());
  rec('eval', await r.eval("return {KEYS[1], ARGV[1], redis.call('incr', KEYS[1])}", 1, 'e', 'x'));
  r.defineCommand('incrTwice', { numberOfKeys: 1, lua: "redis.call('incr', KEYS[1]); return redis.call('incr', KEYS[1])" });
  rec('defineCommand', await r.incrTwice('d'));
  rec('defineCommand again', await r.incrTwice('d'));
  try { await r.eval('return redis.call("nosuch")', 0); } catch (e) { rec('eval error', e.message); }
  try { await r.incr('k'); } catch (e) { rec('incr error', e.message); }
  const keys = [];
  await new Promise((resolve, reject) => {
    r.scanStream({ match: '*', count: 2 }).on('data', (k) => keys.push(...k)).on('end', resolve).on('error', reject);
  });
  rec('scanStream', [...new Set(keys)].sort());
  // WATCH: a write from another connection aborts the transaction.
  const other = new Redis({ port, protocol });
  await r.watch('w');
  await other.set('w', '1');
  rec('watch aborted', await r.multi().set('w', '2').exec());
  await other.quit();
  if (!isRedis) {
    // redis-cell's reply: allowed (0), limit (burst + 1), remaining, retry after -1, reset 6 s.
    expect('CL.THROTTLE', await r.call('CL.THROTTLE', 'user:1', 2, 10, 60, 1), [0, 3, 2, -1, 6]);
    const token = await r.call('LIMIT.TOKEN', 'tb:1', 5, 1, '1s');
    expect('LIMIT.TOKEN', token, protocol === 3
      ? ['allowed', 1, 'limit', 5, 'remaining', 4, 'retry_after_ms', -1, 'reset_after_ms', 1000]
      : [1, 5, 4, -1, 1000]);
  }

  // rate-limiter-flexible: 3 points per 5 s, the fourth consume is refused.
  const rl = new RateLimiterRedis({ storeClient: r, keyPrefix: 'rlf', points: 3, duration: 5 });
  const seen = [];
  for (let i = 0; i < 4; i++) {
    try {
      const res = await rl.consume('ip1');
      seen.push(['ok', res.remainingPoints, res.consumedPoints, res.msBeforeNext > 4000 && res.msBeforeNext <= 5000]);
    } catch (res) {
      seen.push(['refused', res.remainingPoints, res.consumedPoints, res.msBeforeNext > 4000 && res.msBeforeNext <= 5000]);
    }
  }
  rec('rlf consume', seen);
  const got = await rl.get('ip1');
  rec('rlf get', [got.consumedPoints, got.remainingPoints]);
  rec('rlf penalty', (await rl.penalty('ip1', 2)).consumedPoints);
  rec('rlf reward', (await rl.reward('ip1', 5)).consumedPoints);
  rec('rlf set', (await rl.set('ip2', 2, 10)).consumedPoints);
  rec('rlf block', (await rl.block('ip3', 30)).consumedPoints);
  try { await rl.consume('ip3'); rec('rlf blocked', 'allowed'); } catch (res) { rec('rlf blocked', res.remainingPoints); }
  rec('rlf delete', await rl.delete('ip1'));
  rec('rlf get deleted', await rl.get('ip1'));
  // Without a duration: no expiry (MULTI INCRBY + PTTL).
  const forever = new RateLimiterRedis({ storeClient: r, keyPrefix: 'rlf0', points: 2, duration: 0 });
  rec('rlf no duration', (await forever.consume('a')).remainingPoints);
  // A block duration for refused callers.
  const blocking = new RateLimiterRedis({ storeClient: r, keyPrefix: 'rlfb', points: 1, duration: 5, blockDuration: 20 });
  await blocking.consume('b');
  try { await blocking.consume('b'); } catch (res) { rec('rlf blockDuration', res.msBeforeNext > 15000); }
  // Bursty and union limiters.
  const bursty = new BurstyRateLimiter(
    new RateLimiterRedis({ storeClient: r, keyPrefix: 'bu1', points: 1, duration: 5 }),
    new RateLimiterRedis({ storeClient: r, keyPrefix: 'bu2', points: 2, duration: 10 }),
  );
  const bseen = [];
  for (let i = 0; i < 4; i++) {
    try { await bursty.consume('x'); bseen.push('ok'); } catch (e) { bseen.push('refused'); }
  }
  rec('rlf bursty', bseen);
  const union = new RateLimiterUnion(
    new RateLimiterRedis({ storeClient: r, keyPrefix: 'un1', points: 1, duration: 5 }),
    new RateLimiterRedis({ storeClient: r, keyPrefix: 'un2', points: 5, duration: 5 }),
  );
  await union.consume('u');
  try { await union.consume('u'); rec('rlf union', 'allowed'); } catch (e) { rec('rlf union', Object.keys(e).sort()); }
  await r.quit();
  for (const [name, v] of out) console.log(JSON.stringify([name, v]));
}

main().catch((e) => { console.error('FAILED', e); process.exit(1); });
