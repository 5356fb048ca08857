"""redis_py_cluster.py LEADER_PORT PORT...: redis-py's RedisCluster against a Tollgate cluster.

Seeded with each node in turn, the client must see one primary, the leader, owning every
slot, and run commands, a pipeline and CL.THROTTLE through it. Exits 1 on any difference.
"""

import sys

from redis.cluster import RedisCluster


def expect(name, got, want):
    if got != want:
        sys.exit(f"FAIL {name}: got {got!r}, want {want!r}")


def main(leader_port, ports):
    for port in ports:
        c = RedisCluster(host="127.0.0.1", port=port)
        primaries = sorted(n.port for n in c.get_primaries())
        expect(f"primaries seen from {port}", primaries, [leader_port])
        first = c.incr("redis-py:counter")
        expect(f"INCR through {port}", c.incr("redis-py:counter"), first + 1)
        c.close()
    c = RedisCluster(host="127.0.0.1", port=ports[0])
    pipe = c.pipeline()
    pipe.set("redis-py:p", "v")
    pipe.get("redis-py:p")
    expect("pipeline", pipe.execute(), [True, b"v"])
    expect("CL.THROTTLE", c.execute_command("CL.THROTTLE", "redis-py:cell", 1, 10, 60), [0, 2, 1, -1, 6])
    expect("key slot owner", c.get_node_from_key("any-key").port, leader_port)
    c.close()


if __name__ == "__main__":
    main(int(sys.argv[1]), [int(p) for p in sys.argv[2:]])
