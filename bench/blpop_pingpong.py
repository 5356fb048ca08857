"""A true blocking ping-pong for bench/blocking_roundtrip.sh.

bench/blpop_pingpong.py <port> <round trips> <delay seconds>

Client A sends BLPOP q 0 on an empty list; client B waits <delay> (time for the server to
block A), pushes one element with RPUSH and reads its reply; A then reads the popped
element. Every pop is a blocked client woken by a push, unlike bench/pubsub.sh's 25+25
redis-benchmark row, where the pushers run ahead and the BLPOPs mostly find the list full.
Exits non-zero on an unexpected reply.
"""
import socket
import sys
import time

port, n, delay = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])


def conn():
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def expect(s, want):
    buf = b""
    while len(buf) < len(want):
        chunk = s.recv(4096)
        if not chunk:
            sys.exit("connection closed")
        buf += chunk
    if buf != want:
        sys.exit(f"unexpected reply {buf!r}, wanted {want!r}")


a, b = conn(), conn()
b.sendall(b"*2\r\n$3\r\nDEL\r\n$1\r\nq\r\n")
b.recv(100)
for _ in range(n):
    a.sendall(b"*3\r\n$5\r\nBLPOP\r\n$1\r\nq\r\n$1\r\n0\r\n")
    time.sleep(delay)
    b.sendall(b"*3\r\n$5\r\nRPUSH\r\n$1\r\nq\r\n$1\r\nx\r\n")
    expect(b, b":1\r\n")
    expect(a, b"*2\r\n$1\r\nq\r\n$1\r\nx\r\n")
