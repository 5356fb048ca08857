// ioredis_cluster.js check LEADER_PORT PORT...   |   ioredis_cluster.js failover LEADER_PID PORT...
//
// ioredis's Cluster client against a three-node Tollgate cluster (run by tests/clients/run.sh).
// check: seeded with any one node, the client must find the leader as the only master (from
//   CLUSTER SLOTS) and run commands, a pipeline, a MULTI and rate-limiter-flexible through it.
// failover: INCR in a loop through the cluster client; after 1.5 s it kills the leader
//   (kill -9) and goes on for up to 8 s more. Every acknowledged value must be new and larger
//   than the previous one, and INCRs must succeed again after the kill. Prints
//   {"ok", "errors", "last"} for the runner, which compares them with the nodes' counter.
const Redis = require('ioredis');
const { RateLimiterRedis } = require('rate-limiter-flexible');
const { expect } = require('./common');

const [mode, arg, ...ports] = process.argv.slice(2);
const seeds = (list) => list.map((p) => ({ host: '127.0.0.1', port: Number(p) }));
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function connect(list, options = {}) {
  const c = new Redis.Cluster(seeds(list), { redisOptions: { maxRetriesPerRequest: 2 }, ...options });
  await new Promise((resolve, reject) => {
    c.once('ready', resolve);
    c.once('error', reject);
  });
  return c;
}

async function check(leaderPort) {
  for (const port of ports) {
    const c = await connect([port]);
    expect(`masters seen from ${port}`, c.nodes('master').map((n) => n.options.port), [leaderPort]);
    const a = await c.incr('ioredis:counter');
    const b = await c.incr('ioredis:counter');
    expect(`INCR through ${port}`, b, a + 1);
    await c.quit();
  }
  const c = await connect(ports);
  expect('pipeline', await c.pipeline().set('ioredis:p', 'v').get('ioredis:p').exec(), [[null, 'OK'], [null, 'v']]);
  expect('MULTI', await c.multi().incr('{ioredis}a').incr('{ioredis}a').exec(), [[null, 1], [null, 2]]);
  expect('CL.THROTTLE', await c.call('CL.THROTTLE', 'ioredis:cell', 1, 10, 60), [0, 2, 1, -1, 6]);
  const rl = new RateLimiterRedis({ storeClient: c, keyPrefix: 'ioredis:rlf', points: 2, duration: 5 });
  const seen = [];
  for (let i = 0; i < 3; i++) {
    try {
      seen.push((await rl.consume('k')).remainingPoints);
    } catch (res) {
      seen.push(res instanceof Error ? res.message : 'refused');
    }
  }
  expect('rate-limiter-flexible consume', seen, [1, 0, 'refused']);
  await c.quit();
  console.log(JSON.stringify({ checked: ports.length }));
}

async function failover(leaderPid) {
  const c = await connect(ports, { maxRedirections: 32, retryDelayOnClusterDown: 200 });
  let ok = 0;
  let errors = 0;
  let last = 0;
  let okAfterKill = 0;
  let killedAt = null;
  const t0 = Date.now();
  while (Date.now() - t0 < 9500) {
    if (killedAt === null && Date.now() - t0 > 1500) {
      process.kill(leaderPid, 'SIGKILL');
      killedAt = Date.now();
    }
    try {
      const v = await c.incr('ioredis:failover');
      if (v <= last) throw new Error(`INCR answered ${v} after ${last}`);
      last = v;
      ok++;
      if (killedAt !== null) okAfterKill++;
    } catch (e) {
      if (e.message.startsWith('INCR answered')) throw e;
      errors++;
      await sleep(100);
    }
    await sleep(10);
  }
  c.disconnect();
  if (killedAt === null || okAfterKill < 10) {
    throw new Error(`only ${okAfterKill} INCRs succeeded after the leader was killed`);
  }
  console.log(JSON.stringify({ ok, errors, last }));
}

(mode === 'check' ? check(Number(arg)) : failover(Number(arg))).catch((e) => {
  console.error('FAILED', e);
  process.exit(1);
});
