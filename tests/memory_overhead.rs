//! INFO memory's `used_memory_overhead`/`used_memory_dataset` split, alone in its test
//! binary: it measures the process's heap, which other tests running beside it would move.

mod common;

use common::TestServer;

// As in the server binary, so that INFO memory reports live heap bytes.
#[global_allocator]
static ALLOC: tollgate::alloc::CountingAlloc = tollgate::alloc::CountingAlloc;

/// INFO memory splits `used_memory` into `used_memory_overhead` and `used_memory_dataset`
/// as Redis does: data grows the dataset by at least its bytes and the overhead (tables)
/// by less; FLUSHALL gives the data back; a connection's buffers are `mem_clients_normal`.
/// (Megabytes, against the few KB the other tests of this process allocate meanwhile.)
#[test]
fn memory_overhead_and_dataset_split_used_memory() {
    let s = TestServer::start();
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
