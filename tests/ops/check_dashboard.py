"""Checks of deploy/grafana/tollgate.json that need no Grafana (none runs here): the layout
(unique panel ids, panels inside the 24-column grid and not overlapping), every query on the
dashboard's `datasource` variable, every `$variable` an expression uses defined, every PromQL
expression parses (promql-parser, through metric_names.py), and the panels the README promises
are there (each by the metric and, for latencies, the quantile it shows). Whether the
expressions evaluate on a real Prometheus and the metrics exist in a real scrape:
prometheus_e2e.py and metric_names.py.

    python3 tests/ops/check_dashboard.py
"""

import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(__file__))
import metric_names  # noqa: E402

GRAFANA_BUILTINS = {"__rate_interval", "__interval", "__range", "__interval_ms", "__range_s",
                    "__range_ms"}

# (what the README promises, a regular expression one expression of the dashboard matches)
PROMISED = [
    ("allowed decisions by command and prefix",
     r'max by \(command, prefix\) \(rate\(tollgate_limiter_decisions_total\{[^}]*outcome="allowed"'),
    ("denied decisions by command and prefix",
     r'max by \(command, prefix\) \(rate\(tollgate_limiter_decisions_total\{[^}]*outcome="denied"'),
    ("ops/s", r"rate\(tollgate_commands_total"),
    ("p50 latency", r"histogram_quantile\(0\.5, .*tollgate_command_duration_seconds_bucket"),
    ("p99 latency", r"histogram_quantile\(0\.99, .*tollgate_command_duration_seconds_bucket"),
    ("memory", r"tollgate_memory_used_bytes"),
    ("clients", r"tollgate_connected_clients"),
    ("Raft role", r"tollgate_raft_role"),
    ("Raft term", r"tollgate_raft_term"),
    ("commit lag", r"tollgate_raft_follower_lag_entries"),
    ("fsync p99", r"histogram_quantile\(0\.99, .*tollgate_raft_fsync_duration_seconds_bucket"),
    ("-CLUSTERDOWN rate", r"rate\(tollgate_clusterdown_replies_total"),
]

failures = []


def check(ok, what):
    print(("ok: " if ok else "FAIL: ") + what)
    if not ok:
        failures.append(what)


def main():
    with open(metric_names.DASHBOARD) as f:
        dash = json.load(f)
    panels = dash["panels"]
    variables = {v["name"]: v for v in dash.get("templating", {}).get("list", [])}

    ids = [p["id"] for p in panels]
    check(len(ids) == len(set(ids)), f"{len(ids)} panel ids, all different")
    cells = {}
    for p in panels:
        g = p["gridPos"]
        inside = g["x"] >= 0 and g["w"] > 0 and g["x"] + g["w"] <= 24 and g["h"] > 0
        if not inside:
            check(False, f"panel '{p['title']}' inside the 24 columns: {g}")
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                if (x, y) in cells:
                    check(False, f"panels '{cells[(x, y)]}' and '{p['title']}' overlap")
                cells[(x, y)] = p["title"]
    check(not failures, "every panel inside the grid, none overlapping")

    ds = variables.get("datasource", {})
    check(ds.get("type") == "datasource" and ds.get("query") == "prometheus",
          "a 'datasource' variable of Prometheus data sources")
    want = {"type": "prometheus", "uid": "${datasource}"}
    for p in panels:
        if p["type"] == "row":
            continue
        check(p.get("datasource") == want and p.get("targets")
              and all(t.get("datasource") == want for t in p["targets"]),
              f"panel '{p['title']}' queries ${{datasource}} ({len(p.get('targets', []))} queries)")
        check(bool(p.get("description")), f"panel '{p['title']}' has a description")

    raw = []
    for p in panels:
        raw += [(f"panel '{p['title']}'", t["expr"]) for t in p.get("targets", [])]
    for v in variables.values():
        if v.get("type") == "query":
            q = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
            raw.append((f"variable '{v['name']}'", q))
    for where, expr in raw:
        used = {m.group(1) or m.group(2)
                for m in re.finditer(r"\$\{([A-Za-z_]\w*)(?::\w+)?\}|\$([A-Za-z_]\w*)", expr)}
        unknown = used - set(variables) - GRAFANA_BUILTINS
        check(not unknown, f"{where}: variables {sorted(used)} defined")
    for where, expr in metric_names.dashboard_exprs():
        try:
            names = metric_names.names_in(expr)
        except Exception as e:  # promql_parser raises its own error types
            check(False, f"{where}: does not parse: {e}: {expr}")
            continue
        check(bool(names), f"{where}: parses, uses {', '.join(sorted(names))}")

    exprs = [expr for _, expr in raw]
    for what, pattern in PROMISED:
        check(any(re.search(pattern, e) for e in exprs), f"the dashboard shows {what}")

    if failures:
        print(f"{len(failures)} check(s) of the dashboard failed", file=sys.stderr)
        return 1
    print("ok: deploy/grafana/tollgate.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
