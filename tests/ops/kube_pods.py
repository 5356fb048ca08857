"""Run deploy/kubernetes/statefulset.yaml's pods as local processes and check that they form
a cluster: each pod gets the manifest's environment (expanded as the kubelet does, the secret
from a made-up Secret) and runs the manifest's command with HOSTNAME=tollgate-<ordinal>; the
headless Service's DNS names resolve through an /etc/hosts of our own to one loopback address
per pod. Then a pod restarts on its data (a rolling update) and a pod moves to a new address
under its name (rescheduled to another machine); both rejoin and catch up. Last, the
manifest's probes as the kubelet sends them (path and named port from the manifest): every
probe answers 200 on each pod of the running cluster, and a pod left alone (the two others
stopped: no quorum) fails its readiness probe while its liveness probe still passes. A binary
without the HTTP listener (`--http-port`) fails that step, saying so.

What differs from a real cluster: the pods share one network namespace, so each listens on
its own address (TOLLGATE_BIND and TOLLGATE_HTTP_BIND set to it instead of 0.0.0.0), and
--data-dir is a local directory instead of the volume. Runs in a network and mount namespace
of its own (re-executes itself under `unshare`, which needs root).

    python3 tests/ops/kube_pods.py TOLLGATE_BINARY
"""

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

import redis

sys.path.insert(0, os.path.dirname(__file__))
import kube_manifest as km  # noqa: E402

NAMESPACE = "tollgate-test"
SECRET = "kube-pods-test-secret-0123456789"


def main():
    binary = os.path.abspath(sys.argv[1])
    if os.environ.get("KUBE_PODS_IN_NAMESPACE") != "1":
        env = dict(os.environ, KUBE_PODS_IN_NAMESPACE="1")
        cmd = ["unshare", "--net", "--mount", "--propagation", "private",
               sys.executable, os.path.abspath(__file__), binary]
        sys.exit(subprocess.run(cmd, env=env).returncode)
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    with tempfile.TemporaryDirectory() as work:
        Cluster(binary, work).run()
    print("ok: the StatefulSet's pods formed a cluster, survived a restart and a move, and "
          "answered their probes")


class Cluster:
    def __init__(self, binary, work):
        objects = km.load_objects()
        self.sts = km.one(objects, "StatefulSet")
        self.container = km.container(self.sts)
        self.replicas = self.sts["spec"]["replicas"]
        self.work = work
        self.bindir = os.path.join(work, "bin")
        os.makedirs(self.bindir)
        shutil.copy(binary, os.path.join(self.bindir, "tollgate"))
        self.hosts = os.path.join(work, "hosts")
        self.addr = {i: f"127.0.0.{11 + i}" for i in range(self.replicas)}
        self.write_hosts()
        subprocess.run(["mount", "--bind", self.hosts, "/etc/hosts"], check=True)
        self.procs = {}

    def name(self, i):
        return f"{self.sts['metadata']['name']}-{i}"

    def write_hosts(self):
        service = self.sts["spec"]["serviceName"]
        lines = ["127.0.0.1 localhost"] + [
            f"{self.addr[i]} {self.name(i)}.{service}.{NAMESPACE}.svc" for i in range(self.replicas)
        ]
        with open(self.hosts, "w") as f:  # in place: the bind mount follows the inode
            f.write("\n".join(lines) + "\n")

    def env(self, i):
        secrets = {}
        for e in self.container["env"]:
            ref = e.get("valueFrom", {}).get("secretKeyRef")
            if ref:
                secrets[(ref["name"], ref["key"])] = SECRET
        env = km.environment(self.container, NAMESPACE, secrets)
        env.update(
            HOSTNAME=self.name(i),
            PATH=f"{self.bindir}:/usr/bin:/bin",
            TOLLGATE_BIND=self.addr[i],
            TOLLGATE_HTTP_BIND=self.addr[i],
            TOLLGATE_DATA_DIR=os.path.join(self.work, f"data-{i}"),
        )
        return env

    def start(self, i):
        env = self.env(i)
        argv = km.command_line(self.container, env)
        log = open(os.path.join(self.work, f"{self.name(i)}.log"), "ab")
        self.procs[i] = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
        self.port = int(env["TOLLGATE_PORT"])
        deadline = time.time() + 15
        while True:
            try:
                socket.create_connection((self.addr[i], self.port), timeout=1).close()
                return
            except OSError:
                if self.procs[i].poll() is not None or time.time() > deadline:
                    self.fail(f"pod {self.name(i)} did not start")
                time.sleep(0.1)

    def stop(self, i, sig=signal.SIGTERM):
        p = self.procs.pop(i)
        p.send_signal(sig)
        p.wait(timeout=30)

    def client(self, i):
        return redis.Redis(host=self.addr[i], port=self.port, socket_timeout=10,
                           socket_connect_timeout=5, decode_responses=True)

    def status(self, i, field):
        try:
            text = self.client(i).execute_command("RAFT.STATUS")
        except redis.exceptions.RedisError:
            return None
        for line in text.splitlines():
            if line.startswith(field + ":"):
                return line.split(":", 1)[1].strip()
        return None

    def wait_leader(self, within=30):
        deadline = time.time() + within
        while time.time() < deadline:
            seen = [self.status(i, "leader_id") for i in self.procs]
            if seen[0] not in (None, "-") and all(s == seen[0] for s in seen):
                return int(seen[0])
            time.sleep(0.1)
        self.fail(f"no agreed leader: {seen}")

    def wait_value(self, key, want, within=60):
        deadline = time.time() + within
        while time.time() < deadline:
            try:
                got = [self.client(i).get(key) for i in self.procs]
            except redis.exceptions.RedisError as e:
                got = [repr(e)]
            if got == [str(want)] * len(self.procs):
                return
            time.sleep(0.2)
        self.fail(f"{key} is not {want} on every pod: {got}")

    def probe(self, i, name):
        """The HTTP status the kubelet would get from pod i's probe `name` (None: no answer)."""
        get = self.container[name]["httpGet"]
        port = get["port"]
        port = km.port_named(self.container, port) if isinstance(port, str) else port
        url = f"http://{self.addr[i]}:{port}{get['path']}"
        try:
            with urllib.request.urlopen(url, timeout=get.get("timeoutSeconds", 1) + 4) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code
        except OSError:
            return None

    def wait_probe(self, i, name, want, within=30):
        deadline = time.time() + within
        while True:
            got = self.probe(i, name)
            if got == want:
                return
            if time.time() > deadline:
                path = self.container[name]["httpGet"]["path"]
                self.fail(f"{self.name(i)}'s {name} ({path}) answers {got}, expected {want}")
            time.sleep(0.2)

    def check_probes(self):
        help_text = subprocess.run([os.path.join(self.bindir, "tollgate"), "--help"],
                                   capture_output=True, text=True, timeout=30).stdout
        if "--http-port" not in help_text:
            # Not a failure of the pods: their logs would say nothing (the finally kills them).
            raise SystemExit("FAIL: the probes cannot be checked: this tollgate has no "
                             "--http-port option, so nothing answers /readyz and /healthz (the "
                             "metrics endpoint of issue 16 is not in this build)")
        probes = ("readinessProbe", "livenessProbe", "startupProbe")
        for i in self.procs:
            for name in probes:
                self.wait_probe(i, name, 200)
        print(f"ok: every pod passes its {', '.join(probes)}")
        alone = 0
        for i in [i for i in self.procs if i != alone]:
            self.stop(i)
        self.wait_probe(alone, "readinessProbe", 503)
        for name in ("livenessProbe", "startupProbe"):
            self.wait_probe(alone, name, 200, within=5)
        print(f"ok: {self.name(alone)} alone (no quorum) fails its readinessProbe, "
              "passes its livenessProbe")

    def fail(self, why):
        for i in list(self.procs):
            self.procs[i].kill()
        for name in sorted(os.listdir(self.work)):
            if name.endswith(".log"):
                with open(os.path.join(self.work, name), errors="replace") as f:
                    print(f"--- {name}\n{f.read()[-4000:]}", file=sys.stderr)
        raise SystemExit(f"FAIL: {why}")

    def run(self):
        try:
            for i in range(self.replicas):
                self.start(i)
            leader = self.wait_leader()
            print(f"ok: {self.replicas} pods elected node {leader}")
            for i in range(self.replicas):
                node_id = self.status(i, "node_id")
                if node_id != str(i + 1):
                    self.fail(f"pod {self.name(i)} is node {node_id}, expected {i + 1}")
            print("ok: pod tollgate-<n> is node n+1")
            self.client(0).incr("hits")
            self.client(self.replicas - 1).incr("hits")
            self.wait_value("hits", 2)
            print("ok: writes through any pod reach every pod")

            # A rolling update restarts a pod on its volume.
            self.stop(1)
            self.client(0).incr("hits")
            self.start(1)
            self.wait_leader()
            self.client(1).incr("hits")
            self.wait_value("hits", 4)
            print("ok: a restarted pod rejoins from its data and catches up")

            # Rescheduled: same name and volume, another address.
            last = self.replicas - 1
            self.stop(last, signal.SIGKILL)
            self.client(0).incr("hits")
            self.addr[last] = f"127.0.0.{21 + last}"
            self.write_hosts()
            self.start(last)
            self.client(0).incr("hits")
            self.wait_value("hits", 6)
            print("ok: a pod back at a new address under its name is found and catches up")
            self.check_probes()
        finally:
            for i in list(self.procs):
                self.procs[i].kill()
                self.procs[i].wait()


if __name__ == "__main__":
    main()
