"""A true blocking ping-pong, for bench/blocking_roundtrip.sh and bench/pubsub.sh.

bench/blpop_pingpong.py <port> <round trips> <delay seconds> [pairs]

Without pairs (or 0): client A sends BLPOP q 0 on an empty list; client B waits <delay>
(time for the server to block A), pushes one element with RPUSH and reads its reply; A then
reads the popped element.

With pairs P: P pairs of clients ping-pong, each pair on its own two lists, issue 19's
"LPUSH/BLPOP ping-pong between pairs of clients": A blocks in BLPOP a; B sends LPUSH a x and
BLPOP b in one write; A, woken with the element, sends LPUSH b x and BLPOP a; and so on. A
client's LPUSH always reaches a partner already blocked (the partner's BLPOP went out with
its own LPUSH, before this client could be woken), so every pop is a blocked client woken by
a push. Stops after <round trips> pops in all (a pop = one woken BLPOP), prints the pops per
second on stdout. <delay> is unused.

Exits non-zero on an unexpected reply, or after 300 s (bounded in time whatever the server
does).
"""
import os
import re
import selectors
import sys
import time

import resp_wire
from resp_wire import cmd, expect

port, n, delay = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
pairs = int(sys.argv[4]) if len(sys.argv) > 4 else 0
LIMIT_S = 300


def conn():
    return resp_wire.conn(port, LIMIT_S)


def one_pair():
    a, b = conn(), conn()
    b.sendall(cmd(b"DEL", b"q"))
    b.recv(100)
    for _ in range(n):
        a.sendall(cmd(b"BLPOP", b"q", b"0"))
        time.sleep(delay)
        b.sendall(cmd(b"RPUSH", b"q", b"x"))
        expect(b, b":1\r\n")
        expect(a, b"*2\r\n$1\r\nq\r\n$1\r\nx\r\n")


class Client:
    """One side of a pair: pops `mine`, pushes to `other`."""

    def __init__(self, mine, other):
        self.sock = conn()
        self.sock.setblocking(False)
        self.mine, self.other = mine, other
        self.push_then_pop = cmd(b"LPUSH", other, b"x") + cmd(b"BLPOP", mine, b"0")
        self.popped = b"*2\r\n$%d\r\n%s\r\n$1\r\nx\r\n" % (len(mine), mine)
        # Bytes expected before this client holds the element again.
        self.want = b""
        self.buf = b""


def pairs_run():
    setup = conn()
    pid = os.getpid()
    keys = [(b"pp:%d:a:%d" % (pid, i), b"pp:%d:b:%d" % (pid, i)) for i in range(pairs)]
    setup.sendall(cmd(b"DEL", *[k for pair in keys for k in pair]))
    setup.recv(100)
    sel = selectors.DefaultSelector()
    clients = []
    for ka, kb in keys:
        a, b = Client(ka, kb), Client(kb, ka)
        clients += [a, b]
        sel.register(a.sock, selectors.EVENT_READ, a)
        sel.register(b.sock, selectors.EVENT_READ, b)
        a.sock.sendall(cmd(b"BLPOP", ka, b"0"))
        a.want = a.popped
    # Every A is blocked before any B pushes (otherwise a B's LPUSH could find no one
    # blocked and A's first BLPOP would not block).
    deadline = time.monotonic() + LIMIT_S
    while True:
        setup.sendall(cmd(b"INFO", b"clients"))
        info = setup.recv(65536)
        m = re.search(rb"blocked_clients:(\d+)", info)
        if m and int(m.group(1)) >= pairs:
            break
        if time.monotonic() > deadline:
            sys.exit("the A clients never all blocked")
        time.sleep(0.01)
    for b in clients[1::2]:
        b.sock.sendall(b.push_then_pop)
        b.want = b":1\r\n" + b.popped
    pops = 0
    start = time.monotonic()
    while pops < n:
        if time.monotonic() > start + LIMIT_S:
            sys.exit(f"only {pops} of {n} pops in {LIMIT_S} s")
        for key, _ in sel.select(timeout=1.0):
            c = key.data
            chunk = c.sock.recv(65536)
            if not chunk:
                sys.exit("connection closed")
            c.buf += chunk
            if len(c.buf) < len(c.want):
                continue
            if c.buf != c.want:
                sys.exit(f"unexpected reply {c.buf!r}, wanted {c.want!r}")
            pops += 1
            c.buf = b""
            c.want = b":1\r\n" + c.popped
            c.sock.sendall(c.push_then_pop)
    elapsed = time.monotonic() - start
    for c in clients:
        c.sock.close()
    print(f"{pops / elapsed:.0f}")


if pairs > 0:
    pairs_run()
else:
    one_pair()
