"""Checks on deploy/kubernetes/ that the schema validation (kubernetes-validate) cannot make:
the objects fit together (selectors, Service and port names, the volume for --data-dir, the
secret), the peers are the StatefulSet's stable pod names with ids ordinal + 1, probes and
scrape annotations use the HTTP port, and the container's command gives each pod the node id
of its ordinal (run through /bin/sh with a stand-in `tollgate` that prints its arguments).

    python3 tests/ops/kube_check.py
"""

import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
import kube_manifest as km  # noqa: E402

failures = []


def check(ok, what):
    print(("ok: " if ok else "FAIL: ") + what)
    if not ok:
        failures.append(what)


def subset(labels, of):
    return all(of.get(k) == v for k, v in labels.items())


def main():
    objects = km.load_objects()
    sts = km.one(objects, "StatefulSet")
    spec = sts["spec"]
    pod = spec["template"]
    pod_labels = pod["metadata"]["labels"]
    c = km.container(sts)
    replicas = spec["replicas"]

    check(subset(spec["selector"]["matchLabels"], pod_labels), "StatefulSet selector matches its pods")
    check(spec.get("podManagementPolicy") == "Parallel",
          "pods start in parallel (a node is ready only once a majority runs)")
    headless = km.one(objects, "Service", spec["serviceName"])
    check(headless["spec"].get("clusterIP") == "None", f"Service {spec['serviceName']} is headless")
    check(headless["spec"].get("publishNotReadyAddresses") is True,
          "the headless Service publishes pods before they are ready (peers find each other first)")
    for svc in km.by_kind(objects, "Service"):
        check(subset(svc["spec"]["selector"], pod_labels), f"Service {svc['metadata']['name']} selects the pods")
        names = {p.get("name") for p in c.get("ports", [])}
        targets = [p["targetPort"] for p in svc["spec"]["ports"]]
        check(all(t in names for t in targets),
              f"Service {svc['metadata']['name']}'s target ports {targets} are container ports")

    pdb = km.one(objects, "PodDisruptionBudget")
    check(pdb["spec"].get("maxUnavailable") == 1, "PodDisruptionBudget: at most one pod unavailable")
    check(subset(pdb["spec"]["selector"]["matchLabels"], pod_labels), "PodDisruptionBudget selects the pods")

    secrets = {}
    for e in c["env"]:
        ref = e.get("valueFrom", {}).get("secretKeyRef")
        if ref:
            secrets[(ref["name"], ref["key"])] = "a-secret-of-at-least-16-bytes"
    env = km.environment(c, "ns-under-test", secrets)
    check("TOLLGATE_CLUSTER_SECRET" in env and any(
        e["name"] == "TOLLGATE_CLUSTER_SECRET" and "secretKeyRef" in e.get("valueFrom", {}) for e in c["env"]),
        "the cluster secret comes from a Secret")
    cluster_port = int(env["TOLLGATE_CLUSTER_PORT"])
    check(cluster_port == km.port_named(c, "cluster"), "TOLLGATE_CLUSTER_PORT is the container port 'cluster'")
    check(int(env["TOLLGATE_PORT"]) == km.port_named(c, "client"), "TOLLGATE_PORT is the container port 'client'")
    want = {
        i + 1: (f"{sts['metadata']['name']}-{i}.{spec['serviceName']}.ns-under-test.svc", cluster_port)
        for i in range(replicas)
    }
    check(km.peers(env["TOLLGATE_PEERS"]) == want,
          f"--peers are the {replicas} pods' stable names with ids ordinal + 1: {env['TOLLGATE_PEERS']}")

    mounts = {m["name"]: m["mountPath"] for m in c.get("volumeMounts", [])}
    claims = [t["metadata"]["name"] for t in spec.get("volumeClaimTemplates", [])]
    check(any(mounts.get(n) == env["TOLLGATE_DATA_DIR"] for n in claims),
          f"--data-dir {env['TOLLGATE_DATA_DIR']} is a PersistentVolumeClaim's mount")

    http = km.port_named(c, "http")
    check(int(env["TOLLGATE_HTTP_PORT"]) == http, "TOLLGATE_HTTP_PORT is the container port 'http'")
    for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz"), ("startupProbe", "/healthz")):
        get = c.get(probe, {}).get("httpGet", {})
        check(get.get("path") == path and get.get("port") == "http", f"{probe} GETs {path} on the HTTP port")
    ann = pod["metadata"].get("annotations", {})
    check(ann.get("prometheus.io/scrape") == "true" and ann.get("prometheus.io/port") == str(http)
          and ann.get("prometheus.io/path") == "/metrics", "Prometheus scrape annotations name the HTTP port")

    # The node id each pod gets, from a stand-in `tollgate` on PATH.
    with tempfile.TemporaryDirectory() as d:
        fake = os.path.join(d, "tollgate")
        with open(fake, "w") as f:
            f.write('#!/bin/sh\necho "$@"\n')
        os.chmod(fake, 0o755)
        argv = km.command_line(c, env)
        for ordinal in range(replicas):
            run_env = dict(env, PATH=d + ":/usr/bin:/bin", HOSTNAME=f"{sts['metadata']['name']}-{ordinal}")
            out = subprocess.run(argv, env=run_env, capture_output=True, text=True, timeout=10)
            check(out.returncode == 0 and out.stdout.split() == ["--node-id", str(ordinal + 1)],
                  f"pod {run_env['HOSTNAME']} starts tollgate --node-id {ordinal + 1} (got {out.stdout.strip()!r} {out.stderr.strip()!r})")
        out = subprocess.run(argv, env=dict(env, PATH=d + ":/usr/bin:/bin", HOSTNAME="tollgate"),
                             capture_output=True, text=True, timeout=10)
        check(out.returncode == 2 and "no StatefulSet ordinal" in out.stderr,
              "a host name without an ordinal stops the pod with a clear error")

    if failures:
        print(f"{len(failures)} Kubernetes check(s) failed", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
