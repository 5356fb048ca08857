//! Protected mode and the cross-protocol defence: the two checks that keep a node which was
//! started without a password from being used by whoever can reach its port.
//!
//! - **Protected mode** (`protected-mode yes`, the default, as in Redis 7.0): while the
//!   default user has no password ([`default_user_nopass`]), a client whose address is not
//!   loopback gets Redis's `-DENIED ...` text and is disconnected before it can send
//!   anything. Tollgate treats all of 127.0.0.0/8, `::1` and IPv4-mapped 127.x as loopback
//!   (redis-server 7.0.15 compares the text of the address with `127.0.0.1` and `::1`
//!   only); it has no Unix socket. Each refused address is logged at most once a minute, so
//!   a scanner cannot flood the log.
//! - **Cross-protocol defence**: a request whose command name is `POST` or `Host:` (any
//!   case, as Redis's `processCommand` checks `argv[0]`) is an HTTP request that a browser
//!   page or a server-side request forgery sent to the Redis port; the connection is closed
//!   before that request or anything after it runs, and Redis's warning is logged at most
//!   once a minute.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::acl::Acl;
use crate::config::Config;

/// What a non-loopback client gets in protected mode (redis-server 7.0.15's exact text).
pub const DENIED: &str = "-DENIED Redis is running in protected mode because protected mode is enabled and no password is set for the default user. In this mode connections are only accepted from the loopback interface. If you want to connect from external computers to Redis you may adopt one of the following solutions: 1) Just disable protected mode sending the command 'CONFIG SET protected-mode no' from the loopback interface by connecting to Redis from the same host the server is running, however MAKE SURE Redis is not publicly accessible from internet if you do so. Use CONFIG REWRITE to make this change permanent. 2) Alternatively you can just disable the protected mode by editing the Redis configuration file, and setting the protected mode option to 'no', and then restarting the server. 3) If you started the server manually just for testing, restart it with the '--protected-mode no' option. 4) Setup a an authentication password for the default user. NOTE: You only need to do one of the above things in order for the server to start accepting connections from the outside.\r\n";

/// Redis's log line when a request looks like HTTP.
pub const ATTACK_WARNING: &str = "Possible SECURITY ATTACK detected. It looks like somebody is sending POST or Host: commands to Redis. This is likely due to an attacker attempting to use Cross Protocol Scripting to compromise your Redis instance. Connection aborted.";

/// How often one event is logged at most.
const LOG_EVERY: Duration = Duration::from_secs(60);

/// Most addresses remembered for the refusal log (older ones are forgotten first).
const MAX_REMEMBERED: usize = 4096;

/// Whether the default user logs in without a password (its `nopass` flag, which
/// `requirepass` and ACL SETUSER default change). Protected mode applies only then.
pub fn default_user_nopass(acl: &Acl) -> bool {
    acl.default_nopass()
}

/// Whether `ip` is this machine's loopback interface.
pub fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(a) => a.is_loopback(),
        IpAddr::V6(a) => a.is_loopback() || a.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback()),
    }
}

/// Whether `name` (a request's first argument) is an HTTP method or header Redis refuses.
pub fn is_http(name: &[u8]) -> bool {
    name.eq_ignore_ascii_case(b"post") || name.eq_ignore_ascii_case(b"host:")
}

/// The two checks with their rate-limited logs (one per server).
#[derive(Debug, Default)]
pub struct Guard {
    /// When each refused address was last logged.
    denied_logged: Mutex<HashMap<IpAddr, Instant>>,
    /// When the cross-protocol warning was last logged.
    attack_logged: Mutex<Option<Instant>>,
}

impl Guard {
    /// Whether protected mode refuses a client from `peer` (and log it, at most once a
    /// minute per address).
    pub fn protected_mode_denies(&self, config: &Config, acl: &Acl, peer: IpAddr) -> bool {
        if !config.protected_mode || !default_user_nopass(acl) || is_loopback(peer) {
            return false;
        }
        let now = Instant::now();
        let mut logged = self.denied_logged.lock();
        if logged
            .get(&peer)
            .is_none_or(|at| now.duration_since(*at) >= LOG_EVERY)
        {
            if logged.len() >= MAX_REMEMBERED {
                logged.retain(|_, at| now.duration_since(*at) < LOG_EVERY);
            }
            if logged.len() < MAX_REMEMBERED {
                logged.insert(peer, now);
            }
            tracing::warn!(
                %peer,
                "protected mode: refused a connection from a non-loopback address (the default user has no password; set requirepass or protected-mode no)"
            );
        }
        true
    }

    /// Whether a request named `name` is HTTP, which closes the connection (and log Redis's
    /// warning, at most once a minute).
    pub fn cross_protocol(&self, name: &[u8]) -> bool {
        if !is_http(name) {
            return false;
        }
        let now = Instant::now();
        let mut logged = self.attack_logged.lock();
        if logged.is_none_or(|at| now.duration_since(at) >= LOG_EVERY) {
            *logged = Some(now);
            tracing::warn!("{ATTACK_WARNING}");
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_all_of_127_and_v6_one() {
        for a in ["127.0.0.1", "127.1.2.3", "::1", "::ffff:127.0.0.1"] {
            assert!(is_loopback(a.parse().unwrap()), "{a}");
        }
        for a in [
            "10.0.0.1",
            "192.168.1.1",
            "::2",
            "::ffff:10.0.0.1",
            "0.0.0.0",
        ] {
            assert!(!is_loopback(a.parse().unwrap()), "{a}");
        }
    }

    #[test]
    fn http_names_in_any_case() {
        for n in ["POST", "post", "Host:", "HOST:"] {
            assert!(is_http(n.as_bytes()), "{n}");
        }
        for n in ["GET", "host", "postx", "SET"] {
            assert!(!is_http(n.as_bytes()), "{n}");
        }
    }

    #[test]
    fn protected_mode_needs_no_password_and_a_remote_peer() {
        let guard = Guard::default();
        let remote: IpAddr = "10.1.2.3".parse().unwrap();
        let mut c = Config::default();
        let acl = Acl::new(None);
        assert!(guard.protected_mode_denies(&c, &acl, remote));
        assert!(!guard.protected_mode_denies(&c, &acl, "127.0.0.1".parse().unwrap()));
        acl.set_requirepass(Some("pw"));
        assert!(!guard.protected_mode_denies(&c, &acl, remote));
        acl.set_requirepass(None);
        assert!(guard.protected_mode_denies(&c, &acl, remote));
        // A password given to the default user with ACL SETUSER counts as well.
        acl.set_user("default", &[">secret".to_string()], false)
            .unwrap();
        assert!(!guard.protected_mode_denies(&c, &acl, remote));
        acl.set_requirepass(None);
        c.protected_mode = false;
        assert!(!guard.protected_mode_denies(&c, &acl, remote));
    }
}
