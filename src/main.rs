//! The `tollgate` binary: parse configuration, start logging, serve until SIGINT/SIGTERM.

use clap::Parser;
use tollgate::config::{Cli, Config};
use tollgate::server::Server;

#[global_allocator]
static ALLOC: tollgate::alloc::CountingAlloc = tollgate::alloc::CountingAlloc;

fn main() {
    let config = match Config::load(Cli::parse()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("tollgate: {e}");
            std::process::exit(2);
        }
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_new(&config.log)
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let runtime = tollgate::server::runtime(config.threads).expect("tokio runtime");
    runtime.block_on(async move {
        let server = match Server::bind(config.clone()).await {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(bind = %config.bind, port = config.port, error = %e, "cannot start");
                std::process::exit(1);
            }
        };
        server.serve(shutdown_signal()).await;
    });
    // A script may still hold a worker thread (SHUTDOWN NOSAVE during BUSY): exit now.
    std::process::exit(0);
}

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
