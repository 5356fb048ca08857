"""RESP over a raw socket, shared by the Python load scripts in bench/ that need exact
control of what is written when (bench/blpop_pingpong.py, bench/arrival_order.py).

conn(port, timeout) opens a TCP_NODELAY connection to 127.0.0.1 with a socket timeout, so a
script is bounded in time whatever the server does; cmd(*args) encodes one command (str or
bytes arguments); read(s, want) reads exactly len(want) bytes; expect(s, want) also exits
non-zero unless they are `want`.
"""
import socket
import sys


def conn(port, timeout):
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.settimeout(timeout)
    return s


def cmd(*args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        if isinstance(a, str):
            a = a.encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


def read(s, want):
    buf = b""
    while len(buf) < len(want):
        chunk = s.recv(4096)
        if not chunk:
            sys.exit("connection closed")
        buf += chunk
    return buf


def expect(s, want):
    buf = read(s, want)
    if buf != want:
        sys.exit(f"unexpected reply {buf!r}, wanted {want!r}")
