//! The `tollgate` binary (and `tollgate import-rdb`, see [`tollgate::persistence::import`]):
//! parse configuration, start logging, serve until SIGINT/SIGTERM, or
//! until a durable or cluster node's Raft stops on an error (a failed disk write: disk full, I/O error):
//! then it exits with status 3, so that a supervisor restarts it, instead of staying up
//! answering errors.

use tollgate::config::{Cli, Config};
use tollgate::server::Server;

#[global_allocator]
static ALLOC: tollgate::alloc::CountingAlloc = tollgate::alloc::CountingAlloc;

fn main() {
    // `tollgate import-rdb FILE ...` is a client tool, not a server start.
    if std::env::args().nth(1).as_deref() == Some("import-rdb") {
        std::process::exit(tollgate::persistence::import::main(
            std::env::args().skip(1),
        ));
    }
    let config = match Config::load(Cli::from_args()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("tollgate: {e}");
            std::process::exit(2);
        }
    };
    tollgate::server::logging::init(&config);
    let runtime = tollgate::server::runtime(config.threads).expect("tokio runtime");
    let status = runtime.block_on(async move {
        let server = match Server::bind(config.clone()).await {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(bind = %config.bind, port = config.port, error = %e, "cannot start");
                std::process::exit(1);
            }
        };
        let node = server.shared().engine.cluster().cloned();
        let failed = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stop = {
            let failed = failed.clone();
            async move {
                let storage = async {
                    match &node {
                        Some(node) => node.failure().await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    _ = shutdown_signal() => {}
                    why = storage => {
                        let others = match node.as_ref().is_some_and(|n| n.has_other_members()) {
                            true => "; the other nodes keep serving",
                            false => "",
                        };
                        tracing::error!(
                            "raft stopped on an error, this node can no longer serve: {why}; \
                             exiting with status {RAFT_FAILED} so that a supervisor restarts it \
                             (once the disk has space again, if it is full{others})"
                        );
                        failed.store(true, std::sync::atomic::Ordering::Release);
                    }
                }
            }
        };
        server.serve(stop).await;
        if failed.load(std::sync::atomic::Ordering::Acquire) {
            RAFT_FAILED
        } else {
            0
        }
    });
    // A script may still hold a worker thread (SHUTDOWN NOSAVE during BUSY): exit now.
    std::process::exit(status);
}

/// Exit status when a cluster node's Raft stopped on an error (see the module docs).
const RAFT_FAILED: i32 = 3;

/// Resolves on SIGINT or SIGTERM.
async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    tracing::info!("received shutdown signal");
}
