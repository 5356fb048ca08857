"""A real Prometheus in CI: Debian's `prometheus` scrapes a real three-node Tollgate cluster
under a limiter load, with deploy/prometheus/ci.yml (every second) and the alert rules; then,
through Prometheus's HTTP API:

- every node is `up`; the denied-decisions rate is above zero during the load, for each key
  prefix of the load; each node's decision counters (the max over nodes) equal, per command, prefix
  and outcome, what the load's own replies said (LIMIT.TOKEN and CL.THROTTLE); a Raft metric
  (the term) is there for all three nodes and exactly one node is leader;
- every expression of the Grafana dashboard and of the alert rules evaluates without error,
  and every rule is loaded and healthy;
and on each node's own scrape: `promtool check metrics` passes, and every metric the dashboard
and the rules use is in the scrapes (metric_names.py). Last, the alert rules on the real
series: TollgateDenyRateJump is pending for the load's LIMIT.TOKEN prefixes (denials with no
history), and once a follower is killed, TollgateNodeDown (for its instance) and
TollgateFollowerDown (for its node id, as the leader labels it) are pending, and
TollgateNoLeader is not.

The binary must serve /metrics (`--http-port`, README "Operations"): one without it fails here at
once, saying so, never passes.

Ports 22061-22063 (clients), 22081-22083 (Raft), 22071-22073 (HTTP, as in ci.yml), 22090
(Prometheus); all on 127.0.0.1. Bounded: the load runs 10 s, each wait at most 60 s.

    python3 tests/ops/prometheus_e2e.py TOLLGATE_BINARY
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

import redis

sys.path.insert(0, os.path.dirname(__file__))
import metric_names  # noqa: E402

ROOT = metric_names.ROOT
CLIENT_PORTS = [22061, 22062, 22063]
CLUSTER_PORTS = [22081, 22082, 22083]
HTTP_PORTS = [22071, 22072, 22073]
PROMETHEUS_PORT = 22090
SECRET = "prometheus-e2e-secret-0123456789"

# Metric names: README "Operations".
DENIED_RATE = ('max by (prefix) (rate(tollgate_limiter_decisions_total'
               '{job="tollgate", outcome="denied"}[5s]))')
DECISIONS = ('max by (command, prefix, outcome) '
             '(tollgate_limiter_decisions_total{job="tollgate"})')
RAFT_TERM = 'tollgate_raft_term{job="tollgate"}'
LEADERS = 'sum(tollgate_raft_role{job="tollgate", role="leader"})'
PREFIXES = ("api", "login", "search")


class Run:
    def __init__(self, binary, work):
        self.binary = binary
        self.work = work
        self.procs = []
        self.killed = []

    def spawn(self, argv, log):
        p = subprocess.Popen(argv, stdout=open(os.path.join(self.work, log), "ab"),
                             stderr=subprocess.STDOUT)
        self.procs.append(p)
        return p

    def stop(self):
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def fail(self, why):
        for name in sorted(os.listdir(self.work)):
            if name.endswith(".log"):
                with open(os.path.join(self.work, name), errors="replace") as f:
                    print(f"--- {name}\n{f.read()[-3000:]}", file=sys.stderr)
        raise SystemExit(f"FAIL: {why}")

    def preflight(self):
        """Fail at once, saying why, with a binary that has no metrics endpoint."""
        help_text = subprocess.run([self.binary, "--help"], capture_output=True, text=True,
                                   timeout=30).stdout
        if "--http-port" not in help_text:
            raise SystemExit(
                f"FAIL: {self.binary} has no --http-port option: this build serves no /metrics "
                "(the metrics endpoint of issue 16), so there is nothing for Prometheus to "
                "scrape. This test cannot pass on it.")

    def check_running(self):
        for p in self.procs:
            if p not in self.killed and p.poll() is not None:
                self.fail(f"{' '.join(p.args[:1] + p.args[1:6])} ... exited with status "
                          f"{p.returncode}")

    def start_cluster(self):
        peers = ",".join(f"{i + 1}@127.0.0.1:{p}" for i, p in enumerate(CLUSTER_PORTS))
        for i in range(3):
            self.spawn([self.binary, "--bind", "127.0.0.1", "--port", str(CLIENT_PORTS[i]),
                        "--node-id", str(i + 1), "--peers", peers,
                        "--cluster-port", str(CLUSTER_PORTS[i]), "--cluster-secret", SECRET,
                        "--data-dir", os.path.join(self.work, f"node-{i + 1}"),
                        "--http-bind", "127.0.0.1", "--http-port", str(HTTP_PORTS[i]),
                        "--log", "warn"], f"node-{i + 1}.log")
        deadline = time.time() + 60
        while time.time() < deadline:
            self.check_running()
            try:
                leaders = {self.status(i, "leader_id") for i in range(3)}
                if len(leaders) == 1 and leaders != {"-"}:
                    return
            except redis.exceptions.RedisError:
                pass
            time.sleep(0.2)
        self.fail("the cluster elected no leader")

    def client(self, i):
        # RESP2 (redis-py 8 speaks RESP3 by default): replies are arrays.
        return redis.Redis(host="127.0.0.1", port=CLIENT_PORTS[i], socket_timeout=10,
                           protocol=2, decode_responses=True)

    def status(self, i, field):
        for line in self.client(i).execute_command("RAFT.STATUS").splitlines():
            if line.startswith(field + ":"):
                return line.split(":", 1)[1].strip()
        return None

    def start_prometheus(self):
        config_dir = os.path.join(self.work, "prometheus-config")
        shutil.copytree(os.path.join(ROOT, "deploy", "prometheus"), config_dir)
        self.spawn(["prometheus", f"--config.file={config_dir}/ci.yml",
                    f"--storage.tsdb.path={self.work}/tsdb",
                    f"--web.listen-address=127.0.0.1:{PROMETHEUS_PORT}",
                    "--log.level=warn"], "prometheus.log")

    def load(self, seconds=10):
        """LIMIT.TOKEN on capacity-10 buckets under three key prefixes, CL.THROTTLE under a
        fourth, and INCR, through every node in turn. Returns the decisions as the replies
        said them, {(command, prefix, outcome): count}, and the load's middle (Unix time)."""
        counts = {}
        start = time.time()
        deadline = start + seconds
        rounds = 0
        while time.time() < deadline and rounds < 10_000:
            rounds += 1
            pipe = self.client(rounds % 3).pipeline(transaction=False)
            prefixes = []
            for k in range(30):
                prefixes.append(PREFIXES[k % 3])
                pipe.execute_command("LIMIT.TOKEN", f"{prefixes[-1]}:user{k % 7}", 10, 1, "1s")
            pipe.execute_command("CL.THROTTLE", f"cell:user{rounds % 5}", 5, 10, 60)
            pipe.incr("hits")
            replies = pipe.execute()
            for prefix, reply in zip(prefixes, replies[:30]):
                outcome = "allowed" if reply[0] == 1 else "denied"
                key = ("limit.token", prefix, outcome)
                counts[key] = counts.get(key, 0) + 1
            outcome = "allowed" if replies[30][0] == 0 else "denied"
            key = ("cl.throttle", "cell", outcome)
            counts[key] = counts.get(key, 0) + 1
        return counts, (start + time.time()) / 2

    def query(self, expr, at=None):
        params = {"query": expr}
        if at is not None:
            params["time"] = f"{at:.3f}"
        url = f"http://127.0.0.1:{PROMETHEUS_PORT}/api/v1/query?" + urllib.parse.urlencode(
            params)
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                body = json.load(r)
        except urllib.error.HTTPError as e:
            body = json.load(e)
        if body.get("status") != "success":
            raise ValueError(f"{expr}: {body.get('errorType')}: {body.get('error')}")
        return body["data"]["result"]

    def wait_query(self, expr, ok, what, within=60, at=None):
        deadline = time.time() + within
        result = None
        while time.time() < deadline:
            self.check_running()
            try:
                result = self.query(expr, at)
                if ok(result):
                    return result
            except (OSError, ValueError) as e:
                result = repr(e)
            time.sleep(1)
        self.fail(f"{what}: {expr} returned {result}")

    def check_endpoint(self):
        """Node 1 serves Prometheus metrics on its HTTP port (else Prometheus has nothing)."""
        url = f"http://127.0.0.1:{HTTP_PORTS[0]}/metrics"
        deadline = time.time() + 30
        while True:
            try:
                with urllib.request.urlopen(url, timeout=10) as r:
                    text = r.read().decode()
                break
            except (OSError, ValueError) as e:
                if time.time() > deadline:
                    self.fail(f"GET {url}: {e}")
                time.sleep(0.5)
        if "tollgate_" not in text:
            self.fail(f"GET {url} has no tollgate_ metric: {text[:300]!r}")
        print(f"ok: GET {url} serves Tollgate's metrics")

    def run(self):
        self.preflight()
        self.start_cluster()
        self.check_endpoint()
        # Errors are counted too (the dashboard's error panels): one bad LIMIT.TOKEN per node.
        for i in range(3):
            try:
                self.client(i).execute_command("LIMIT.TOKEN", "api:bad", 0, 1, "1s")
                self.fail("LIMIT.TOKEN with capacity 0 was accepted")
            except redis.exceptions.ResponseError:
                pass
        self.start_prometheus()
        self.wait_query('up{job="tollgate"}',
                        lambda r: len(r) == 3 and all(s["value"][1] == "1" for s in r),
                        "Prometheus does not see the three nodes up")
        print("ok: Prometheus scrapes the three nodes (up == 1)")
        counts, middle = self.load()
        print("ok: load: " + ", ".join(f"{c} {p} {o} {n}" for (c, p, o), n in sorted(counts.items())))
        for prefix in PREFIXES:
            if not counts.get(("limit.token", prefix, "denied")):
                self.fail(f"the load was denied nothing under prefix {prefix}")

        # The rate while the load ran, for each of its prefixes.
        rate = self.wait_query(
            DENIED_RATE,
            lambda r: {s["metric"].get("prefix") for s in r if float(s["value"][1]) > 0}
            >= set(PREFIXES), "no denied-decisions rate for every prefix", at=middle)
        print(f"ok: {DENIED_RATE} during the load: " + ", ".join(
            f"{s['metric'].get('prefix')}: {float(s['value'][1]):.1f}/s" for s in rate))

        # Each node's counters are exactly the load's decisions (README "Operations": every
        # node counts every replicated write it applies, so the max over nodes, not the sum).
        deadline = time.time() + 30
        while True:
            self.check_running()
            got = {(s["metric"].get("command"), s["metric"].get("prefix"),
                    s["metric"].get("outcome")): int(float(s["value"][1]))
                   for s in self.query(DECISIONS)}
            if got == counts or time.time() > deadline:
                break
            time.sleep(1)
        if got != counts:
            self.fail(f"{DECISIONS} is not what the load's replies said: " + "; ".join(
                f"{' '.join(k)}: replies {counts.get(k, 0)}, Prometheus {got.get(k, 0)}"
                for k in sorted(set(counts) | set(got)) if counts.get(k) != got.get(k)))
        print(f"ok: {DECISIONS} equals the load's own counts")

        terms = self.wait_query(RAFT_TERM, lambda r: len(r) == 3, "no Raft term from 3 nodes")
        print(f"ok: {RAFT_TERM} = " + ", ".join(
            f"{s['metric']['instance']}: {s['value'][1]}" for s in terms))
        self.wait_query(LEADERS, lambda r: len(r) == 1 and r[0]["value"][1] == "1",
                        "not exactly one leader")
        print(f"ok: {LEADERS} = 1")

        for where, expr in metric_names.dashboard_exprs() + metric_names.rule_exprs():
            try:
                result = self.query(expr)
            except ValueError as e:
                self.fail(f"{where} does not evaluate: {e}")
            print(f"ok: {where}: {len(result)} series")
        # Rules are "unknown" until their first evaluation (every second in ci.yml).
        deadline = time.time() + 30
        while True:
            self.check_running()
            with urllib.request.urlopen(f"http://127.0.0.1:{PROMETHEUS_PORT}/api/v1/rules",
                                        timeout=10) as r:
                groups = json.load(r)["data"]["groups"]
            rules = [rule for g in groups for rule in g["rules"]]
            bad = [(r["name"], r.get("health"), r.get("lastError")) for r in rules
                   if r.get("health") != "ok"]
            if rules and not bad:
                break
            if time.time() > deadline:
                self.fail(f"alert rules not loaded or unhealthy: {bad or 'none loaded'}")
            time.sleep(1)
        print(f"ok: {len(rules)} rules loaded and evaluated: " + ", ".join(
            f"{r['name']} ({r.get('state', 'recording')})" for r in rules))

        scrapes = []
        for i, port in enumerate(HTTP_PORTS):
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
                text = r.read()
            path = os.path.join(self.work, f"scrape-{i + 1}.txt")
            with open(path, "wb") as f:
                f.write(text)
            scrapes.append(path)
            lint = subprocess.run(["promtool", "check", "metrics"], input=text,
                                  capture_output=True)
            if lint.returncode != 0:
                self.fail(f"promtool check metrics on node {i + 1}: "
                          f"{(lint.stdout + lint.stderr).decode()}")
            print(f"ok: promtool check metrics passes on node {i + 1}'s scrape")
        if metric_names.main(scrapes) != 0:
            self.fail("the dashboard or the rules use metrics the nodes do not export")

        self.check_alerts()

    def wait_alerts(self, want, what, within=30):
        """Wait until, for each (alertname, labels) in `want`, an alert with those labels is
        pending or firing (a rule's `for:` is minutes: pending is what a short test sees)."""
        deadline = time.time() + within
        while True:
            self.check_running()
            with urllib.request.urlopen(f"http://127.0.0.1:{PROMETHEUS_PORT}/api/v1/alerts",
                                        timeout=10) as r:
                alerts = json.load(r)["data"]["alerts"]
            missing = [(name, labels) for name, labels in want
                       if not any(a["labels"].get("alertname") == name
                                  and all(a["labels"].get(k) == v for k, v in labels.items())
                                  and a["state"] in ("pending", "firing") for a in alerts)]
            if not missing:
                return alerts
            if time.time() > deadline:
                self.fail(f"{what}: no pending or firing alert {missing}; alerts: " + ", ".join(
                    f"{a['labels']} {a['state']}" for a in alerts))
            time.sleep(1)

    def check_alerts(self):
        """The rules on the cluster's real series: the load's denials with no history before
        them are a jump; a follower killed is a node down and a follower the leader misses."""
        self.wait_alerts([("TollgateDenyRateJump", {"command": "limit.token", "prefix": p})
                          for p in PREFIXES], "the load's denials")
        print("ok: TollgateDenyRateJump is pending for the load's prefixes "
              + ", ".join(PREFIXES))
        leader = int(self.status(0, "leader_id"))
        victim = next(i for i in range(3) if i + 1 != leader)
        self.killed.append(self.procs[victim])
        self.procs[victim].kill()
        self.procs[victim].wait()
        instance = f"127.0.0.1:{HTTP_PORTS[victim]}"
        self.wait_alerts([("TollgateNodeDown", {"instance": instance}),
                          ("TollgateFollowerDown", {"follower": str(victim + 1)})],
                         f"node {victim + 1} killed")
        print(f"ok: node {victim + 1} killed (a follower of node {leader}): TollgateNodeDown "
              f"for {instance} and TollgateFollowerDown for follower {victim + 1} are pending")
        alerts = self.wait_alerts([], "")
        if any(a["labels"]["alertname"] == "TollgateNoLeader" for a in alerts):
            self.fail("TollgateNoLeader with a leader and a quorum up")


def main():
    binary = os.path.abspath(sys.argv[1])
    with tempfile.TemporaryDirectory() as work:
        run = Run(binary, work)
        try:
            run.run()
        finally:
            run.stop()
    print("ok: a real Prometheus scraped the cluster and found what the dashboard and rules use")


if __name__ == "__main__":
    main()
