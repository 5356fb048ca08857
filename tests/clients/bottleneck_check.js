// bottleneck (the Node.js limiter) with its Redis datastore over ioredis: two limiters
// sharing one id (so one reservoir and one concurrency count, kept by bottleneck's Lua
// scripts, which `redis.call('publish', ...)` to wake the limiters' SUBSCRIBEd clients).
// maxConcurrent 2, minTime 100 ms, reservoir 6, 10 jobs: 6 run, the rest wait; after
// incrementReservoir(2), 8 have run. Prints what the library reports at each step, the same
// on redis-server and on Tollgate.
//
//   node bottleneck_check.js <port> [<port of the second limiter>]
const Bottleneck = require('bottleneck');

const port = Number(process.argv[2]);
const portB = Number(process.argv[3] || process.argv[2]);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Wait (at most `within` ms) until `done()` reaches `want`, then a little longer to see that
// no more jobs run.
async function settle(count, want, within) {
  const deadline = Date.now() + within;
  while (count() < want && Date.now() < deadline) await sleep(20);
  await sleep(500);
  return count();
}

async function main() {
  const options = {
    id: `bottleneck-check-${process.pid}`,
    datastore: 'ioredis',
    clearDatastore: true,
    clientOptions: { host: '127.0.0.1', port },
    maxConcurrent: 2,
    minTime: 100,
    reservoir: 6,
  };
  const a = new Bottleneck(options);
  await a.ready();
  const b = new Bottleneck({
    ...options,
    clearDatastore: false,
    clientOptions: { host: '127.0.0.1', port: portB },
  });
  await b.ready();
  const ran = [];
  let running = 0;
  let maxRunning = 0;
  const job = (i) => async () => {
    running += 1;
    maxRunning = Math.max(maxRunning, running);
    await sleep(50);
    running -= 1;
    ran.push(i);
    return i;
  };
  const results = [];
  for (let i = 0; i < 10; i++) {
    const limiter = i % 2 === 0 ? a : b;
    results.push(limiter.schedule(job(i)).catch((e) => `error ${e.message}`));
  }
  const first = await settle(() => ran.length, 6, 8000);
  console.log(`ran before the reservoir ran out: ${first}`);
  console.log(`reservoir now: ${await a.currentReservoir()} / ${await b.currentReservoir()}`);
  console.log(`queued: ${a.counts().QUEUED + b.counts().QUEUED}`);
  await a.incrementReservoir(2);
  const second = await settle(() => ran.length, 8, 8000);
  console.log(`ran after incrementReservoir(2): ${second}`);
  console.log(`reservoir now: ${await b.currentReservoir()}`);
  console.log(`never more than maxConcurrent at once: ${maxRunning <= 2}`);
  await a.updateSettings({ reservoir: null });
  let timer;
  const stalled = new Promise((r) => {
    timer = setTimeout(() => r('stalled'), 8000);
  });
  const all = await Promise.race([Promise.all(results), stalled]);
  clearTimeout(timer);
  console.log(`after removing the reservoir: ${JSON.stringify(all)}`);
  await a.disconnect();
  await b.disconnect();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
