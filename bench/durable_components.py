#!/usr/bin/env python3
"""Instructions per request of a durable write, by task and step, and task wake-ups per Raft
entry, from one callgrind output file of a durable Tollgate node or of redis-server with its
append-only file (bench/durable_instructions.sh's KEEP=<dir> files).

    durable_components.py FILE REQUESTS

Each row is a function's inclusive cost (its own instructions and those of everything it
calls, recursion counted once) divided by REQUESTS; indented rows are parts of the row above
them, so rows do not add up. For Tollgate the roots are the tasks a write passes through:
the connection's task (parse, the engine's path into Raft, the reply), the write batcher,
openraft's core task, openraft's state-machine task and the log writer thread; then the
runtime's idle work (parking a worker, looking at the sockets) and the drop of the in-memory
log when the process stops (the same drop a snapshot's purge does while it runs). The
"calls:" lines count calls: entries applied, passes of openraft's core loop (one
metrics publication each), polls of each task (each poll after the first is a wake-up), the
log writer's fdatasyncs, and worker parks (a worker with nothing to run goes to sleep; each
is a context switch outside callgrind). For redis-server the rows are its event loop, the
command, the AOF feed and its write and fsync.

A file written with callgrind's cache and branch simulators (bench/durable_instructions.sh
with CACHE_SIM=1) gets four more columns per row, each per request: first-level instruction
cache misses (I1), first-level data cache misses (D1, reads and writes), last-level misses
(LL, instructions and data) and mispredicted branches (conditional and indirect).

The file format is callgrind's (valgrind docs, "Callgrind Format Specification"), parsed as
bench/callgrind_components.py does.
"""

import re
import sys
from collections import defaultdict

# (label, depth, exact function name). A label with several names sums them.
TOLLGATE = [
    ("connection task (read, parse, execute, reply, write)", 0,
     ["tollgate::server::connection::serve_tcp::{{closure}}"]),
    # (Engine::execute_replicated, inlined into it in some builds, is not a row of its own.)
    ("the batch (Client::run_batch: the engine's path into Raft)", 1,
     ["tollgate::server::connection::Client::run_batch::{{closure}}"]),
    ("RaftNode::propose (encode, unit, submit, wait)", 2,
     ["tollgate_raft::node::RaftNode<S>::propose::{{closure}}"]),
    ("encode for the log (encode_exact)", 3, ["tollgate_raft::types::encode_exact"]),
    ("typed unit (Local::new)", 3, ["tollgate_raft::local::Local<C,O>::new"]),
    ("write batcher task", 0, ["tollgate_raft::proposer::run_write_batcher::{{closure}}"]),
    ("openraft core task (runtime_loop)", 0,
     ["openraft::core::raft_core::RaftCore<C,N,LS,SM>::runtime_loop::{{closure}}::{{closure}}"]),
    ("metrics publication (flush_metrics)", 1,
     ["openraft::core::raft_core::RaftCore<C,N,LS,SM>::flush_metrics"]),
    ("openraft state-machine task", 0,
     ["openraft::core::sm::worker::Worker<C,SM>::worker_loop::{{closure}}::{{closure}}"]),
    ("apply_batch (units, outputs, replies)", 1,
     ["tollgate_raft::state_machine::StateMachineStore<S>::apply_batch"]),
    ("the command itself (ReplicatedState::apply)", 2,
     ["<tollgate::engine::replicated::ReplicatedState as "
      "tollgate_raft::state_machine::StateMachine>::apply"]),
    ("log writer thread (Writer::run)", 0, ["tollgate_raft::log_store::Writer::run"]),
    ("runtime workers parking (idle)", 0,
     ["tokio::runtime::scheduler::multi_thread::worker::Context::park_internal"]),
    ("dropping the in-memory log (at exit, or a purge)", 0,
     ["core::ptr::drop_in_place<(openraft::entry::Entry<tollgate_raft::types::TypeConfig>,u64)>"]),
]
TOLLGATE_CALLS = [
    ("entries applied", ["tollgate_raft::state_machine::StateMachineStore<S>::apply_batch"]),
    ("openraft core passes (flush_metrics)",
     ["openraft::core::raft_core::RaftCore<C,N,LS,SM>::flush_metrics"]),
    ("write batcher polls", ["tollgate_raft::proposer::run_write_batcher::{{closure}}"]),
    ("openraft core polls",
     ["openraft::core::raft_core::RaftCore<C,N,LS,SM>::runtime_loop::{{closure}}::{{closure}}"]),
    ("state-machine task polls",
     ["openraft::core::sm::worker::Worker<C,SM>::worker_loop::{{closure}}::{{closure}}"]),
    ("connection task polls", ["tollgate::server::connection::serve_tcp::{{closure}}"]),
    ("log fdatasyncs", ["fdatasync"]),
    ("worker parks", ["tokio::runtime::scheduler::multi_thread::worker::Context::park_internal"]),
]
REDIS = [
    ("event loop (aeMain)", 0, ["aeMain"]),
    ("reading and parsing (readQueryFromClient)", 1, ["readQueryFromClient"]),
    ("the command (call)", 2, ["call"]),
    ("AOF feed (feedAppendOnlyFile)", 3, ["feedAppendOnlyFile"]),
    ("before sleeping (beforeSleep)", 1, ["beforeSleep"]),
    ("AOF write and fsync (flushAppendOnlyFile)", 2, ["flushAppendOnlyFile"]),
    ("replies (handleClientsWithPendingWritesUsingThreads)", 2,
     ["handleClientsWithPendingWritesUsingThreads"]),
]
REDIS_CALLS = [
    ("event loop passes (beforeSleep)", ["beforeSleep"]),
    ("AOF fdatasyncs", ["fdatasync", "redis_fsync"]),
]


def parse(path):
    """(inclusive cost vectors by function name, calls by callee name, totals, event names)."""
    names = {"fl": {}, "fn": {}, "ob": {}}
    space = {"ob": "ob", "cob": "ob", "fl": "fl", "fi": "fl", "fe": "fl", "cfi": "fl",
             "cfl": "fl", "fn": "fn", "cfn": "fn"}
    events = ["Ir"]
    incl = defaultdict(lambda: [0] * len(events))
    calls = defaultdict(int)
    fn = cfn = ""
    pending = None
    total = []

    def add(name, parts):
        acc = incl[name]
        for i, v in enumerate(parts[1:len(events) + 1]):
            acc[i] += int(v)

    with open(path, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            c = line[0]
            if c.isdigit() or c in "+-*":
                parts = line.split()
                if pending is not None:
                    calls[cfn] += pending
                    if cfn != fn:
                        add(fn, parts)
                    pending = None
                else:
                    add(fn, parts)
                continue
            m = re.match(r"(ob|cob|fl|fi|fe|cfi|cfl|fn|cfn)=(.*)", line)
            if m:
                key, val = m.group(1), m.group(2).strip()
                table = names[space[key]]
                mm = re.match(r"\((\d+)\)\s*(.*)", val)
                if mm:
                    if mm.group(2):
                        table[mm.group(1)] = mm.group(2)
                    val = table.get(mm.group(1), "?")
                if key == "fn":
                    fn = val
                elif key == "cfn":
                    cfn = val
                continue
            if line.startswith("calls="):
                pending = int(line[6:].split()[0])
            elif line.startswith("events:"):
                events = line.split()[1:]
                incl = defaultdict(lambda: [0] * len(events))
            elif line.startswith(("summary:", "totals:")):
                total = [int(v) for v in line.split()[1:]]
    return incl, calls, total, events


# The columns printed for a file with the cache and branch simulators' events: (label, events
# summed).
MISSES = [("I1 miss", ["I1mr"]), ("D1 miss", ["D1mr", "D1mw"]),
          ("LL miss", ["ILmr", "DLmr", "DLmw"]), ("mispredict", ["Bcm", "Bim"])]


def columns(vec, events, n, sim):
    """Instructions per request, then (with the simulators' events) the miss columns."""
    out = [f"{vec[0] / n:.0f}"]
    if sim:
        for _, evs in MISSES:
            k = sum(vec[events.index(e)] for e in evs if e in events)
            out.append(f"{k / n:.2f}")
    return "\t".join(out)


# A row whose functions the file never names: the run never reached them, or the build
# inlined them into their callers (their cost is counted there). Either way the row cannot
# be split out, which is not a zero.
ABSENT = "absent (inlined in this build, or never run)"
INLINED = ("Rows marked absent name functions this file never shows: never run, or inlined "
           "into their callers by this build. Which functions are inlined depends on the "
           "profile and on the code; a build with thin LTO and 4 units inlines fewer: "
           "CARGO_PROFILE_RELEASE_LTO=thin CARGO_PROFILE_RELEASE_CODEGEN_UNITS=4 cargo build "
           "--release --target-dir target/split, then TOLLGATE_BIN=target/split/release/tollgate.")


def main():
    path, n = sys.argv[1], int(sys.argv[2])
    incl, calls, total, events = parse(path)
    sim = "I1mr" in events
    redis = any(k in incl for k in ("aeMain", "feedAppendOnlyFile"))
    rows, counted = (REDIS, REDIS_CALLS) if redis else (TOLLGATE, TOLLGATE_CALLS)
    if sim:
        print("\t".join(["per request", "instructions"] + [label for label, _ in MISSES]))
    print(f"total\t{columns(total, events, n, sim)}")
    absent = False
    for label, depth, fns in rows:
        if not any(f in incl for f in fns):
            print(f"{'  ' * depth}{label}\t{ABSENT}")
            absent = True
            continue
        vec = [sum(incl[f][i] for f in fns if f in incl) for i in range(len(events))]
        print(f"{'  ' * depth}{label}\t{columns(vec, events, n, sim)}")
    entries = sum(calls.get(f, 0) for f in counted[0][1])
    what = "event-loop pass" if redis else "Raft entry"
    print(f"requests per {what}\t{n / entries:.1f}" if entries else f"no {what} counted")
    for label, fns in counted:
        if not any(f in calls for f in fns):
            print(f"calls: {label}\t{ABSENT}")
            absent = True
            continue
        k = sum(calls.get(f, 0) for f in fns)
        per = f"{k / entries:.2f} per {what}, " if entries else ""
        print(f"calls: {label}\t{per}{k / n:.4f} per request")
    if absent:
        print(INLINED, file=sys.stderr)


if __name__ == "__main__":
    main()
