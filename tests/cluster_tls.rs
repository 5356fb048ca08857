//! Mutual TLS on the cluster link (`--tls-cluster yes`), with real processes and
//! certificates made at test time: the cluster forms and replicates; the bytes on the
//! cluster ports, captured from the loopback interface with a raw packet socket, never show
//! a key name (and do show it with TLS off: the capture can see it); a node whose
//! certificate comes from another CA cannot join even with the right secret. The leader
//! kill and the partition run with TLS too (`tests/cluster.rs`, `*_over_mutual_tls`).
mod cluster_support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use cluster_support::tls_support::{self, Ca};
use cluster_support::*;

/// A raw packet socket on `lo` keeping the TCP payloads to or from `ports`.
struct Capture {
    stop: Arc<AtomicBool>,
    thread: thread::JoinHandle<Vec<u8>>,
}

impl Capture {
    /// Start capturing, or say why it cannot (a raw socket needs root).
    fn start(ports: Vec<u16>) -> Result<Capture, String> {
        let proto = (libc::ETH_P_ALL as u16).to_be();
        // SAFETY: plain system calls on values owned here; the descriptor is closed by the
        // capture thread.
        let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, proto as i32) };
        if fd < 0 {
            return Err(format!(
                "raw packet socket: {}",
                std::io::Error::last_os_error()
            ));
        }
        // SAFETY: a zeroed sockaddr_ll is valid; `lo` is a NUL-terminated name.
        let bound = unsafe {
            let mut sll: libc::sockaddr_ll = std::mem::zeroed();
            sll.sll_family = libc::AF_PACKET as u16;
            sll.sll_protocol = proto;
            sll.sll_ifindex = libc::if_nametoindex(c"lo".as_ptr()) as i32;
            let tv = libc::timeval {
                tv_sec: 0,
                tv_usec: 100_000,
            };
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                &tv as *const _ as *const libc::c_void,
                std::mem::size_of::<libc::timeval>() as u32,
            );
            libc::bind(
                fd,
                &sll as *const _ as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        if bound != 0 {
            let e = std::io::Error::last_os_error();
            // SAFETY: fd is ours.
            unsafe { libc::close(fd) };
            return Err(format!("binding the packet socket to lo: {e}"));
        }
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = thread::spawn(move || {
            let mut payloads = Vec::new();
            let mut buf = vec![0u8; 65536 + 64];
            while !flag.load(Ordering::Relaxed) {
                // SAFETY: buf is valid for its length.
                let n = unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), 0) };
                if n > 0 {
                    if let Some(p) = tcp_payload(&buf[..n as usize], &ports) {
                        payloads.extend_from_slice(p);
                    }
                }
            }
            // SAFETY: fd is ours.
            unsafe { libc::close(fd) };
            payloads
        });
        Ok(Capture { stop, thread })
    }

    /// Stop and return the captured payload bytes.
    fn finish(self) -> Vec<u8> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap()
    }
}

/// The TCP payload of an Ethernet + IPv4 frame to or from one of `ports`.
fn tcp_payload<'a>(frame: &'a [u8], ports: &[u16]) -> Option<&'a [u8]> {
    let ip = frame.get(14..)?;
    if frame.get(12..14)? != [0x08, 0x00] || ip.first()? >> 4 != 4 || *ip.get(9)? != 6 {
        return None;
    }
    let ihl = usize::from(ip[0] & 0x0f) * 4;
    let total = usize::from(u16::from_be_bytes([*ip.get(2)?, *ip.get(3)?]));
    let tcp = ip.get(ihl..total.min(ip.len()))?;
    let src = u16::from_be_bytes([*tcp.first()?, *tcp.get(1)?]);
    let dst = u16::from_be_bytes([*tcp.get(2)?, *tcp.get(3)?]);
    if !ports.contains(&src) && !ports.contains(&dst) {
        return None;
    }
    tcp.get(usize::from(tcp.get(12)? >> 4) * 4..)
}

const KEY: &[u8] = b"tenant-7f3a9:api-quota";

/// Write KEY through the leader while capturing the cluster ports; the captured bytes.
fn cluster_link_bytes(tls: bool) -> Result<Vec<u8>, String> {
    let c = Cluster::start_secured(3, tls);
    let l = c.wait_leader(Duration::from_secs(10));
    let ports: Vec<u16> = c.nodes.iter().map(|n| n.cluster_port).collect();
    let capture = Capture::start(ports)?;
    let key = std::str::from_utf8(KEY).unwrap();
    for _ in 0..20 {
        let _: i64 = c.nodes[l].q(&["INCR", key]).unwrap();
    }
    let _: Vec<i64> = c.nodes[l]
        .q(&["LIMIT.TOKEN", &format!("{key}:bucket"), "100", "10", "1000"])
        .unwrap();
    // A follower's write is forwarded to the leader over the link too.
    let follower = (l + 1) % 3;
    let _: i64 = c.nodes[follower].q(&["INCR", key]).unwrap();
    c.converged_digest(Duration::from_secs(10));
    let bytes = capture.finish();
    let v: i64 = c.nodes[(l + 2) % 3].q(&["GET", key]).unwrap_or(0);
    assert_eq!(v, 21);
    Ok(bytes)
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[test]
fn no_plaintext_command_crosses_a_tls_cluster_link() {
    let _g = serial();
    // Control: without TLS the capture sees the key name on the cluster ports.
    let plain = match cluster_link_bytes(false) {
        Ok(b) => b,
        Err(why) => {
            println!("SKIPPED no_plaintext_command_crosses_a_tls_cluster_link: cannot capture packets ({why}); run as root");
            return;
        }
    };
    assert!(
        contains(&plain, KEY),
        "the capture did not see plaintext Raft traffic"
    );
    let secured = cluster_link_bytes(true).unwrap();
    assert!(
        secured.len() > 1000,
        "too little traffic captured: {} bytes",
        secured.len()
    );
    assert!(
        !contains(&secured, KEY),
        "the key name crossed the TLS cluster link in clear"
    );
    assert!(!contains(&secured, b"INCR") && !contains(&secured, b"incr"));
    eprintln!(
        "captured {} plaintext and {} TLS bytes on the cluster ports",
        plain.len(),
        secured.len()
    );
}

#[test]
fn a_node_with_a_certificate_from_another_ca_cannot_join() {
    let _g = serial();
    let mut c = Cluster::start_tls(3);
    let l = c.wait_leader(Duration::from_secs(10));
    let _: i64 = c.nodes[l].q(&["INCR", "k"]).unwrap();
    let three = c.voters(l);

    // Same secret, its own CA: the TLS handshake fails both ways.
    let rogue_ca = Ca::new(c.dir.path(), "rogue-ca");
    let flags = Cluster::tls_flags(&rogue_ca, c.dir.path(), 4);
    let rogue = c.add_joiner_with(4, SECRET, flags);
    let addr = c.nodes[rogue].cluster_addr();
    let e = c.nodes[l]
        .q::<()>(&["RAFT.ADDNODE", "4", &addr, "2000"])
        .unwrap_err();
    let text = e.to_string();
    assert!(text.contains("voters unchanged"), "{text}");
    assert!(
        text.contains("certificate") || text.contains("UnknownIssuer"),
        "{text}"
    );
    assert_eq!(c.voters(l), three);
    assert!(c.nodes[l].status("member_4").is_none());
    // The rogue node refused the leader's certificate too (logged as the handshake ends).
    eventually(
        "the rogue node logs the refused handshake",
        Duration::from_secs(5),
        || {
            c.nodes[rogue]
                .log_text()
                .contains("TLS handshake failed")
                .then_some(())
        },
    );

    eprintln!("refused: {text}");
    c.nodes[rogue].kill9();

    // The other direction: a client with the rogue certificate dialling a cluster node's
    // port is refused by the node's TLS server (an alert, not our handshake's EOF), while
    // one with a cluster certificate gets through TLS (then our handshake hangs up on junk).
    let dial = |cert: &tls_support::Issued| {
        let script = format!(
            "import socket, ssl\nctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)\nctx.check_hostname = False\nctx.verify_mode = ssl.CERT_NONE\nctx.load_cert_chain('{}', '{}')\ns = ctx.wrap_socket(socket.create_connection(('127.0.0.1', {}), 5))\ns.settimeout(10)\ntry:\n  s.sendall(b'junk' * 64); d = s.recv(100); print('eof' if not d else 'data')\nexcept (ssl.SSLError, ConnectionResetError) as e:\n  print('refused', e)",
            tls_support::arg(&cert.cert),
            tls_support::arg(&cert.key),
            c.nodes[l].cluster_port
        );
        let out = std::process::Command::new("python3")
            .args(["-c", &script])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
            + &String::from_utf8_lossy(&out.stderr)
    };
    let rogue_cert = rogue_ca.issue(c.dir.path(), "rogue-client");
    let answer = dial(&rogue_cert);
    assert!(answer.starts_with("refused"), "{answer}");
    let member_cert = c
        .tls_ca
        .as_ref()
        .unwrap()
        .issue(c.dir.path(), "member-client");
    assert_eq!(dial(&member_cert), "eof");
    eventually(
        "the leader logs the refused handshake",
        Duration::from_secs(5),
        || {
            c.nodes[l]
                .log_text()
                .contains("TLS handshake failed")
                .then_some(())
        },
    );

    // The cluster still serves, and a node with a certificate from the cluster's CA joins.
    let _: i64 = c.nodes[l].q(&["INCR", "k"]).unwrap();
    let flags = Cluster::tls_flags(c.tls_ca.as_ref().unwrap(), c.dir.path(), 5);
    let member = c.add_joiner_with(5, SECRET, flags);
    let addr = c.nodes[member].cluster_addr();
    let _: () = c.nodes[l]
        .q(&["RAFT.ADDNODE", "5", &addr, "10000"])
        .unwrap();
    assert!(c.voters(l).contains(&5));
    let v: i64 = eventually("the new node catches up", Duration::from_secs(10), || {
        c.nodes[member]
            .q::<i64>(&["GET", "k"])
            .ok()
            .filter(|v| *v == 2)
    });
    assert_eq!(v, 2);
}

/// `tls-client-cert-file` / `tls-client-key-file`: the certificate a node presents when it
/// dials another node, separate from the one it serves with. Nodes with client certificates
/// from the cluster's CA form a cluster and forward writes to the leader. A node added later
/// whose client certificate comes from another CA is dialled by the leader and catches up,
/// but its own connections are refused: its writes fail and the leader logs the refusal.
#[test]
fn separate_client_certificates_on_the_cluster_link() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new(dir.path(), "cluster-ca");
    let client_flags = |issuer: &Ca, id: u64| {
        let mut f = Cluster::tls_flags(&ca, dir.path(), id);
        let client = issuer.issue(dir.path(), &format!("node-{id}-client"));
        f.extend([
            "--tls-client-cert-file".to_string(),
            tls_support::arg(&client.cert),
            "--tls-client-key-file".to_string(),
            tls_support::arg(&client.key),
        ]);
        f
    };
    let flags: Vec<Vec<String>> = (1..=3u64).map(|id| client_flags(&ca, id)).collect();
    let rogue = Ca::new(dir.path(), "rogue-ca");
    let joiner_flags = client_flags(&rogue, 4);
    let ports = (0..3)
        .map(|_| free_port_pair())
        .map(|p| (p, p + 10_000))
        .collect();
    let mut c = Cluster::start_in(dir, ports, |id| flags[id as usize - 1].clone());
    let l = c.wait_leader(Duration::from_secs(10));
    for (i, n) in c.nodes.iter().enumerate() {
        assert_eq!(n.q::<i64>(&["INCR", "k"]).unwrap(), i as i64 + 1);
    }

    let j = c.add_joiner_with(4, SECRET, joiner_flags);
    let addr = c.nodes[j].cluster_addr();
    let _: () = c.nodes[l]
        .q(&["RAFT.ADDNODE", "4", &addr, "10000"])
        .unwrap();
    let e = c.nodes[j].q::<i64>(&["INCR", "k"]).unwrap_err();
    eprintln!("a write through node 4: {e}");
    eventually(
        "the leader logs node 4's refused handshake",
        Duration::from_secs(10),
        || {
            c.nodes[l]
                .log_text()
                .contains("TLS handshake failed")
                .then_some(())
        },
    );
    assert_eq!(c.nodes[l].q::<i64>(&["INCR", "k"]).unwrap(), 4);
}
