//! Issue 19's LPUSH/BLPOP ping-pong between pairs of clients, as a compiled load client for
//! `bench/pubsub.sh`'s `pingpong-pairs-rust` row: the same protocol as
//! `bench/blpop_pingpong.py`'s pairs mode, without the Python interpreter's cost per reply
//! (25 pairs in 5 Python processes need more CPU than either server on 2 cores, so that row
//! measured the clients more than the servers).
//!
//! ```text
//! cargo run --release --example blpop_pingpong -- <port> <seconds> [pairs] [threads]
//! ```
//!
//! `pairs` pairs (default 25) of clients, each pair on its own two lists: A blocks in
//! `BLPOP a 0`; B sends `LPUSH a x` and `BLPOP b 0` in one write; A, woken with the element,
//! sends `LPUSH b x` and `BLPOP a 0`; and so on. Every pop is a blocked client woken by a
//! push. The clients are spread over `threads` threads (default 1), each an event loop
//! (tokio's current-thread runtime) over its share of the pairs, as redis-benchmark runs
//! its clients in one thread. Runs `seconds` seconds once every A is blocked, checks every
//! reply byte for byte, prints the pops per second on stdout; exits non-zero on an
//! unexpected reply, a closed connection or no pop at all.
//!
//! Hand-written RESP rather than the `redis` crate: the client must write the LPUSH and the
//! BLPOP in one `write` and read the two replies as they come, which a pipelined
//! request-response API does not expose; it is four fixed byte strings.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Upper bound of the set-up (connect, every A blocked), whatever the server does.
const SETUP_LIMIT: Duration = Duration::from_secs(60);

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let num = |i: usize, default: u64| -> u64 {
        match args.get(i) {
            None => default,
            Some(s) => s
                .parse()
                .unwrap_or_else(|_| fail(&format!("not a number: {s}"))),
        }
    };
    if args.is_empty() {
        fail("usage: blpop_pingpong <port> <seconds> [pairs] [threads]");
    }
    let port: u16 = args[0]
        .parse()
        .unwrap_or_else(|_| fail(&format!("not a port: {}", args[0])));
    let seconds = num(1, 5);
    let pairs = num(2, 25) as usize;
    let threads = num(3, 1) as usize;
    if pairs == 0 || threads == 0 || !pairs.is_multiple_of(threads) || seconds == 0 {
        fail("pairs, threads and seconds must be positive, pairs a multiple of threads");
    }
    let pops = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    // Every thread's pairs are blocked and ready to start (a barrier), then they run
    // `seconds` together.
    let ready = Arc::new(std::sync::Barrier::new(threads + 1));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (pops, stop, ready) = (pops.clone(), stop.clone(), ready.clone());
            let share = pairs / threads;
            std::thread::spawn(move || {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("runtime")
                    .block_on(run_thread(port, t, share, pairs, pops, stop, ready))
            })
        })
        .collect();
    ready.wait();
    let start = Instant::now();
    std::thread::sleep(Duration::from_secs(seconds));
    let done = pops.load(Ordering::Relaxed);
    let elapsed = start.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        if let Err(e) = h.join().expect("client thread") {
            fail(&e);
        }
    }
    if done == 0 {
        fail("no pop in the whole run");
    }
    println!("{:.0}", done as f64 / elapsed);
}

fn fail(msg: &str) -> ! {
    eprintln!("blpop_pingpong: {msg}");
    std::process::exit(1);
}

/// RESP encoding of one command.
fn cmd(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

async fn connect(port: u16) -> Result<TcpStream, String> {
    let s = TcpStream::connect(("127.0.0.1", port))
        .await
        .map_err(|e| format!("connect to port {port}: {e}"))?;
    s.set_nodelay(true).map_err(|e| e.to_string())?;
    Ok(s)
}

/// One thread's pairs: set up, wait for the start, ping-pong until `stop`.
async fn run_thread(
    port: u16,
    thread: usize,
    pairs: usize,
    all_pairs: usize,
    pops: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    ready: Arc<std::sync::Barrier>,
) -> Result<(), String> {
    let setup = tokio::time::timeout(SETUP_LIMIT, set_up(port, thread, pairs, all_pairs)).await;
    let clients = match setup {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => {
            ready.wait();
            return Err(e);
        }
        Err(_) => {
            ready.wait();
            return Err("set-up took over 60 s".into());
        }
    };
    // Leaving the runtime's thread blocked for the barrier is fine: nothing else runs on it.
    ready.wait();
    let tasks: Vec<_> = clients
        .into_iter()
        .map(|c| tokio::spawn(c.run(pops.clone())))
        .collect();
    // The sides never stop on their own (a side that stopped would leave its partner
    // blocked for good): at the end of the run they are cancelled, all at once.
    while !stop.load(Ordering::Relaxed) && tasks.iter().all(|t| !t.is_finished()) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    for t in &tasks {
        t.abort();
    }
    let mut result = Ok(());
    for t in tasks {
        match t.await {
            Ok(Err(e)) => result = Err(e),
            Err(e) if !e.is_cancelled() => result = Err(e.to_string()),
            _ => {}
        }
    }
    result
}

/// One side of a pair: pops `mine`, pushes to its partner's list.
struct Side {
    sock: TcpStream,
    /// `LPUSH other x` then `BLPOP mine 0`, one write.
    push_then_pop: Vec<u8>,
    /// The bytes expected before this side holds the element again.
    want: Vec<u8>,
    /// After the first round: the LPUSH's `:1` then the pop.
    next_want: Vec<u8>,
    /// `BLPOP mine 0` alone: A's first command.
    blpop: Vec<u8>,
    /// Whether this side writes first (B) or waits for its first pop (A).
    starts: bool,
}

async fn set_up(
    port: u16,
    thread: usize,
    pairs: usize,
    all_pairs: usize,
) -> Result<Vec<Side>, String> {
    let pid = std::process::id();
    let mut setup = connect(port).await?;
    let mut sides = Vec::with_capacity(2 * pairs);
    let mut keys = Vec::new();
    for i in 0..pairs {
        let ka = format!("ppr:{pid}:{thread}:a:{i}").into_bytes();
        let kb = format!("ppr:{pid}:{thread}:b:{i}").into_bytes();
        for (mine, other, starts) in [(&ka, &kb, false), (&kb, &ka, true)] {
            let popped = format!(
                "*2\r\n${}\r\n{}\r\n$1\r\nx\r\n",
                mine.len(),
                String::from_utf8_lossy(mine)
            )
            .into_bytes();
            let blpop = cmd(&[b"BLPOP", mine, b"0"]);
            let push_then_pop = [cmd(&[b"LPUSH", other, b"x"]), blpop.clone()].concat();
            let next_want = [b":1\r\n".as_slice(), &popped].concat();
            sides.push(Side {
                sock: connect(port).await?,
                push_then_pop,
                want: if starts { next_want.clone() } else { popped },
                next_want,
                blpop,
                starts,
            });
        }
        keys.push(ka);
        keys.push(kb);
    }
    let mut del: Vec<&[u8]> = vec![b"DEL"];
    del.extend(keys.iter().map(|k| k.as_slice()));
    setup
        .write_all(&cmd(&del))
        .await
        .map_err(|e| e.to_string())?;
    let mut buf = vec![0u8; 64 * 1024];
    let _ = setup.read(&mut buf).await.map_err(|e| e.to_string())?;
    for a in sides.iter_mut().filter(|s| !s.starts) {
        a.sock
            .write_all(&a.blpop)
            .await
            .map_err(|e| e.to_string())?;
    }
    // Every A is blocked before any B pushes (otherwise a B's LPUSH could find no one
    // blocked and its A's first BLPOP would not block). No B pushes before every thread
    // passed its set-up (the barrier), so every thread waits for all the A's.
    loop {
        setup
            .write_all(&cmd(&[b"INFO", b"clients"]))
            .await
            .map_err(|e| e.to_string())?;
        let n = setup.read(&mut buf).await.map_err(|e| e.to_string())?;
        let info = String::from_utf8_lossy(&buf[..n]);
        let blocked = info
            .lines()
            .find_map(|l| l.strip_prefix("blocked_clients:"))
            .and_then(|v| v.trim().parse::<usize>().ok())
            .unwrap_or(0);
        if blocked >= all_pairs {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Ok(sides)
}

impl Side {
    /// Ping-pong until cancelled or a wrong reply.
    async fn run(mut self, pops: Arc<AtomicU64>) -> Result<(), String> {
        let io = |e: std::io::Error| e.to_string();
        if self.starts {
            self.sock.write_all(&self.push_then_pop).await.map_err(io)?;
        }
        let mut buf = vec![0u8; 4096];
        let mut have = 0;
        loop {
            let n = self.sock.read(&mut buf[have..]).await.map_err(io)?;
            if n == 0 {
                return Err("connection closed".into());
            }
            have += n;
            if have < self.want.len() {
                continue;
            }
            if buf[..have] != self.want[..] {
                return Err(format!(
                    "unexpected reply {:?}, wanted {:?}",
                    String::from_utf8_lossy(&buf[..have]),
                    String::from_utf8_lossy(&self.want)
                ));
            }
            pops.fetch_add(1, Ordering::Relaxed);
            have = 0;
            self.want.clone_from(&self.next_want);
            self.sock.write_all(&self.push_then_pop).await.map_err(io)?;
        }
    }
}
