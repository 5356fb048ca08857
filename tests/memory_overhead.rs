//! INFO memory's `used_memory_overhead`/`used_memory_dataset` split and FLUSHALL giving
//! memory back. They measure the process's heap, which other tests running beside them
//! would move, so this binary has one test, and it runs both checks on one server: a
//! server of a test before it would still be freeing its memory (its threads end after
//! the test does) while the next one reads its start-up figure, which made
//! `used_memory_overhead >= used_memory_startup` fail in about 3 runs of 10.

mod common;

use common::{q, TestServer};

// As in the server binary, so that INFO memory reports live heap bytes.
#[global_allocator]
static ALLOC: tollgate::alloc::CountingAlloc = tollgate::alloc::CountingAlloc;

#[test]
fn heap_accounting() {
    let s = TestServer::start();
    memory_overhead_and_dataset_split_used_memory(&s);
    flushall_gives_the_keyspace_memory_back(&s);
}

/// INFO memory splits `used_memory` into `used_memory_overhead` and `used_memory_dataset`
/// as Redis does: data grows the dataset by at least its bytes and the overhead (tables)
/// by less; FLUSHALL gives the data back; a connection's buffers are `mem_clients_normal`.
/// (Megabytes, against the few KB the other tests of this process allocate meanwhile.)
fn memory_overhead_and_dataset_split_used_memory(s: &TestServer) {
    let mut con = s.conn();
    let memory = |con: &mut redis::Connection| {
        let text: String = redis::cmd("INFO").arg("memory").query(con).unwrap();
        move |f: &str| -> u64 {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("{f}:")))
                .unwrap_or_else(|| panic!("INFO memory has no {f}"))
                .trim()
                .parse()
                .unwrap()
        }
    };
    let before = memory(&mut con);
    assert_eq!(
        before("used_memory_overhead") + before("used_memory_dataset"),
        before("used_memory")
    );
    assert!(before("used_memory_overhead") >= before("used_memory_startup"));
    assert!(before("mem_clients_normal") > 0);
    const KEYS: u64 = 20_000;
    const VALUE: usize = 200;
    let value = "v".repeat(VALUE);
    for chunk in 0..KEYS / 500 {
        let mut p = redis::pipe();
        for i in 0..500 {
            p.cmd("SET")
                .arg(format!("key:{}", chunk * 500 + i))
                .arg(&value)
                .ignore();
        }
        let _: () = p.query(&mut con).unwrap();
    }
    let full = memory(&mut con);
    assert_eq!(
        full("used_memory_overhead") + full("used_memory_dataset"),
        full("used_memory")
    );
    let data = full("used_memory_dataset") - before("used_memory_dataset");
    let tables = full("used_memory_overhead") - before("used_memory_overhead");
    assert!(data >= KEYS * VALUE as u64, "dataset grew {data}");
    assert!(
        tables >= KEYS * 8 && tables < data,
        "overhead grew {tables}, dataset {data}"
    );
    let _: () = redis::cmd("FLUSHALL").query(&mut con).unwrap();
    let empty = memory(&mut con);
    assert!(
        empty("used_memory_dataset") + KEYS * VALUE as u64 / 2 < full("used_memory_dataset"),
        "dataset after FLUSHALL {} (full: {})",
        empty("used_memory_dataset"),
        full("used_memory_dataset")
    );
}

fn flushall_gives_the_keyspace_memory_back(s: &TestServer) {
    let mut c = s.conn();
    let used = |c: &mut redis::Connection| -> i64 {
        let info: String = redis::cmd("INFO").arg("memory").query(c).unwrap();
        info.lines()
            .find_map(|l| l.strip_prefix("used_memory:"))
            .and_then(|v| v.trim().parse().ok())
            .expect("used_memory in INFO memory")
    };
    let before = used(&mut c);
    // This crate installs the server binary's allocator, so INFO names it as the binary's does.
    let info: String = redis::cmd("INFO").arg("memory").query(&mut c).unwrap();
    assert!(info.contains("\r\nmem_allocator:mimalloc-3."), "{info}");
    // Loaded over a second connection, closed afterwards, so that neither side's
    // pipeline buffers count.
    let mut loader = s.conn();
    let mut pipe = redis::pipe();
    for i in 0..20_000 {
        pipe.cmd("LIMIT.TOKEN")
            .arg(format!("bucket:{i}"))
            .arg(100)
            .arg(10)
            .arg("1h")
            .ignore();
    }
    pipe.query::<()>(&mut loader).unwrap();
    drop((pipe, loader));
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 20_000);
    let full = used(&mut c);
    assert!(full - before > 20_000 * 64, "{before} -> {full}");
    assert_eq!(q::<String>(&mut c, &["FLUSHALL"]), "OK");
    let after = used(&mut c);
    // The tables go too, not only the entries (Redis frees its dicts likewise).
    assert!(
        after - before < (full - before) / 10,
        "{before} -> {full} -> {after}"
    );
}
