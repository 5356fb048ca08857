// ioredis_tls.js PORT CA CERT KEY
//
// Drives one server through ioredis over TLS (ioredis's `tls` option with a CA and a client
// certificate) and prints one JSON line per step. tests/clients/run.sh runs it against
// redis-server and Tollgate, both with TLS only, and requires the same lines.
const fs = require('fs');
const Redis = require('ioredis');

const [port, ca, cert, key] = process.argv.slice(2);
const out = [];
const rec = (name, v) => out.push([name, v]);

async function main() {
  const r = new Redis({
    host: '127.0.0.1',
    port: Number(port),
    tls: { ca: fs.readFileSync(ca), cert: fs.readFileSync(cert), key: fs.readFileSync(key) },
    lazyConnect: true,
    maxRetriesPerRequest: 1,
  });
  await r.connect();
  await r.flushall();
  rec('set', await r.set('k', 'v'));
  rec('get', await r.get('k'));
  rec('incr', await r.incr('n'));
  const p = r.pipeline();
  for (let i = 0; i < 200; i++) p.incr('n');
  const replies = await p.exec();
  rec('pipeline-last', replies[replies.length - 1]);
  rec('big', (await r.set('big', 'x'.repeat(200000))) + ' ' + (await r.strlen('big')));
  rec('eval', await r.eval("return redis.call('INCRBY', KEYS[1], ARGV[1])", 1, 'n', 10));
  rec('multi', await r.multi().incr('m').incr('m').exec());
  r.disconnect();
  for (const line of out) console.log(JSON.stringify(line));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
