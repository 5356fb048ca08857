//! Log output: the filter (`--log`; the Raft library's own messages only from `warn` up
//! unless the filter names `openraft`), the format (`--log-format text|json`, through
//! tracing-subscriber's formatters), and colour only when standard output (where the log
//! goes, as Redis's does) is a terminal, so a log file or a journal never gets ANSI codes.
//!
//! openraft logs every failed attempt to reach a peer (a vote request, a replication
//! call) at ERROR or WARN, many times a second while a peer is down, and also while the
//! other nodes of a new cluster are still starting. Those are expected events: the Raft
//! network layer (`tollgate_raft`'s `PeerHealth`) logs one INFO line when a peer is not up
//! yet, one when it is lost and one when it is back, and the per-attempt lines of
//! openraft are dropped here by their call sites (openraft 0.9.25, pinned in Cargo.lock;
//! `tests/observability.rs` fails if an ERROR line reappears). Every other openraft
//! message at WARN and above is kept.

use std::io::IsTerminal;

use tracing::Metadata;
use tracing_subscriber::filter::{filter_fn, FilterExt};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

use crate::config::{Config, LogFormat};

/// The filter for `--log` (see the module docs); a filter that does not parse falls back
/// to `info`.
pub fn filter(log: &str) -> EnvFilter {
    let text = if log.contains("openraft") {
        log.to_string()
    } else {
        format!("{log},openraft=warn")
    };
    EnvFilter::try_new(text).unwrap_or_else(|e| {
        eprintln!("tollgate: bad --log filter '{log}' ({e}); using info");
        EnvFilter::new("info,openraft=warn")
    })
}

/// openraft's per-attempt reports of an unreachable peer (file suffix, line).
const PEER_ATTEMPTS: [(&str, u32); 5] = [
    // "error replication to target=N" (WARN) and "RPCError" (ERROR).
    ("replication/mod.rs", 258),
    ("replication/mod.rs", 284),
    // "timeout while confirming leadership for read request".
    ("core/raft_core.rs", 383),
    // A vote request that timed out, or failed ("while requesting vote").
    ("core/raft_core.rs", 1099),
    ("core/raft_core.rs", 1112),
];

/// Whether an event is one of openraft's per-attempt peer errors (dropped).
fn peer_attempt(meta: &Metadata<'_>) -> bool {
    meta.target().starts_with("openraft")
        && match (meta.file(), meta.line()) {
            (Some(file), Some(line)) => PEER_ATTEMPTS
                .iter()
                .any(|(f, l)| *l == line && file.ends_with(f)),
            _ => false,
        }
}

/// Install the process's log subscriber (once, at start).
pub fn init(config: &Config) {
    let keep = filter(&config.log).and(filter_fn(|meta| !peer_attempt(meta)));
    let registry = tracing_subscriber::registry();
    match config.log_format {
        LogFormat::Json => registry
            .with(
                tracing_subscriber::fmt::layer()
                    .json()
                    .with_current_span(false)
                    .with_span_list(false)
                    .with_writer(std::io::stdout)
                    .with_filter(keep),
            )
            .init(),
        LogFormat::Text => registry
            .with(
                tracing_subscriber::fmt::layer()
                    .with_ansi(std::io::stdout().is_terminal())
                    .with_writer(std::io::stdout)
                    .with_filter(keep),
            )
            .init(),
    }
}
