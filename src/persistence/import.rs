//! `tollgate import-rdb FILE`: load a Redis RDB file (`dump.rdb`, Redis 1.0 to 7.0) into a
//! running Tollgate, standalone or any node of a cluster, through the normal write path.
//!
//! 1. **Check** the whole file first: every record is read and every value decoded (the
//!    same decoder RESTORE uses), and the checksum verified. A truncated or corrupt file,
//!    a stream or module value, a database beyond 15 stops here, naming the byte offset,
//!    key, database and type, before anything is sent.
//! 2. **Refuse a non-empty target** unless `--replace`: the import is meant to fill a new
//!    server. With `--replace`, keys in the file overwrite keys of the same name (RESTORE
//!    REPLACE, FUNCTION LOAD REPLACE) and other keys stay.
//! 3. **Load**: function libraries (FUNCTION LOAD), Lua scripts from older files' `lua`
//!    AUX fields (SCRIPT LOAD, so EVALSHA of them keeps working), then every key as
//!    `RESTORE key deadline payload ABSTTL` with the value's bytes exactly as the file
//!    holds them, pipelined. Each is an ordinary write: a cluster replicates it, and a
//!    follower forwards it to the leader. Keys whose deadline has already passed are
//!    skipped, as Redis skips them when it loads a file.
//! 4. **All or nothing**: if the server refuses a write midway (out of memory, a key
//!    created meanwhile, a lost connection), the import stops and deletes what it loaded
//!    (the keys and the libraries it created). With `--replace` the values it overwrote
//!    cannot be brought back; the report says so. A `-CLUSTERDOWN` reply (no quorum within
//!    `cluster-timeout-ms`: the write may or may not have been applied) is not a refusal:
//!    those keys are sent again one at a time with REPLACE (the target was empty, so the
//!    only value REPLACE can overwrite is the one the first attempt wrote), up to ten
//!    times with a growing pause, before the import gives up and undoes itself.
//!
//! The report gives the keys, libraries and scripts loaded, the file's size and the time
//! each phase took.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::Parser;

use super::rdb::crc64::Crc64Digest;
use super::rdb::decode::type_name;
use super::rdb::file::{FileError, Record, Records};
use super::rdb::RDB_VERSION;
use crate::store::DATABASES;

/// Command-line arguments of `tollgate import-rdb`.
#[derive(Parser, Debug, Clone)]
#[command(
    name = "tollgate import-rdb",
    about = "Load a Redis RDB file (dump.rdb) into a running Tollgate"
)]
pub struct ImportArgs {
    /// The RDB file.
    pub file: PathBuf,
    /// Host of the Tollgate server (any node of a cluster).
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Port of the Tollgate server.
    #[arg(long, default_value_t = 6379)]
    pub port: u16,
    /// ACL user to AUTH as (with --password).
    #[arg(long)]
    pub user: Option<String>,
    /// Password to AUTH with.
    #[arg(long, env = "TOLLGATE_IMPORT_PASSWORD")]
    pub password: Option<String>,
    /// Load into a server that already holds keys, overwriting keys (and function
    /// libraries) of the same name; other keys stay.
    #[arg(long)]
    pub replace: bool,
    /// Only check the file (read and decode everything, verify the checksum); send nothing.
    #[arg(long)]
    pub check: bool,
}

/// Why an import failed.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The file cannot be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The file is not a loadable RDB file.
    #[error("{0}; nothing was loaded")]
    File(#[from] FileError),
    /// The server is unreachable, refused the import, or failed midway.
    #[error("{0}")]
    Server(String),
}

/// What was found in the file (the check phase).
#[derive(Debug, Default, Clone)]
pub struct FileSummary {
    /// The file's RDB version.
    pub version: u16,
    /// Its size in bytes.
    pub bytes: usize,
    /// Keys by type name.
    pub by_type: BTreeMap<&'static str, usize>,
    /// Keys by database.
    pub by_db: BTreeMap<usize, usize>,
    /// Keys whose deadline had passed at check time (not loaded).
    pub expired: usize,
    /// Keys holding empty collections (not loaded, as Redis skips them).
    pub empty: usize,
    /// Function libraries.
    pub functions: usize,
    /// Lua scripts (`lua` AUX fields).
    pub scripts: usize,
    /// How long the check took.
    pub elapsed: Duration,
}

impl FileSummary {
    /// Keys to load.
    pub fn keys(&self) -> usize {
        self.by_type.values().sum()
    }
}

/// The outcome of a successful import.
#[derive(Debug, Clone)]
pub struct Report {
    /// The check phase.
    pub file: FileSummary,
    /// Keys loaded.
    pub keys: usize,
    /// Function libraries loaded.
    pub functions: usize,
    /// Scripts loaded.
    pub scripts: usize,
    /// How long loading took (after the check).
    pub load_elapsed: Duration,
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let total = self.file.elapsed + self.load_elapsed;
        let mib = self.file.bytes as f64 / (1024.0 * 1024.0);
        write!(
            f,
            "loaded {} keys, {} function libraries and {} scripts ({:.1} MiB of RDB) in {:.2} s \
             ({:.2} s checking, {:.2} s loading; {:.1} MiB/s)",
            self.keys,
            self.functions,
            self.scripts,
            mib,
            total.as_secs_f64(),
            self.file.elapsed.as_secs_f64(),
            self.load_elapsed.as_secs_f64(),
            mib / total.as_secs_f64().max(1e-9)
        )
    }
}

/// Entry point of `tollgate import-rdb ...` (`argv` starts with `import-rdb`): runs the
/// import, prints the report, and returns the process exit status.
pub fn main(argv: impl IntoIterator<Item = String>) -> i32 {
    let args = match ImportArgs::try_parse_from(argv) {
        Ok(a) => a,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { 2 } else { 0 };
        }
    };
    let progress = |line: &str| eprintln!("import-rdb: {line}");
    match run(&args, &progress) {
        Ok(None) => 0,
        Ok(Some(report)) => {
            println!("import-rdb: {report}");
            0
        }
        Err(e) => {
            eprintln!("import-rdb: error: {e}");
            1
        }
    }
}

/// A key to load, as the check phase found it.
struct Planned<'a> {
    db: usize,
    key: std::borrow::Cow<'a, [u8]>,
    deadline: Option<i64>,
    type_id: u8,
    serialized: &'a [u8],
}

/// Everything the file holds, checked.
struct Plan<'a> {
    keys: Vec<Planned<'a>>,
    functions: Vec<Vec<u8>>,
    scripts: Vec<Vec<u8>>,
    summary: FileSummary,
}

/// Run an import; `Ok(None)` for `--check` (the summary is reported through `progress`).
pub fn run(args: &ImportArgs, progress: &dyn Fn(&str)) -> Result<Option<Report>, ImportError> {
    let data = std::fs::read(&args.file).map_err(|source| ImportError::Io {
        path: args.file.clone(),
        source,
    })?;
    let plan = check(&data)?;
    progress(&describe_summary(&args.file, &plan.summary));
    if args.check {
        return Ok(None);
    }
    let started = Instant::now();
    let mut client = connect_authenticated(&args.host, args.port, args)?;
    if !args.replace {
        refuse_if_not_empty(&mut client)?;
    }
    let functions = load_functions(&mut client, &plan.functions, args.replace)?;
    for script in &plan.scripts {
        if let Err(e) = client
            .call(&[b"SCRIPT", b"LOAD", script])?
            .ok_or_server("SCRIPT LOAD")
        {
            undo_functions(&mut client, &functions);
            return Err(e);
        }
    }
    let keys = load_keys(client, &args.host, args.port, args, &plan, &functions)?;
    Ok(Some(Report {
        keys,
        functions: plan.functions.len(),
        scripts: plan.scripts.len(),
        load_elapsed: started.elapsed(),
        file: plan.summary,
    }))
}

/// Read and decode the whole file.
fn check(data: &[u8]) -> Result<Plan<'_>, ImportError> {
    let started = Instant::now();
    let mut records = Records::new(data)?;
    let mut summary = FileSummary {
        version: records.version(),
        bytes: data.len(),
        ..FileSummary::default()
    };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let mut keys = Vec::new();
    let mut functions = Vec::new();
    let mut scripts = Vec::new();
    for record in &mut records {
        match record? {
            Record::Aux { name, value } => {
                if name.eq_ignore_ascii_case(b"lua") {
                    scripts.push(value.into_owned());
                }
            }
            Record::Function(code) => functions.push(code),
            Record::EmptyKey { .. } => summary.empty += 1,
            Record::Key(k) => {
                if k.expires_at_ms.is_some_and(|t| t <= now) {
                    summary.expired += 1;
                    continue;
                }
                *summary.by_type.entry(type_name(k.type_id)).or_default() += 1;
                *summary.by_db.entry(k.db).or_default() += 1;
                keys.push(Planned {
                    db: k.db,
                    key: k.key,
                    deadline: k.expires_at_ms,
                    type_id: k.type_id,
                    serialized: k.serialized,
                });
            }
        }
    }
    summary.functions = functions.len();
    summary.scripts = scripts.len();
    summary.elapsed = started.elapsed();
    Ok(Plan {
        keys,
        functions,
        scripts,
        summary,
    })
}

fn describe_summary(path: &std::path::Path, s: &FileSummary) -> String {
    let types: Vec<String> = s.by_type.iter().map(|(t, n)| format!("{n} {t}")).collect();
    let dbs: Vec<String> = s.by_db.iter().map(|(d, n)| format!("db{d}={n}")).collect();
    format!(
        "{} is a good RDB file (version {}, {} bytes), checked in {:.2} s: {} keys ({}) in \
         databases {}, {} function libraries, {} scripts; {} keys already expired and {} \
         empty keys are skipped",
        path.display(),
        s.version,
        s.bytes,
        s.elapsed.as_secs_f64(),
        s.keys(),
        if types.is_empty() {
            "none".into()
        } else {
            types.join(", ")
        },
        if dbs.is_empty() {
            "-".into()
        } else {
            dbs.join(" ")
        },
        s.functions,
        s.scripts,
        s.expired,
        s.empty
    )
}

/// Fail unless every database of the server is empty.
fn refuse_if_not_empty(client: &mut Client) -> Result<(), ImportError> {
    let mut held = Vec::new();
    for db in 0..DATABASES {
        client
            .call(&[b"SELECT", db.to_string().as_bytes()])?
            .ok_or_server("SELECT")?;
        match client.call(&[b"DBSIZE"])? {
            Resp::Int(n) if n > 0 => held.push(format!("db{db}={n}")),
            Resp::Int(_) => {}
            other => return Err(ImportError::Server(format!("DBSIZE answered {other}"))),
        }
    }
    if held.is_empty() {
        return Ok(());
    }
    Err(ImportError::Server(format!(
        "the server already holds keys ({}); import into an empty server, or pass --replace \
         to overwrite keys of the same name and keep the others; nothing was loaded",
        held.join(" ")
    )))
}

/// The library name in a `#!lua name=<name>` first line.
fn library_name(code: &[u8]) -> Option<&[u8]> {
    let first = code.split(|&b| b == b'\n').next()?;
    first
        .split(|&b| b == b' ')
        .find_map(|part| part.strip_prefix(b"name="))
}

/// FUNCTION LOAD each library; on a failure, delete the ones loaded and fail. Returns the
/// names of the libraries this created (none with `replace`: a library it replaced cannot
/// be given back, so it is never deleted).
fn load_functions(
    client: &mut Client,
    codes: &[Vec<u8>],
    replace: bool,
) -> Result<Vec<Vec<u8>>, ImportError> {
    let mut loaded = Vec::new();
    for code in codes {
        let mut cmd: Vec<&[u8]> = vec![b"FUNCTION", b"LOAD"];
        if replace {
            cmd.push(b"REPLACE");
        }
        cmd.push(code);
        let reply = client.call(&cmd)?;
        if let Resp::Error(e) = reply {
            undo_functions(client, &loaded);
            let name = library_name(code)
                .map(String::from_utf8_lossy)
                .unwrap_or_default();
            return Err(ImportError::Server(format!(
                "the server refused function library '{name}': {e}; nothing was loaded"
            )));
        }
        if !replace {
            loaded.push(library_name(code).unwrap_or_default().to_vec());
        }
    }
    Ok(loaded)
}

fn undo_functions(client: &mut Client, names: &[Vec<u8>]) {
    for name in names {
        let _ = client.call(&[b"FUNCTION", b"DELETE", name]);
    }
}

/// What the reader thread expects next, and what it found.
enum Expect {
    /// A SELECT.
    Select,
    /// The RESTORE of `plan.keys[i]`.
    Restore(usize),
}

/// Shared between the writer and the reader thread.
struct Flow {
    /// Bytes sent and not answered yet, with a wake-up for the writer.
    in_flight: Mutex<usize>,
    drained: Condvar,
    /// Set by the reader at the first error reply.
    failed: AtomicBool,
}

/// Most bytes of requests in flight: enough to keep the server busy, little enough that no
/// request waits long behind the others (in a cluster each must be committed within
/// `cluster-timeout-ms`, and a follower forwards them to the leader).
const MAX_IN_FLIGHT: usize = 4 << 20;
/// Requests are written in chunks of about this size.
const WRITE_CHUNK: usize = 256 << 10;

/// Pipeline every RESTORE, reading replies on a second thread; on a failure, delete what
/// was loaded (unless `--replace`).
fn load_keys(
    client: Client,
    host: &str,
    port: u16,
    args: &ImportArgs,
    plan: &Plan,
    functions: &[Vec<u8>],
) -> Result<usize, ImportError> {
    let flow = Arc::new(Flow {
        in_flight: Mutex::new(0),
        drained: Condvar::new(),
        failed: AtomicBool::new(false),
    });
    let (tx, rx) = sync_channel::<(Expect, usize)>(1 << 16);
    let reader_stream = client.reader;
    let mut stream = client.writer;
    let names = |i: usize| {
        let k = &plan.keys[i];
        format!(
            "key '{}' in database {}",
            String::from_utf8_lossy(&k.key),
            k.db
        )
    };
    std::thread::scope(|scope| {
        let reader = {
            let flow = flow.clone();
            let total = plan.keys.len();
            let names = &names;
            scope.spawn(move || read_replies(reader_stream, rx, &flow, total, names))
        };
        let mut buf: Vec<u8> = Vec::with_capacity(2 * WRITE_CHUNK);
        let mut current_db = usize::MAX;
        let mut send_error = None;
        for (i, k) in plan.keys.iter().enumerate() {
            if flow.failed.load(Ordering::Acquire) {
                break;
            }
            let start = buf.len();
            if k.db != current_db {
                encode(&mut buf, &[b"SELECT", k.db.to_string().as_bytes()]);
                current_db = k.db;
                if tx.send((Expect::Select, buf.len() - start)).is_err() {
                    break;
                }
            }
            let start = buf.len();
            encode_restore(&mut buf, k, args.replace);
            if tx.send((Expect::Restore(i), buf.len() - start)).is_err() {
                break;
            }
            if buf.len() >= WRITE_CHUNK {
                if let Err(e) = send(&mut stream, &mut buf, &flow) {
                    send_error = Some(e);
                    break;
                }
            }
        }
        if send_error.is_none() && !buf.is_empty() {
            send_error = send(&mut stream, &mut buf, &flow).err();
        }
        drop(tx);
        let mut replies = reader.join().unwrap_or_else(|_| Replies {
            loaded: Vec::new(),
            retry: Vec::new(),
            error: Some("the reply reader panicked".to_string()),
        });
        let mut error = replies
            .error
            .take()
            .or(send_error.map(|e| format!("sending to the server failed: {e}")));
        if error.is_none() && !replies.retry.is_empty() {
            error = retry_unknown(
                host,
                port,
                args,
                plan,
                &replies.retry,
                &mut replies.loaded,
                &names,
            )
            .err();
        }
        let loaded = replies.loaded;
        match error {
            None => Ok(loaded.iter().filter(|&&l| l).count()),
            Some(error) => Err(ImportError::Server(undo(
                host, port, args, plan, &loaded, functions, error,
            ))),
        }
    })
}

/// Write the buffered requests once the in-flight budget allows.
fn send(stream: &mut TcpStream, buf: &mut Vec<u8>, flow: &Flow) -> std::io::Result<()> {
    {
        let mut in_flight = flow.in_flight.lock().unwrap_or_else(|e| e.into_inner());
        while *in_flight > MAX_IN_FLIGHT && !flow.failed.load(Ordering::Acquire) {
            in_flight = flow
                .drained
                .wait_timeout(in_flight, Duration::from_millis(100))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        *in_flight += buf.len();
    }
    stream.write_all(buf)?;
    buf.clear();
    Ok(())
}

/// What the reply reader found.
struct Replies {
    /// Which keys were loaded.
    loaded: Vec<bool>,
    /// Keys whose RESTORE got `-CLUSTERDOWN` (no quorum in time: the outcome is unknown).
    retry: Vec<usize>,
    /// The first other error.
    error: Option<String>,
}

/// Read one reply per expected request.
fn read_replies(
    mut reader: BufReader<TcpStream>,
    rx: Receiver<(Expect, usize)>,
    flow: &Flow,
    total: usize,
    names: &dyn Fn(usize) -> String,
) -> Replies {
    let mut out = Replies {
        loaded: vec![false; total],
        retry: Vec::new(),
        error: None,
    };
    for (expect, size) in rx {
        let reply = match read_reply(&mut reader) {
            Ok(r) => r,
            Err(e) => {
                flow.failed.store(true, Ordering::Release);
                flow.drained.notify_all();
                out.error = Some(format!("lost the connection to the server: {e}"));
                return out;
            }
        };
        {
            let mut in_flight = flow.in_flight.lock().unwrap_or_else(|e| e.into_inner());
            *in_flight = in_flight.saturating_sub(size);
        }
        flow.drained.notify_all();
        match (expect, reply) {
            (Expect::Restore(i), Resp::Simple(_)) => out.loaded[i] = true,
            (Expect::Select, Resp::Simple(_)) => {}
            (Expect::Restore(i), Resp::Error(e)) if e.starts_with("CLUSTERDOWN") => {
                out.retry.push(i);
            }
            (what, reply) => {
                if out.error.is_none() {
                    let doing = match what {
                        Expect::Select => "SELECT".to_string(),
                        Expect::Restore(i) => format!("RESTORE of {}", names(i)),
                    };
                    out.error = Some(format!("the server refused {doing}: {reply}"));
                    flow.failed.store(true, Ordering::Release);
                }
            }
        }
    }
    out
}

/// How often a RESTORE that got `-CLUSTERDOWN` is tried again, one at a time.
const CLUSTERDOWN_RETRIES: u32 = 10;

/// Send again, one by one, the RESTOREs whose outcome a cluster left unknown, with REPLACE:
/// a first attempt that was applied after all is then overwritten with the same value.
fn retry_unknown(
    host: &str,
    port: u16,
    args: &ImportArgs,
    plan: &Plan,
    retry: &[usize],
    loaded: &mut [bool],
    names: &dyn Fn(usize) -> String,
) -> Result<(), String> {
    let mut client = connect_authenticated(host, port, args).map_err(|e| e.to_string())?;
    let mut db = usize::MAX;
    for &i in retry {
        let k = &plan.keys[i];
        if k.db != db {
            match client.call(&[b"SELECT", k.db.to_string().as_bytes()]) {
                Ok(Resp::Simple(_)) => db = k.db,
                Ok(other) => return Err(format!("the server refused SELECT: {other}")),
                Err(e) => return Err(e.to_string()),
            }
        }
        let mut request = Vec::new();
        encode_restore(&mut request, k, true);
        let mut attempt = 0;
        loop {
            let reply = client.send_raw(&request).map_err(|e| e.to_string())?;
            match reply {
                Resp::Simple(_) => {
                    loaded[i] = true;
                    break;
                }
                Resp::Error(e) if e.starts_with("CLUSTERDOWN") && attempt < CLUSTERDOWN_RETRIES => {
                    attempt += 1;
                    std::thread::sleep(Duration::from_millis(100 * u64::from(attempt)));
                }
                other => {
                    return Err(format!(
                        "the server refused RESTORE of {} ({attempt} retries): {other}",
                        names(i)
                    ))
                }
            }
        }
    }
    Ok(())
}

/// A connection, authenticated if the arguments say so.
fn connect_authenticated(host: &str, port: u16, args: &ImportArgs) -> Result<Client, ImportError> {
    let mut client = Client::connect(host, port)?;
    if let Some(password) = &args.password {
        let mut auth: Vec<&[u8]> = vec![b"AUTH"];
        if let Some(user) = &args.user {
            auth.push(user.as_bytes());
        }
        auth.push(password.as_bytes());
        client.call(&auth)?.ok_or_server("AUTH")?;
    }
    Ok(client)
}

/// Delete what a failed import loaded (unless `--replace`); the text to report.
fn undo(
    host: &str,
    port: u16,
    args: &ImportArgs,
    plan: &Plan,
    loaded: &[bool],
    functions: &[Vec<u8>],
    error: String,
) -> String {
    let count = loaded.iter().filter(|&&l| l).count();
    if args.replace {
        return format!(
            "{error}; the import stopped after loading {count} keys, which stay (with \
             --replace, the values they overwrote cannot be brought back)"
        );
    }
    let result = (|| -> Result<(), ImportError> {
        let mut client = connect_authenticated(host, port, args)?;
        let mut db = usize::MAX;
        for (k, _) in plan.keys.iter().zip(loaded).filter(|(_, &l)| l) {
            if k.db != db {
                client
                    .call(&[b"SELECT", k.db.to_string().as_bytes()])?
                    .ok_or_server("SELECT")?;
                db = k.db;
            }
            client.call(&[b"UNLINK", &k.key])?;
        }
        undo_functions(&mut client, functions);
        Ok(())
    })();
    match result {
        Ok(()) => format!(
            "{error}; the import stopped and deleted the {count} keys and {} function \
             libraries it had loaded: nothing was loaded",
            functions.len()
        ),
        Err(e) => format!(
            "{error}; the import stopped after loading {count} keys, and deleting them failed \
             too ({e}): delete them by hand (FLUSHALL, if the server was empty before)"
        ),
    }
}

/// `RESTORE key deadline payload [REPLACE] ABSTTL` with the payload built around the
/// value's bytes from the file.
fn encode_restore(buf: &mut Vec<u8>, k: &Planned, replace: bool) {
    let deadline = k.deadline.unwrap_or(0).max(0).to_string();
    let argc = if replace { 6 } else { 5 };
    buf.extend_from_slice(format!("*{argc}\r\n$7\r\nRESTORE\r\n").as_bytes());
    bulk(buf, &k.key);
    bulk(buf, deadline.as_bytes());
    let payload_len = 1 + k.serialized.len() + 10;
    buf.extend_from_slice(format!("${payload_len}\r\n").as_bytes());
    let start = buf.len();
    buf.push(k.type_id);
    buf.extend_from_slice(k.serialized);
    buf.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let mut crc = Crc64Digest::new();
    crc.update(&buf[start..]);
    buf.extend_from_slice(&crc.finish().to_le_bytes());
    buf.extend_from_slice(b"\r\n");
    if replace {
        bulk(buf, b"REPLACE");
    }
    bulk(buf, b"ABSTTL");
}

fn bulk(buf: &mut Vec<u8>, b: &[u8]) {
    buf.extend_from_slice(format!("${}\r\n", b.len()).as_bytes());
    buf.extend_from_slice(b);
    buf.extend_from_slice(b"\r\n");
}

fn encode(buf: &mut Vec<u8>, args: &[&[u8]]) {
    buf.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        bulk(buf, a);
    }
}

/// A RESP2 reply.
#[derive(Debug)]
enum Resp {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Option<Vec<Resp>>),
}

impl std::fmt::Display for Resp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Resp::Simple(s) | Resp::Error(s) => f.write_str(s),
            Resp::Int(n) => write!(f, "{n}"),
            Resp::Bulk(None) | Resp::Array(None) => f.write_str("(nil)"),
            Resp::Bulk(Some(b)) => write!(f, "{:?}", String::from_utf8_lossy(b)),
            Resp::Array(Some(items)) => {
                let parts: Vec<String> = items.iter().map(|i| i.to_string()).collect();
                write!(f, "[{}]", parts.join(", "))
            }
        }
    }
}

impl Resp {
    /// Ok unless an error reply, which becomes the import's error.
    fn ok_or_server(self, what: &str) -> Result<Resp, ImportError> {
        match self {
            Resp::Error(e) => Err(ImportError::Server(format!(
                "the server refused {what}: {e}; nothing was loaded"
            ))),
            other => Ok(other),
        }
    }
}

/// A blocking RESP2 connection (requests and replies in turn, or pipelined by
/// [`load_keys`] with the reader on its own thread).
struct Client {
    writer: TcpStream,
    reader: BufReader<TcpStream>,
}

impl Client {
    fn connect(host: &str, port: u16) -> Result<Client, ImportError> {
        let stream = TcpStream::connect((host, port))
            .map_err(|e| ImportError::Server(format!("cannot connect to {host}:{port}: {e}")))?;
        let _ = stream.set_nodelay(true);
        let reader = stream
            .try_clone()
            .map_err(|e| ImportError::Server(format!("socket: {e}")))?;
        Ok(Client {
            writer: stream,
            reader: BufReader::with_capacity(1 << 16, reader),
        })
    }

    fn call(&mut self, args: &[&[u8]]) -> Result<Resp, ImportError> {
        let mut buf = Vec::new();
        encode(&mut buf, args);
        self.send_raw(&buf)
    }

    /// Send an encoded request and read its reply.
    fn send_raw(&mut self, request: &[u8]) -> Result<Resp, ImportError> {
        let lost =
            |e: std::io::Error| ImportError::Server(format!("connection to the server: {e}"));
        self.writer.write_all(request).map_err(lost)?;
        read_reply(&mut self.reader).map_err(lost)
    }
}

/// Read one RESP2 reply.
fn read_reply(r: &mut impl BufRead) -> std::io::Result<Resp> {
    let bad = |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_string());
    let mut line = Vec::new();
    r.read_until(b'\n', &mut line)?;
    if line.is_empty() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "the server closed the connection",
        ));
    }
    if !line.ends_with(b"\r\n") {
        return Err(bad("a reply line without CRLF"));
    }
    let text = String::from_utf8_lossy(&line[1..line.len() - 2]).into_owned();
    let number = |t: &str| t.parse::<i64>().map_err(|_| bad("a bad number in a reply"));
    Ok(match line[0] {
        b'+' => Resp::Simple(text),
        b'-' => Resp::Error(text),
        b':' => Resp::Int(number(&text)?),
        b'$' => match number(&text)? {
            n if n < 0 => Resp::Bulk(None),
            n => {
                let mut data = vec![0u8; n as usize + 2];
                r.read_exact(&mut data)?;
                data.truncate(n as usize);
                Resp::Bulk(Some(data))
            }
        },
        b'*' => match number(&text)? {
            n if n < 0 => Resp::Array(None),
            n => Resp::Array(Some(
                (0..n).map(|_| read_reply(r)).collect::<Result<_, _>>()?,
            )),
        },
        _ => return Err(bad("an unknown reply type")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn library_names() {
        assert_eq!(
            library_name(b"#!lua name=mylib\nredis.register_function()"),
            Some(&b"mylib"[..])
        );
        assert_eq!(library_name(b"no shebang"), None);
    }

    #[test]
    fn restore_requests_carry_a_valid_payload() {
        let k = Planned {
            db: 0,
            key: std::borrow::Cow::Borrowed(b"k"),
            deadline: Some(1_700_000_000_000),
            type_id: 0,
            serialized: b"\x05hello",
        };
        let mut buf = Vec::new();
        encode_restore(&mut buf, &k, false);
        let mut r = std::io::Cursor::new(&buf);
        let Resp::Array(Some(parts)) = read_reply(&mut r).unwrap() else {
            panic!()
        };
        let args: Vec<Vec<u8>> = parts
            .into_iter()
            .map(|p| match p {
                Resp::Bulk(Some(b)) => b,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(args[0], b"RESTORE");
        assert_eq!(args[2], b"1700000000000");
        assert_eq!(args[4], b"ABSTTL");
        assert!(matches!(
            crate::persistence::rdb::decode::restore_payload(&args[3]),
            Ok(crate::store::Value::Str(_))
        ));
    }
}
