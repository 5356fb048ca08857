//! Configuration: defaults, overridden by a TOML file, overridden by environment
//! variables (`TOLLGATE_*`), overridden by command-line flags.

use std::path::PathBuf;

use clap::Parser;
use serde::Deserialize;

/// Command-line flags; every one can also come from the environment or the TOML file.
#[derive(Parser, Debug, Default, Clone)]
#[command(
    name = "tollgate",
    version,
    about = "A Redis-protocol rate-limiter server"
)]
pub struct Cli {
    /// TOML configuration file.
    #[arg(long, env = "TOLLGATE_CONFIG")]
    pub config: Option<PathBuf>,
    /// Address to listen on.
    #[arg(long, env = "TOLLGATE_BIND")]
    pub bind: Option<String>,
    /// Client port.
    #[arg(long, env = "TOLLGATE_PORT")]
    pub port: Option<u16>,
    /// Password clients must send with AUTH.
    #[arg(long, env = "TOLLGATE_REQUIREPASS")]
    pub requirepass: Option<String>,
    /// Maximum simultaneous client connections.
    #[arg(long, env = "TOLLGATE_MAXCLIENTS")]
    pub maxclients: Option<usize>,
    /// Largest bulk string a client may send, in bytes.
    #[arg(long, env = "TOLLGATE_PROTO_MAX_BULK_LEN")]
    pub proto_max_bulk_len: Option<usize>,
    /// Largest unparsed input buffered per client, in bytes.
    #[arg(long, env = "TOLLGATE_CLIENT_QUERY_BUFFER_LIMIT")]
    pub client_query_buffer_limit: Option<usize>,
    /// Milliseconds a script may run before other clients get -BUSY.
    #[arg(long, env = "TOLLGATE_BUSY_REPLY_THRESHOLD")]
    pub busy_reply_threshold: Option<u64>,
    /// Enable the DEBUG command (tests use DEBUG ADVANCE-TIME): yes or no.
    #[arg(long, env = "TOLLGATE_ENABLE_DEBUG_COMMAND")]
    pub enable_debug_command: Option<String>,
    /// Log filter, e.g. `info` or `tollgate=debug`.
    #[arg(long, env = "TOLLGATE_LOG")]
    pub log: Option<String>,
}

/// The TOML file's shape: the same settings, with Redis-style dashed names allowed.
#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct FileConfig {
    bind: Option<String>,
    port: Option<u16>,
    requirepass: Option<String>,
    maxclients: Option<usize>,
    proto_max_bulk_len: Option<usize>,
    client_query_buffer_limit: Option<usize>,
    busy_reply_threshold: Option<u64>,
    enable_debug_command: Option<String>,
    log: Option<String>,
}

/// The resolved configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// Listen address.
    pub bind: String,
    /// Client port (0 = pick a free port).
    pub port: u16,
    /// Password, if any.
    pub requirepass: Option<String>,
    /// Connection cap.
    pub maxclients: usize,
    /// proto-max-bulk-len.
    pub proto_max_bulk_len: usize,
    /// client-query-buffer-limit.
    pub client_query_buffer_limit: usize,
    /// busy-reply-threshold in ms.
    pub busy_reply_threshold: u64,
    /// Whether DEBUG is allowed.
    pub enable_debug_command: bool,
    /// Log filter.
    pub log: String,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            bind: "127.0.0.1".into(),
            port: 6379,
            requirepass: None,
            maxclients: 10_000,
            proto_max_bulk_len: 512 * 1024 * 1024,
            client_query_buffer_limit: 1024 * 1024 * 1024,
            busy_reply_threshold: 5000,
            enable_debug_command: false,
            log: "info".into(),
        }
    }
}

/// Parse `yes`/`no` like Redis's config.
pub fn parse_yes_no(s: &str) -> Result<bool, String> {
    match s.to_ascii_lowercase().as_str() {
        "yes" | "true" | "1" => Ok(true),
        "no" | "false" | "0" => Ok(false),
        _ => Err(format!("expected yes or no, got '{s}'")),
    }
}

impl Config {
    /// Resolve flags (which clap already merged with the environment) over the file over defaults.
    pub fn load(cli: Cli) -> Result<Config, String> {
        let file: FileConfig = match &cli.config {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
                toml::from_str(&text).map_err(|e| format!("bad config {}: {e}", path.display()))?
            }
            None => FileConfig::default(),
        };
        let d = Config::default();
        let debug = cli.enable_debug_command.or(file.enable_debug_command);
        Ok(Config {
            bind: cli.bind.or(file.bind).unwrap_or(d.bind),
            port: cli.port.or(file.port).unwrap_or(d.port),
            requirepass: cli
                .requirepass
                .or(file.requirepass)
                .filter(|p| !p.is_empty()),
            maxclients: cli.maxclients.or(file.maxclients).unwrap_or(d.maxclients),
            proto_max_bulk_len: cli
                .proto_max_bulk_len
                .or(file.proto_max_bulk_len)
                .unwrap_or(d.proto_max_bulk_len),
            client_query_buffer_limit: cli
                .client_query_buffer_limit
                .or(file.client_query_buffer_limit)
                .unwrap_or(d.client_query_buffer_limit),
            busy_reply_threshold: cli
                .busy_reply_threshold
                .or(file.busy_reply_threshold)
                .unwrap_or(d.busy_reply_threshold),
            enable_debug_command: match debug {
                Some(s) => parse_yes_no(&s)?,
                None => d.enable_debug_command,
            },
            log: cli.log.or(file.log).unwrap_or(d.log),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_override_file_which_overrides_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.toml");
        std::fs::write(
            &path,
            "port = 7000\nmaxclients = 5\nenable-debug-command = \"yes\"\n",
        )
        .unwrap();
        let cli = Cli {
            config: Some(path),
            port: Some(7001),
            ..Cli::default()
        };
        let c = Config::load(cli).unwrap();
        assert_eq!(c.port, 7001);
        assert_eq!(c.maxclients, 5);
        assert!(c.enable_debug_command);
        assert_eq!(c.bind, "127.0.0.1");
    }

    #[test]
    fn unknown_file_settings_are_rejected() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.toml");
        std::fs::write(&path, "prot = 7000\n").unwrap();
        let cli = Cli {
            config: Some(path),
            ..Cli::default()
        };
        assert!(Config::load(cli).unwrap_err().contains("prot"));
    }
}
