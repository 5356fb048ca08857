// ioredis_standalone.js PORT PROTOCOL [redis]
//
// Drives one server through ioredis (RESP2 or RESP3, as PROTOCOL says) and through
// rate-limiter-flexible's RateLimiterRedis (its Lua script via EVALSHA/EVAL, its MULTI
// paths), and prints one JSON line per step. tests/clients/run.sh runs it against
// redis-server and against Tollgate and requires the same lines. Without the `redis`
// argument it also checks Tollgate's native commands, whose replies are fixed here.
const Redis = require('ioredis');
const { expect, rateLimiterSteps } = require('./common');

const port = Number(process.argv[2]);
const protocol = Number(process.argv[3]);
const isRedis = process.argv[4] === 'redis';
const out = [];
const rec = (name, v) => out.push([name, v]);

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

  await rateLimiterSteps(r, {}, rec);
  await r.quit();
  for (const [name, v] of out) console.log(JSON.stringify([name, v]));
}

main().catch((e) => { console.error('FAILED', e); process.exit(1); });
