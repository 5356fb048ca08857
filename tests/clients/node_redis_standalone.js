// node_redis_standalone.js PORT PROTOCOL [redis]
//
// Drives one server through node-redis (the `redis` package, over RESP2 or RESP3 as PROTOCOL
// says) and through rate-limiter-flexible's RateLimiterRedis on it (`useRedisPackage`: its
// EVAL call and MULTI paths), and prints one JSON line per step. tests/clients/run.sh runs it
// against redis-server and against Tollgate and requires the same lines. Without the `redis`
// argument it also checks Tollgate's native commands, whose replies are fixed here.
const { createClient } = require('redis');
const { expect, rateLimiterSteps } = require('./common');

const port = Number(process.argv[2]);
const RESP = Number(process.argv[3]);
const isRedis = process.argv[4] === 'redis';
const out = [];
const rec = (name, v) => out.push([name, v]);
const plain = (v) => JSON.parse(JSON.stringify(v, (_, x) => (x instanceof Map ? Object.fromEntries(x) : x)));

async function main() {
  const r = createClient({ socket: { port, reconnectStrategy: false }, RESP });
  r.on('error', () => {});
  await r.connect();
  await r.flushAll();
  rec('set', await r.set('k', 'v', { EX: 100 }));
  rec('get', await r.get('k'));
  rec('ttl', await r.ttl('k'));
  rec('incr', await r.incr('n'));
  rec('incrBy', await r.incrBy('n', 41));
  rec('hSet', await r.hSet('h', { a: '1', b: '2' }));
  rec('hGetAll', plain(await r.hGetAll('h')));
  rec('zAdd', await r.zAdd('z', [{ score: 1, value: 'a' }, { score: 2.5, value: 'b' }]));
  rec('zRangeWithScores', plain(await r.zRangeWithScores('z', 0, -1)));
  rec('lPush', await r.lPush('l', ['x', 'y']));
  rec('lRange', await r.lRange('l', 0, -1));
  rec('sAdd', await r.sAdd('s', ['x', 'y', 'x']));
  rec('sMembers', (await r.sMembers('s')).sort());
  rec('multi', await r.multi().incr('m').expire('m', 10).get('m').exec());
  rec('eval', await r.eval("return {KEYS[1], ARGV[1], redis.call('incr', KEYS[1])}", { keys: ['e'], arguments: ['x'] }));
  const sha = await r.scriptLoad("return redis.call('incrby', KEYS[1], ARGV[1])");
  rec('evalSha', await r.evalSha(sha, { keys: ['e2'], arguments: ['5'] }));
  try { await r.evalSha('0000000000000000000000000000000000000000', { keys: [] }); } catch (e) { rec('NOSCRIPT', e.message); }
  try { await r.incr('k'); } catch (e) { rec('incr error', e.message); }
  // WATCH on an isolated connection: a write from another connection aborts the EXEC.
  const other = r.duplicate();
  other.on('error', () => {});
  await other.connect();
  await r.watch('w');
  await other.set('w', '1');
  try { rec('watch', await r.multi().set('w', '2').exec()); } catch (e) { rec('watch aborted', e.constructor.name); }
  await other.quit();
  if (!isRedis) {
    expect('CL.THROTTLE', await r.sendCommand(['CL.THROTTLE', 'user:1', '2', '10', '60', '1']), [0, 3, 2, -1, 6]);
    expect('LIMIT.TOKEN', await r.sendCommand(['LIMIT.TOKEN', 'tb:1', '5', '1', '1s']), RESP === 3
      ? { allowed: true, limit: 5, remaining: 4, retry_after_ms: -1, reset_after_ms: 1000 }
      : [1, 5, 4, -1, 1000]);
  }

  await rateLimiterSteps(r, { useRedisPackage: true }, rec);
  await r.quit();
  for (const [name, v] of out) console.log(JSON.stringify([name, v]));
}

main().catch((e) => {
  console.error('FAILED', e);
  process.exit(1);
});
