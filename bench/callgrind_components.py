#!/usr/bin/env python3
"""Instructions per request of a TLS server, by component, from callgrind output files.

    callgrind_components.py FULL.out BASE.out REQUESTS [memcpy-callers N]

FULL is a run of REQUESTS more requests than BASE (the same start-up, handshakes and
shutdown), so (FULL - BASE) / REQUESTS is the work per request. Each function's own
instructions (self cost, not inclusive) go to the first component whose pattern matches
"<object file> <function>", so the components add up to the total. Printed as
"component instructions" lines, then "calls:<name> <calls per request>" for the counted
calls (TLS records sealed and opened, socket reads and writes), then, when asked, the
callers of memcpy/memmove by the instructions those copies cost them per request.

The file format is callgrind's (valgrind docs, "Callgrind Format Specification"): ob=/fl=/
fn= name the current object, file and function ("(id) name" the first time, "(id)" after),
cob=/cfn= the callee of the calls= line that follows, whose next line is the call's
inclusive cost (not the caller's own); other lines are "<position> <cost>". Only Ir is
collected by default; with the cache simulator on, the other events' totals per request are
printed as "events:<name> <per request>" (D1mr/D1mw: first-level data cache read/write
misses, DLmr/DLmw: last-level).
"""

import re
import sys
from collections import defaultdict

# First match wins. Matched against "<object basename> <function>".
COMPONENTS = [
    # AES-GCM / ChaCha20-Poly1305 record crypto: ring's assembly (ring_core_* symbols and
    # the stitched AES-NI/AVX _aesni_ctr32_ghash_6x, OpenSSL's perlasm which ring shares)
    # and Rust (ring::aead), OpenSSL's named libcrypto functions (its assembly is static:
    # unnamed, the row after next).
    ("aead (AES-GCM)", r"ring_core_\S*(aes|gcm|ghash|chacha|poly1305|CRYPTO_memcmp)|ring::aead|"
     r" _?aesni_\w*|_vaes\w*|libcrypto\S* .*(aes|gcm|ghash|GCM|chacha|poly1305|ctr128|ctr32)"),
    ("other crypto (hash, kx, rand)", r"ring_core_|ring::"),
    ("libcrypto, unnamed (static: its AES-GCM assembly among them)", r"libcrypto\S* 0x"),
    ("crypto glue (EVP, providers)", r"libcrypto"),
    ("tokio-rustls, ReadAhead", r"tokio_rustls::|tls::ReadAhead"),
    ("TLS library (rustls / libssl)", r"rustls::|libssl"),
    ("memcpy / memmove", r"libc\S* .*(memcpy|memmove|mempcpy)"),
    ("allocator", r"libc\S* .*(malloc|free|realloc|calloc|_int_|tcache|arena|alloc)|"
     r"tollgate::alloc|__rust_(alloc|dealloc|realloc)|__rdl_| _?mi_\w+|^libjemalloc|"
     r"^redis-check-rdb (zmalloc|zfree|zrealloc|zcalloc)\w*$"),
    ("libc other (syscall wrappers, memset, strcasecmp, ...)", r"^libc|^ld-linux"),
    # Tollgate: the command (limiter, engine, store and its hash tables, metrics), then the
    # protocol and connection (parse, dispatch, reply encoding, the connection task).
    ("command (limiter / INCR, keyspace)", r"tollgate::(limiter|store|command::(limiter|string|counter)|"
     r"engine|metrics)|hashbrown::|core::hash::|::hash::"),
    ("protocol, connection", r"tollgate::(protocol|server|reply|command)"),
    ("tokio runtime, mio", r"tokio::|mio::|parking_lot|std::"),
    ("tollgate other", r"tollgate"),
    # redis-server (the binary is redis-check-rdb; dynamic symbols only): INCR itself and
    # the keyspace it touches, then the rest (protocol, dispatch, replies, event loop).
    ("command (limiter / INCR, keyspace)", r"^redis-check-rdb (incr\w*|dict\w*|siphash\w*|lookupKey\w*|"
     r"dbAdd|setKey|\w*StringObject\w*|string2ll|getLongLongFrom\w*|\w*[nN]otifyKeyspaceEvent|"
     r"signalModifiedKey|trackingInvalidateKey\w*|decrRefCount|\w*sdsnewlen|dictSds\w*|"
     r"touchWatchedKey|expireIfNeeded|keyIsExpired|tryObjectEncoding\w*|ll2string|sdigits10|"
     r"dbGenericSet|setExpire|getExpire|keyHashSlot|rewriteClientCommandArgument)$"),
    ("protocol, connection", r"^redis-check-rdb "),
    ("redis-benchmark itself (client)", r"^redis-benchmark "),
]
COMPILED = [(name, re.compile(p)) for name, p in COMPONENTS]

# Calls counted per request: callee pattern -> label.
CALLS = [
    # One ring seal/open per record; OpenSSL's TLS 1.3 record layer sets each record's
    # nonce with one EVP_CipherInit_ex, sealing or opening.
    ("TLS records sealed + opened", r" ring::aead::aes_gcm::(seal|open)$|libcrypto\S* EVP_CipherInit_ex$"),
    ("socket reads", r"libc\S* (recv|recvfrom|__libc_recv|read|__libc_read|readv|recvmsg)$"),
    ("socket writes", r"libc\S* (send|sendto|__libc_send|write|__libc_write|writev|__writev|sendmsg)$"),
]
CALLS_C = [(name, re.compile(p)) for name, p in CALLS]
COPY = re.compile(r"(memcpy|memmove|mempcpy)")
# The record crypto, inclusive: calls from the TLS library into the AEAD (OpenSSL's EVP
# cipher calls from libssl; ring's aead from rustls), whatever the callee's own name.
AEAD_CALLER = re.compile(r"^libssl|rustls::")
AEAD_CALLEE = re.compile(r" (EVP_Cipher\w*|EVP_CIPHER_CTX_ctrl|EVP_(En|De)crypt\w*)$|ring::aead|ring_core_\S*(aes|gcm)")


def parse(path):
    """(self cost by "obj fn", calls by callee "obj fn", copy cost by caller)."""
    names = {"ob": {}, "fl": {}, "fn": {}}
    space = {"ob": "ob", "cob": "ob", "fl": "fl", "fi": "fl", "fe": "fl", "cfi": "fl",
             "cfl": "fl", "fn": "fn", "cfn": "fn"}
    selfc = defaultdict(int)
    calls = defaultdict(int)
    copies = defaultdict(int)
    ob = fn = cob = cfn = ""
    pending_call = None
    events, totals = ["Ir"], {}
    with open(path, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            c = line[0]
            if c.isdigit() or c in "+-*":
                parts = line.split()
                cost = int(parts[1]) if len(parts) > 1 else 0
                if pending_call is not None:
                    callee = (cob or ob) + " " + cfn
                    if COPY.search(cfn):
                        copies[ob + " " + fn] += cost
                    caller = ob + " " + fn
                    if AEAD_CALLER.search(caller) and not AEAD_CALLEE.search(caller) and \
                            AEAD_CALLEE.search(callee):
                        copies["aead-inclusive"] += cost
                    calls[callee] += pending_call
                    pending_call = None
                    cob = ""
                else:
                    selfc[ob + " " + fn] += cost
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
                if key in ("ob", "cob"):
                    val = val.rsplit("/", 1)[-1]
                if key == "ob":
                    ob = val
                elif key == "cob":
                    cob = val
                elif key == "fn":
                    fn = val
                    cob = ""
                elif key == "cfn":
                    cfn = val
                continue
            if line.startswith("calls="):
                pending_call = int(line[6:].split()[0])
            elif line.startswith("events:"):
                events = line.split()[1:]
            elif line.startswith(("summary:", "totals:")):
                totals = dict(zip(events, (int(x) for x in line.split()[1:])))
    copies["totals"] = totals
    return selfc, calls, copies


def component(key):
    for name, rx in COMPILED:
        if rx.search(key):
            return name
    return "other"


def main():
    full, base, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    show_copies = int(sys.argv[5]) if len(sys.argv) > 5 and sys.argv[4] == "memcpy-callers" else 0
    fs, fc, fcp = parse(full)
    bs, bc, bcp = parse(base)
    comp = defaultdict(int)
    for key in set(fs) | set(bs):
        comp[component(key)] += fs.get(key, 0) - bs.get(key, 0)
    total = sum(comp.values())
    for name in dict.fromkeys([c[0] for c in COMPONENTS] + ["other"]):
        if name in comp:
            print(f"{name}\t{comp[name] / n:.0f}")
    print(f"total\t{total / n:.0f}")
    for label, rx in CALLS_C:
        k = sum(v for key, v in fc.items() if rx.search(key)) - sum(
            v for key, v in bc.items() if rx.search(key))
        print(f"calls:{label}\t{k / n:.4f}")
    ft, bt = fcp.pop("totals"), bcp.pop("totals")
    for ev in ft:
        if ev != "Ir":
            print(f"events:{ev}\t{(ft[ev] - bt.get(ev, 0)) / n:.2f}")
    aead = fcp.pop("aead-inclusive", 0) - bcp.pop("aead-inclusive", 0)
    print(f"record crypto, inclusive (TLS library's calls into the AEAD)\t{aead / n:.0f}")
    if show_copies:
        d = {k: fcp.get(k, 0) - bcp.get(k, 0) for k in set(fcp) | set(bcp)}
        for k, v in sorted(d.items(), key=lambda kv: -kv[1])[:show_copies]:
            print(f"copy:{k[:150]}\t{v / n:.0f}")


if __name__ == "__main__":
    main()
