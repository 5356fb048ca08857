"""Open N idle client connections and hold them (bench/conn_memory.sh).

    python3 bench/conn_client.py PORT N [CA CERT KEY]

Each connection is opened (with a TLS handshake when the certificate files are given),
sends one PING and reads its +PONG, so the server has set the client up and served one
request, as a real client's first command does. Then the script prints "ready N" and
holds every connection open, idle, until its standard input closes.
"""

import socket
import ssl
import sys


def main():
    port, n = int(sys.argv[1]), int(sys.argv[2])
    context = None
    if len(sys.argv) > 3:
        ca, cert, key = sys.argv[3:6]
        context = ssl.create_default_context(cafile=ca)
        context.check_hostname = False
        context.load_cert_chain(cert, key)
    held = []
    for i in range(n):
        s = socket.create_connection(("127.0.0.1", port))
        if context is not None:
            s = context.wrap_socket(s)
        s.sendall(b"PING\r\n")
        reply = b""
        while not reply.endswith(b"\r\n"):
            chunk = s.recv(64)
            if not chunk:
                sys.exit(f"connection {i} closed by the server")
            reply += chunk
        if reply != b"+PONG\r\n":
            sys.exit(f"connection {i}: unexpected reply {reply!r}")
        held.append(s)
    print(f"ready {len(held)}", flush=True)
    sys.stdin.read()


if __name__ == "__main__":
    main()
