#!/usr/bin/env bash
# deploy/systemd/tollgate.service: `systemd-analyze verify` must pass without a single
# warning (it exits 0 on unknown keys and bad values, so its output is checked too), the
# sandbox's exposure score (`systemd-analyze security`, offline) must stay at or below 2.0 (--threshold=20: tenths)
# ("OK"), and the settings the README promises must be there. Works in a container without
# systemd as PID 1 (Debian package `systemd` for the tool).
#
#   bash tests/ops/check_systemd.sh [TOLLGATE_BINARY]
set -euo pipefail
bin=$(realpath -m "${1:-$(dirname "$0")/../../target/release/tollgate}")
cd "$(dirname "$0")/../.."
unit=deploy/systemd/tollgate.service
[[ -x "$bin" ]] || { echo "no tollgate binary at $bin" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# verify checks that ExecStart's program exists: point it at the built binary.
sed "s#/usr/local/bin/tollgate#$bin#g" "$unit" >"$tmp/tollgate.service"
if ! out=$(systemd-analyze verify "$tmp/tollgate.service" 2>&1) || [[ -n "$out" ]]; then
    echo "FAIL: systemd-analyze verify $unit:" >&2
    echo "$out" >&2
    exit 1
fi
echo "ok: systemd-analyze verify $unit"

if ! systemd-analyze security --offline=yes --threshold=20 "$tmp/tollgate.service" \
    >"$tmp/security.txt" 2>&1; then
    echo "FAIL: sandbox exposure above 2.0:" >&2
    grep -E '^✗|Overall' "$tmp/security.txt" >&2 || cat "$tmp/security.txt" >&2
    exit 1
fi
echo "ok: $(grep -o 'Overall exposure level.*' "$tmp/security.txt")"

# What the README and the failure model rely on.
for want in 'Restart=on-failure' 'RestartPreventExitStatus=2' 'LimitNOFILE=65536' \
    'DynamicUser=yes' 'StateDirectory=tollgate' 'ProtectSystem=strict' \
    'ExecStart=/usr/local/bin/tollgate --config /etc/tollgate/tollgate.toml'; do
    grep -qxF "$want" "$unit" || { echo "FAIL: $unit lacks '$want'" >&2; exit 1; }
done
# The example configuration keeps its data in the unit's state directory.
grep -qx 'data-dir = "/var/lib/tollgate"' deploy/systemd/tollgate.toml ||
    { echo "FAIL: tollgate.toml's data-dir is not /var/lib/tollgate" >&2; exit 1; }
echo "ok: $unit restarts on failure (exit 3 included), not on a configuration error (2)"
