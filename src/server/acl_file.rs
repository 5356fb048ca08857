//! The `aclfile`: ACL SAVE writes the users to it in Redis's format (`user <name> <rules>`
//! lines), ACL LOAD replaces the users with its content, and a server started with an
//! `aclfile` takes its users from it (refusing to start when the file has errors, as Redis
//! does).

use super::acl::change;
use super::connection::Client;
use super::Shared;
use crate::acl::Change;
use crate::acl::{self, User};
use crate::protocol::Reply;

const NOT_CONFIGURED: &str = "ERR This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration.";

/// ACL SAVE: write the users to the aclfile (a new file renamed over the old one, so a
/// crash leaves one or the other whole).
pub async fn save(shared: &Shared) -> Reply {
    let Some(path) = shared.config.read().aclfile.clone() else {
        return Reply::err(NOT_CONFIGURED);
    };
    let text = shared.engine.acl().to_file();
    match write_file(&path, &text) {
        Ok(()) => Reply::ok(),
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "ACL SAVE failed");
            Reply::err("ERR There was an error trying to save the ACLs. Please check the server logs for more information")
        }
    }
}

fn write_file(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let tmp = path.with_extension("tmp-acl");
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(text.as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}

/// Read and check the aclfile: its users (new ones with `acl-pubsub-default`:
/// `pubsub_all`), or ACL LOAD's error text.
pub fn read(path: &std::path::Path, pubsub_all: bool) -> Result<Vec<User>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        format!(
            "Error loading ACLs, opening file '{}': {}",
            path.display(),
            io_text(&e)
        )
    })?;
    acl::parse_file(&text, &path.display().to_string(), pubsub_all)
}

/// The C library's text for an I/O error (`No such file or directory`), without Rust's
/// ` (os error 2)`.
fn io_text(e: &std::io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error") {
        Some(at) => s[..at].to_string(),
        None => s,
    }
}

/// ACL LOAD: replace the users with the aclfile's (all or nothing).
pub async fn load(c: &mut Client) -> Reply {
    let (path, pubsub_all) = {
        let config = c.shared.config.read();
        (config.aclfile.clone(), config.acl_pubsub_all)
    };
    let Some(path) = path else {
        return Reply::err(NOT_CONFIGURED);
    };
    match read(&path, pubsub_all) {
        Err(e) => Reply::err(format!("ERR {e}")),
        Ok(users) => {
            let users = users.iter().map(|u| (u.name.clone(), u.rules())).collect();
            change(c, Change::Replace(users)).await
        }
    }
}
