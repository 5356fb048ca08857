"""The metric names that deploy/grafana/tollgate.json and deploy/prometheus/rules.yml query,
and a check that each is in real scrapes of Tollgate's /metrics.

Names come from parsing every PromQL expression (promql-parser, PyPI) after Grafana's
variables are replaced by values that parse (`$__rate_interval` by `1m`, a label variable by
`.*`): every vector selector's name, or its `__name__="..."` matcher.

    python3 tests/ops/metric_names.py --list                # the names used, one a line
    python3 tests/ops/metric_names.py SCRAPE_FILE...        # fail unless each is scraped
"""

import json
import os
import re
import sys

import promql_parser
import yaml

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
DASHBOARD = os.path.join(ROOT, "deploy", "grafana", "tollgate.json")
RULES = os.path.join(ROOT, "deploy", "prometheus", "rules.yml")

# Series Prometheus writes itself for every target: never in a scrape (prometheus_e2e.py
# queries them through Prometheus instead).
PROMETHEUS_SERIES = {"up"}

GRAFANA_INTERVALS = ("$__rate_interval", "${__rate_interval}", "$__interval", "${__interval}",
                     "$__range", "${__range}")


def without_variables(expr):
    """A Grafana expression with its variables replaced by text that parses."""
    for v in GRAFANA_INTERVALS:
        expr = expr.replace(v, "1m")
    # Inside label matchers ("$instance", "${prefix:regex}") a variable is a value.
    return re.sub(r"\$\{[^}]+\}|\$[A-Za-z_][A-Za-z0-9_]*", ".*", expr)


def selectors(node):
    """Every vector selector under an expression node."""
    kind = type(node).__name__
    if kind == "VectorSelector":
        yield node
    elif kind == "MatrixSelector":
        yield node.vector_selector
    elif kind == "Call":
        for a in node.args:
            yield from selectors(a)
    elif kind == "BinaryExpr":
        yield from selectors(node.lhs)
        yield from selectors(node.rhs)
    elif kind == "AggregateExpr":
        yield from selectors(node.expr)
        if node.param is not None:
            yield from selectors(node.param)
    elif kind in ("ParenExpr", "UnaryExpr", "SubqueryExpr"):
        yield from selectors(node.expr)


def names_in(expr):
    """The metric names an expression selects (error if it does not parse)."""
    names = set()
    for sel in selectors(promql_parser.parse(expr)):
        if sel.name:
            names.add(sel.name)
        for m in sel.matchers.matchers:
            if m.name == "__name__":
                names.add(m.value)
    return names


def dashboard_exprs(path=DASHBOARD):
    """(where, PromQL) for every panel target and query variable of the dashboard."""
    with open(path) as f:
        dash = json.load(f)
    out = []

    def panels(items):
        for p in items:
            yield p
            yield from panels(p.get("panels", []))

    for p in panels(dash.get("panels", [])):
        for t in p.get("targets", []):
            if t.get("expr"):
                out.append((f"panel '{p.get('title')}'", without_variables(t["expr"])))
    for v in dash.get("templating", {}).get("list", []):
        if v.get("type") != "query":
            continue
        q = v.get("query")
        q = q.get("query") if isinstance(q, dict) else q
        m = re.fullmatch(r"\s*label_values\((.*),\s*[A-Za-z_][A-Za-z0-9_]*\s*\)\s*", q or "")
        if m:
            out.append((f"variable '{v.get('name')}'", without_variables(m.group(1))))
    return out


def rule_exprs(path=RULES):
    with open(path) as f:
        rules = yaml.safe_load(f)
    return [(f"rule '{r.get('alert') or r.get('record')}'", r["expr"])
            for g in rules.get("groups", []) for r in g.get("rules", [])]


def used_names():
    """{name: [where it is used]} over the dashboard and the rules."""
    used = {}
    for where, expr in dashboard_exprs() + rule_exprs():
        for name in names_in(expr):
            used.setdefault(name, []).append(where)
    return used


def scraped_names(text):
    """Sample names in a Prometheus text exposition."""
    names = set()
    for line in text.splitlines():
        if line and not line.startswith("#"):
            names.add(re.split(r"[{\s]", line, maxsplit=1)[0])
    return names


def main(argv):
    used = used_names()
    if argv == ["--list"]:
        print("\n".join(sorted(used)))
        return 0
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    scraped = set()
    for path in argv:
        with open(path) as f:
            scraped |= scraped_names(f.read())
    missing = {n: w for n, w in used.items() if n not in scraped and n not in PROMETHEUS_SERIES}
    for name in sorted(used):
        status = "MISSING" if name in missing else "ok"
        if name in PROMETHEUS_SERIES:
            status = "ok (made by Prometheus)"
        print(f"{status}: {name} ({', '.join(sorted(set(used[name])))})")
    if missing:
        print(f"{len(missing)} metric(s) used by the dashboard or the rules are not in the scrape",
              file=sys.stderr)
        return 1
    print(f"ok: all {len(used)} metric names of the dashboard and the rules are in the scrape")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
