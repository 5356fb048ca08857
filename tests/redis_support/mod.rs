//! A real redis-server for differential tests: started on a free local port with its own
//! temporary directory (`--dir`), no persistence unless a test asks (SAVE), killed and
//! cleaned up when dropped. Also a canonical text of a key's value, to compare what two
//! servers hold.

#![allow(dead_code)]

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use redis::Connection;

/// A redis-server child process.
pub struct RedisServer {
    pub port: u16,
    pub dir: tempfile::TempDir,
    child: Child,
}

impl RedisServer {
    /// Start redis-server 7.0 (`redis-server` on the PATH) and wait until it answers PING.
    pub fn start() -> RedisServer {
        Self::with_args(&[])
    }

    /// Start with extra configuration arguments (`--name value` pairs).
    pub fn with_args(extra: &[&str]) -> RedisServer {
        Self::loading(None, extra)
    }

    /// Start loading `rdb` (copied into its directory as `dump.rdb`) at start-up.
    pub fn loading(rdb: Option<&std::path::Path>, extra: &[&str]) -> RedisServer {
        let dir = tempfile::tempdir().unwrap();
        if let Some(rdb) = rdb {
            std::fs::copy(rdb, dir.path().join("dump.rdb")).unwrap();
        }
        // A port that is free now; redis-server binds it a moment later.
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(dir.path())
            .args(["--logfile", "redis.log", "--dbfilename", "dump.rdb"])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server must be installed (apt-get install redis-server)");
        let server = RedisServer { port, dir, child };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(mut c) = server.try_conn() {
                if redis::cmd("PING").query::<String>(&mut c).is_ok() {
                    return server;
                }
            }
            assert!(Instant::now() < deadline, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn try_conn(&self) -> redis::RedisResult<Connection> {
        redis::Client::open(format!("redis://127.0.0.1:{}/", self.port))?.get_connection()
    }

    /// A connection.
    pub fn conn(&self) -> Connection {
        self.try_conn().unwrap()
    }

    /// Every key of database `db`, sorted.
    pub fn keys(&self, db: usize) -> Vec<Vec<u8>> {
        keys(&mut self.conn(), db)
    }

    /// The path of `dump.rdb` in its directory.
    pub fn rdb_path(&self) -> PathBuf {
        self.dir.path().join("dump.rdb")
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A canonical text of `key`'s type and value on the connection's selected database (sets
/// sorted; hash fields sorted unless `ordered`), so two servers can be compared.
pub fn describe(c: &mut Connection, key: &[u8], ordered: bool) -> String {
    let t: String = redis::cmd("TYPE").arg(key).query(c).unwrap();
    let show = |items: Vec<Vec<u8>>| -> String {
        items
            .iter()
            .map(|i| format!("{:?}", String::from_utf8_lossy(i)))
            .collect::<Vec<_>>()
            .join(",")
    };
    let body = match t.as_str() {
        "none" => String::new(),
        "string" => {
            let v: Vec<u8> = redis::cmd("GET").arg(key).query(c).unwrap();
            show(vec![v])
        }
        "list" => show(
            redis::cmd("LRANGE")
                .arg(key)
                .arg(0)
                .arg(-1)
                .query(c)
                .unwrap(),
        ),
        "set" => {
            let mut m: Vec<Vec<u8>> = redis::cmd("SMEMBERS").arg(key).query(c).unwrap();
            m.sort();
            show(m)
        }
        "zset" => show(
            redis::cmd("ZRANGE")
                .arg(key)
                .arg(0)
                .arg(-1)
                .arg("WITHSCORES")
                .query(c)
                .unwrap(),
        ),
        "hash" => {
            let flat: Vec<Vec<u8>> = redis::cmd("HGETALL").arg(key).query(c).unwrap();
            let mut pairs: Vec<(Vec<u8>, Vec<u8>)> = flat
                .chunks(2)
                .map(|p| (p[0].clone(), p[1].clone()))
                .collect();
            if !ordered {
                pairs.sort();
            }
            show(pairs.into_iter().flat_map(|(f, v)| [f, v]).collect())
        }
        other => panic!("unexpected type {other}"),
    };
    format!("{t}:{body}")
}

/// Every key of database `db` on a connection (left selected), sorted.
pub fn keys(c: &mut Connection, db: usize) -> Vec<Vec<u8>> {
    redis::cmd("SELECT").arg(db).query::<()>(c).unwrap();
    let mut keys: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*").query(c).unwrap();
    keys.sort();
    keys
}
