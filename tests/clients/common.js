// What the node client checks share: a strict comparison, and the rate-limiter-flexible
// steps run on whichever client is given (ioredis, or node-redis with useRedisPackage).
const { RateLimiterRedis, BurstyRateLimiter, RateLimiterUnion } = require('rate-limiter-flexible');

// Throw unless `got` and `want` are the same JSON (Maps compared as objects).
function expect(name, got, want) {
  const plain = JSON.stringify(got, (_, x) => (x instanceof Map ? Object.fromEntries(x) : x));
  if (plain !== JSON.stringify(want)) {
    throw new Error(`${name}: got ${plain}, want ${JSON.stringify(want)}`);
  }
}

// rate-limiter-flexible's RateLimiterRedis on `client`: its Lua script (consume, penalty,
// reward), its MULTI paths (get, set, block, duration 0), blockDuration, and the bursty and
// union limiters built on it. `rec(name, value)` records what the library reports.
async function rateLimiterSteps(client, options, rec) {
  const limiter = (extra) => new RateLimiterRedis({ storeClient: client, ...options, ...extra });
  const window = (res) => res.msBeforeNext > 4000 && res.msBeforeNext <= 5000;
  // 3 points per 5 s: the fourth consume is refused.
  const rl = limiter({ keyPrefix: 'rlf', points: 3, duration: 5 });
  const seen = [];
  for (let i = 0; i < 4; i++) {
    try {
      const res = await rl.consume('ip1');
      seen.push(['ok', res.remainingPoints, res.consumedPoints, window(res)]);
    } catch (res) {
      seen.push(['refused', res.remainingPoints, res.consumedPoints, window(res)]);
    }
  }
  rec('rlf consume', seen);
  const got = await rl.get('ip1');
  rec('rlf get', [got.consumedPoints, got.remainingPoints]);
  rec('rlf penalty', (await rl.penalty('ip1', 2)).consumedPoints);
  rec('rlf reward', (await rl.reward('ip1', 5)).consumedPoints);
  rec('rlf set', (await rl.set('ip2', 2, 10)).consumedPoints);
  rec('rlf block', (await rl.block('ip3', 30)).consumedPoints);
  try {
    await rl.consume('ip3');
    rec('rlf blocked', 'allowed');
  } catch (res) {
    rec('rlf blocked', res.remainingPoints);
  }
  rec('rlf delete', await rl.delete('ip1'));
  rec('rlf get deleted', await rl.get('ip1'));
  // Without a duration: no expiry (MULTI INCRBY + PTTL).
  rec('rlf no duration', (await limiter({ keyPrefix: 'rlf0', points: 2, duration: 0 }).consume('a')).remainingPoints);
  // A block duration for refused callers.
  const blocking = limiter({ keyPrefix: 'rlfb', points: 1, duration: 5, blockDuration: 20 });
  await blocking.consume('b');
  try {
    await blocking.consume('b');
    rec('rlf blockDuration', 'allowed');
  } catch (res) {
    rec('rlf blockDuration', res.msBeforeNext > 15000);
  }
  const bursty = new BurstyRateLimiter(
    limiter({ keyPrefix: 'bu1', points: 1, duration: 5 }),
    limiter({ keyPrefix: 'bu2', points: 2, duration: 10 }),
  );
  const bseen = [];
  for (let i = 0; i < 4; i++) {
    try {
      await bursty.consume('x');
      bseen.push('ok');
    } catch (e) {
      bseen.push('refused');
    }
  }
  rec('rlf bursty', bseen);
  const union = new RateLimiterUnion(
    limiter({ keyPrefix: 'un1', points: 1, duration: 5 }),
    limiter({ keyPrefix: 'un2', points: 5, duration: 5 }),
  );
  await union.consume('u');
  try {
    await union.consume('u');
    rec('rlf union', 'allowed');
  } catch (e) {
    rec('rlf union', Object.keys(e).sort());
  }
}

module.exports = { expect, rateLimiterSteps };
