"""Subscribers for bench/pubsub.sh: `n` connections SUBSCRIBE to channel `bench` on the
given port and read (and discard) until each has received `count` messages of the
benchmark's 64-byte payload, or 120 s pass (exit 1: a subscriber missed messages).

    python3 bench/pubsub_drain.py <port> <subscribers> <count>
"""
import selectors
import socket
import sys
import time

port, n, count = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
payload = b"x" * 64
confirm = b"*3\r\n$9\r\nsubscribe\r\n$5\r\nbench\r\n:1\r\n"
message = b"*3\r\n$7\r\nmessage\r\n$5\r\nbench\r\n$64\r\n" + payload + b"\r\n"
want = len(confirm) + count * len(message)
sel = selectors.DefaultSelector()
got = {}
for _ in range(n):
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
    s.sendall(b"SUBSCRIBE bench\r\n")
    s.setblocking(False)
    sel.register(s, selectors.EVENT_READ)
    got[s] = 0
deadline = time.time() + 120
while time.time() < deadline and any(v < want for v in got.values()):
    for key, _ in sel.select(timeout=1):
        s = key.fileobj
        try:
            data = s.recv(1 << 20)
        except BlockingIOError:
            continue
        if not data:
            sel.unregister(s)
            continue
        got[s] += len(data)
short = [v for v in got.values() if v < want]
print(f"{n - len(short)} of {n} subscribers got all {count} messages")
sys.exit(1 if short else 0)
