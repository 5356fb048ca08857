"""Reading deploy/kubernetes/ as Kubernetes would: the objects by kind and name, the
tollgate container, and its environment and command with Kubernetes' `$(VAR)` expansion.
Shared by kube_check.py (static checks) and kube_pods.py (pods run as local processes)."""

import glob
import os
import re

import yaml

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
KUBE_DIR = os.path.join(ROOT, "deploy", "kubernetes")


def load_objects(directory=KUBE_DIR):
    """Every object in the directory's YAML files, as (file, object)."""
    objects = []
    for path in sorted(glob.glob(os.path.join(directory, "*.yaml"))):
        with open(path) as f:
            for doc in yaml.safe_load_all(f):
                if doc is not None:
                    objects.append((os.path.basename(path), doc))
    return objects


def by_kind(objects, kind):
    return [o for _, o in objects if o.get("kind") == kind]


def one(objects, kind, name=None):
    found = [o for o in by_kind(objects, kind) if name is None or o["metadata"]["name"] == name]
    if len(found) != 1:
        raise AssertionError(f"expected one {kind} {name or ''}, found {len(found)}")
    return found[0]


def container(statefulset, name="tollgate"):
    for c in statefulset["spec"]["template"]["spec"]["containers"]:
        if c["name"] == name:
            return c
    raise AssertionError(f"no container {name}")


def expand(text, env):
    """Kubernetes' expansion of `$(VAR)` in env values, command and args: a defined VAR is
    replaced, `$$` is a literal `$`, anything else stays as written."""
    out, i = [], 0
    while i < len(text):
        if text.startswith("$$", i):
            out.append("$")
            i += 2
        elif text.startswith("$(", i):
            end = text.find(")", i + 2)
            name = text[i + 2 : end] if end >= 0 else None
            if name is not None and name in env:
                out.append(env[name])
                i = end + 1
            else:
                out.append("$(")
                i += 2
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def environment(c, namespace, secrets):
    """The container's environment, in order, as the kubelet builds it: `fieldRef`
    metadata.namespace from `namespace`, `secretKeyRef` from `secrets[(name, key)]`."""
    env = {}
    for e in c.get("env", []):
        if "value" in e:
            env[e["name"]] = expand(str(e["value"]), env)
        elif "fieldRef" in e.get("valueFrom", {}):
            path = e["valueFrom"]["fieldRef"]["fieldPath"]
            if path != "metadata.namespace":
                raise AssertionError(f"unsupported fieldRef {path}")
            env[e["name"]] = namespace
        elif "secretKeyRef" in e.get("valueFrom", {}):
            ref = e["valueFrom"]["secretKeyRef"]
            env[e["name"]] = secrets[(ref["name"], ref["key"])]
        else:
            raise AssertionError(f"unsupported env entry {e}")
    return env


def command_line(c, env):
    """The container's command and args after expansion (the image has no ENTRYPOINT
    override in play: the manifest sets `command`)."""
    return [expand(a, env) for a in c.get("command", []) + c.get("args", [])]


def peers(value):
    """`id@host:port,...` as {id: (host, port)}."""
    out = {}
    for item in value.split(","):
        node_id, addr = item.split("@", 1)
        host, port = addr.rsplit(":", 1)
        out[int(node_id)] = (host, int(port))
    return out


def port_named(c, name):
    for p in c.get("ports", []):
        if p.get("name") == name:
            return p["containerPort"]
    raise AssertionError(f"container has no port named {name}")
