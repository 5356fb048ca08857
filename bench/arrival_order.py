"""Do requests that reach the server in order run in that order? (issue 19)

bench/arrival_order.py <port> <rounds>

The shape of the Redis suite's "BRPOPLPUSH does not affect WATCH while still blocked"
(unit/type/list): client B blocks in BRPOPLPUSH src dst 0; client W sends WATCH dst, MULTI,
GET somekey, then EXEC without reading its reply; client P then sends LPUSH src element,
which serves B, whose push to dst touches W's watched key. W sent EXEC before P sent LPUSH,
so on Redis the EXEC runs first and answers the GET; a server that runs the LPUSH first
aborts the EXEC (nil). Prints "<aborted> of <rounds> EXECs aborted"; exits non-zero on an
unexpected reply. Each round is bounded (socket timeouts of 10 s).
"""
import sys
import time

import resp_wire
from resp_wire import cmd, expect, read

port, rounds = int(sys.argv[1]), int(sys.argv[2])


def conn():
    return resp_wire.conn(port, 10)


def blocked_clients(s):
    s.sendall(cmd("INFO", "clients"))
    info = s.recv(65536).decode()
    for line in info.split("\r\n"):
        if line.startswith("blocked_clients:"):
            return int(line.split(":")[1])
    sys.exit(f"no blocked_clients in {info!r}")


b, w, p = conn(), conn(), conn()
aborted = 0
committed = b"*1\r\n$9\r\nsomevalue\r\n"
for _ in range(rounds):
    p.sendall(cmd("DEL", "srclist", "dstlist", "somekey"))
    read(p, b":0\r\n")
    p.sendall(cmd("SET", "somekey", "somevalue"))
    expect(p, b"+OK\r\n")
    b.sendall(cmd("BRPOPLPUSH", "srclist", "dstlist", "0"))
    deadline = time.monotonic() + 10
    while blocked_clients(p) != 1:
        if time.monotonic() > deadline:
            sys.exit("BRPOPLPUSH never blocked")
        time.sleep(0.001)
    w.sendall(cmd("WATCH", "dstlist"))
    expect(w, b"+OK\r\n")
    w.sendall(cmd("MULTI"))
    expect(w, b"+OK\r\n")
    w.sendall(cmd("GET", "somekey"))
    expect(w, b"+QUEUED\r\n")
    # EXEC, then the LPUSH on another connection, as the Tcl test sends them.
    w.sendall(cmd("EXEC"))
    p.sendall(cmd("LPUSH", "srclist", "element"))
    expect(p, b":1\r\n")
    reply = read(w, b"*-1\r\n")
    if reply == b"*-1\r\n":
        aborted += 1
    elif reply != committed[: len(reply)] or read(w, committed[len(reply):]) != committed[len(reply):]:
        sys.exit(f"unexpected EXEC reply {reply!r}")
    expect(b, b"$7\r\nelement\r\n")
print(f"{aborted} of {rounds} EXECs aborted")
