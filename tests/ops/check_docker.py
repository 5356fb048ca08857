"""Checks on deploy/docker/ that need no Docker engine (none runs on our machines):

- Dockerfile: parsed with the official Go parser (PyPI `dockerfile`); multi-stage; the final
  stage runs as a non-root numeric user, the one the Kubernetes StatefulSet runs as, with
  /usr/local/bin/tollgate as its entry point; the build stage's `cargo build` command is the
  one CI runs (`--build-command` prints it for .ci/run, which runs it) and its Rust version is
  the toolchain CI builds with; every COPY source exists and is not excluded by
  Dockerfile.dockerignore. (hadolint lints it separately.)
- compose.yaml: (schema-checked separately with check-jsonschema's compose-spec) every path it
  mounts or builds from exists; the three nodes' ids, host names and --peers agree; the
  mounted Prometheus configuration scrapes the nodes on their HTTP port; Grafana's mounted
  provisioning points at the mounted dashboard and at the compose Prometheus.

    python3 tests/ops/check_docker.py                  # the checks
    python3 tests/ops/check_docker.py --build-command  # print the build command only
"""

import fnmatch
import os
import re
import subprocess
import sys

import dockerfile
import yaml

sys.path.insert(0, os.path.dirname(__file__))
import kube_manifest as km  # noqa: E402

ROOT = km.ROOT
DOCKER = os.path.join(ROOT, "deploy", "docker")
DOCKERFILE = os.path.join(DOCKER, "Dockerfile")
COMPOSE = os.path.join(DOCKER, "compose.yaml")

failures = []


def check(ok, what):
    print(("ok: " if ok else "FAIL: ") + what)
    if not ok:
        failures.append(what)


def stages():
    """The Dockerfile's instructions grouped by stage: [(from_command, [commands])]."""
    out = []
    for cmd in dockerfile.parse_file(DOCKERFILE):
        if cmd.cmd == "FROM":
            out.append((cmd, []))
        elif out:
            out[-1][1].append(cmd)
    return out


def build_command():
    runs = [c.value[0] for _, cmds in stages() for c in cmds
            if c.cmd == "RUN" and c.value and c.value[0].startswith("cargo build")]
    if len(runs) != 1:
        raise SystemExit(f"expected one RUN cargo build in {DOCKERFILE}, found {runs}")
    return runs[0]


def ignored(path, patterns):
    """Whether a context path is excluded by .dockerignore patterns (no `!` rules used)."""
    for p in patterns:
        p = p.rstrip("/")
        if p.startswith("**/"):
            if fnmatch.fnmatch(os.path.basename(path), p[3:]):
                return True
        elif path == p or path.startswith(p + "/") or fnmatch.fnmatch(path, p):
            return True
    return False


def check_dockerfile():
    all_stages = stages()
    check(len(all_stages) >= 2, f"Dockerfile is multi-stage ({len(all_stages)} stages)")
    final = all_stages[-1][1]
    users = [c.value[0] for c in final if c.cmd == "USER"]
    user = users[-1] if users else "root"
    uid = user.split(":")[0]
    check(uid.isdigit() and uid != "0", f"the image runs as a non-root numeric user ({user})")
    sts = km.one(km.load_objects(), "StatefulSet")
    run_as = sts["spec"]["template"]["spec"]["securityContext"]["runAsUser"]
    check(uid == str(run_as), f"the image's user {uid} is the StatefulSet's runAsUser {run_as}")
    entry = [c for c in final if c.cmd == "ENTRYPOINT"]
    check(bool(entry) and list(entry[-1].value) == ["tollgate"], "the entry point is `tollgate`")
    copies = [c.value for c in final if c.cmd == "COPY"]
    check(any(v[-1] == "/usr/local/bin/tollgate" for v in copies),
          "the binary is /usr/local/bin/tollgate (on PATH for the StatefulSet's `exec tollgate`)")

    cmd = build_command()
    check("--release" in cmd.split() and "--locked" in cmd.split(),
          f"the build stage builds with `{cmd}` (release, Cargo.lock as committed)")
    with open(os.path.join(ROOT, ".ci", "run")) as f:
        ci = f.read()
    check("check_docker.py --build-command" in ci,
          ".ci/run builds with the command it takes from the Dockerfile")

    args = [c.value[0] for c in dockerfile.parse_file(DOCKERFILE) if c.cmd == "ARG"]
    rust = [a.split("=", 1)[1] for a in args if a.startswith("RUST_VERSION=")]
    rustc = subprocess.run(["rustc", "--version"], capture_output=True, text=True).stdout
    local = re.match(r"rustc (\d+\.\d+)", rustc)
    check(bool(rust) and local is not None and rust[0] == local.group(1),
          f"the image builds with Rust {rust[0] if rust else '?'}, CI with {local.group(1) if local else rustc!r}"
          " (update ARG RUST_VERSION when the toolchain changes)")

    ignore_file = DOCKERFILE + ".dockerignore"
    with open(ignore_file) as f:
        patterns = [line.strip() for line in f if line.strip() and not line.startswith("#")]
    for stage_from, cmds in all_stages:
        for c in cmds:
            if c.cmd != "COPY" or any(fl.startswith("--from") for fl in c.flags):
                continue
            for src in c.value[:-1]:
                src = src.rstrip("/").removeprefix("./")
                check(os.path.exists(os.path.join(ROOT, src)) and not ignored(src, patterns),
                      f"COPY source {src} exists in the build context")
    for base, _ in all_stages:
        image = base.value[0]
        check(":" in image and not image.endswith(":latest"), f"base image {image} has a pinned tag")


def check_compose():
    with open(COMPOSE) as f:
        compose = yaml.safe_load(f)
    services = compose["services"]

    def exists(rel, what):
        path = os.path.normpath(os.path.join(DOCKER, rel))
        check(os.path.exists(path), f"{what}: {rel} exists")
        return path

    mounted = {}
    for name, svc in services.items():
        build = svc.get("build")
        if build:
            context = exists(build["context"], f"{name} build context")
            check(os.path.samefile(os.path.join(context, build["dockerfile"]), DOCKERFILE),
                  f"{name} builds deploy/docker/Dockerfile")
        for v in svc.get("volumes", []):
            source, target = v.split(":")[:2]
            if source.startswith((".", "/")):
                mounted[target] = exists(source, f"{name} mounts {target}")
        for env_file in svc.get("env_file", []):
            exists(env_file, f"{name} env_file")

    nodes = {n: s for n, s in services.items() if s.get("image", "").startswith("tollgate")}
    check(len(nodes) == 3, f"three Tollgate nodes ({sorted(nodes)})")
    peers = None
    for name, svc in nodes.items():
        env = svc["environment"]
        node_id = int(svc["command"][svc["command"].index("--node-id") + 1])
        p = km.peers(env["TOLLGATE_PEERS"])
        peers = peers or p
        check(p == peers and p.get(node_id) == (svc["hostname"], int(env["TOLLGATE_CLUSTER_PORT"])),
              f"{name} is node {node_id} at {svc['hostname']}:{env['TOLLGATE_CLUSTER_PORT']} in --peers")
        check(svc.get("restart") in ("on-failure", "always", "unless-stopped"),
              f"{name} is restarted when it exits with status 3")
    http_ports = {svc["environment"]["TOLLGATE_HTTP_PORT"] for svc in nodes.values()}

    with open(mounted["/etc/prometheus/prometheus.yml"]) as f:
        prom = yaml.safe_load(f)
    targets = {t for job in prom["scrape_configs"] for sc in job.get("static_configs", [])
               for t in sc["targets"]}
    want = {f"{s['hostname']}:{port}" for s in nodes.values() for port in http_ports}
    check(targets == want, f"Prometheus scrapes every node's HTTP port: {sorted(targets)}")
    rules_dir = os.path.dirname("/etc/prometheus/prometheus.yml")
    check(all(os.path.join(rules_dir, r) in mounted for r in prom.get("rule_files", [])),
          "Prometheus's rule files are mounted beside its configuration")

    grafana_env = services["grafana"]["environment"]
    with open(mounted["/etc/grafana/provisioning/dashboards/tollgate.yaml"]) as f:
        provider = yaml.safe_load(f)["providers"][0]
    dash_dir = provider["options"]["path"]
    check(os.path.join(dash_dir, "tollgate.json") in mounted,
          f"the dashboard is mounted where the provisioning reads ({dash_dir})")
    check(grafana_env.get("GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH") in mounted,
          "Grafana's home dashboard is the mounted one")
    with open(mounted["/etc/grafana/provisioning/datasources/tollgate.yaml"]) as f:
        ds = yaml.safe_load(f)["datasources"][0]
    check(ds["type"] == "prometheus" and ds["url"].startswith("http://prometheus:"),
          "Grafana's data source is the compose Prometheus")


def main():
    if sys.argv[1:] == ["--build-command"]:
        print(build_command())
        return
    check_dockerfile()
    check_compose()
    if failures:
        print(f"{len(failures)} Docker check(s) failed", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
