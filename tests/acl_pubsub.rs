//! ACL and pub/sub through real connections: `acl-pubsub-default`, and the connections an
//! ACL change closes, as redis-server 7.0.15 closes them (checked side by side with it
//! while writing these cases): subscribers whose user may no longer use one of their
//! channels or patterns, the clients of a deleted user, every non-default client after
//! ACL LOAD; a user turned `off`, or changes that keep the subscriptions allowed, close
//! nothing.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::{err, q, TestServer};

/// A raw connection logged in as `user` (any password: the users here are `nopass`),
/// after `cmd` (a subscription, or nothing) was answered.
fn client(s: &TestServer, user: &str, cmd: &[&str]) -> TcpStream {
    let mut c = TcpStream::connect(s.addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    send(&mut c, &["AUTH", user, "x"]);
    assert_eq!(read_some(&mut c), "+OK\r\n");
    if !cmd.is_empty() {
        send(&mut c, cmd);
        let r = read_some(&mut c);
        assert!(r.starts_with('*'), "{r}");
    }
    c
}

fn send(c: &mut TcpStream, args: &[&str]) {
    let mut out = format!("*{}\r\n", args.len());
    for a in args {
        out.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    c.write_all(out.as_bytes()).unwrap();
}

fn read_some(c: &mut TcpStream) -> String {
    let mut buf = [0u8; 4096];
    match c.read(&mut buf) {
        Ok(n) => String::from_utf8_lossy(&buf[..n]).into_owned(),
        Err(e) => panic!("no reply: {e}"),
    }
}

/// Everything the server sends until it closes the connection; panics when it does not
/// close it within the read timeout (a reset counts as closed, after what came before).
fn read_until_closed(c: &mut TcpStream) -> String {
    let mut rest = Vec::new();
    match c.read_to_end(&mut rest) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        Err(e) => panic!("the connection was not closed: {e}"),
    }
    String::from_utf8_lossy(&rest).into_owned()
}

/// Whether the connection still answers PING (false: the server closed it).
fn alive(c: &mut TcpStream) -> bool {
    if c.write_all(b"*1\r\n$4\r\nPING\r\n").is_err() {
        return false;
    }
    let mut buf = [0u8; 256];
    match c.read(&mut buf) {
        Ok(0) => false,
        Ok(_) => true,
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => false,
        Err(e) => panic!("neither an answer nor a close: {e}"),
    }
}

const BASE: &[&str] = &["reset", "on", "nopass", "&ch*", "+@all", "~*"];

fn setuser(admin: &mut redis::Connection, name: &str, rules: &[&str]) {
    let mut args = vec!["ACL", "SETUSER", name];
    args.extend_from_slice(rules);
    let _: () = q(admin, &args);
}

#[test]
fn acl_pubsub_default_gives_new_users_and_reset_their_channels() {
    let s = TestServer::start();
    let mut c = s.conn();
    let v: Vec<String> = q(&mut c, &["CONFIG", "GET", "acl-pubsub-default"]);
    assert_eq!(v, ["acl-pubsub-default", "resetchannels"]);
    setuser(&mut c, "a", &["on"]);
    let list: Vec<String> = q(&mut c, &["ACL", "LIST"]);
    assert!(
        list.contains(&"user a on resetchannels -@all".to_string()),
        "{list:?}"
    );
    assert_eq!(
        err(&mut c, &["CONFIG", "SET", "acl-pubsub-default", "some"]),
        "ERR CONFIG SET failed (possibly related to argument 'acl-pubsub-default') - argument(s) must be one of the following: allchannels, resetchannels"
    );
    let _: () = q(
        &mut c,
        &["CONFIG", "SET", "acl-pubsub-default", "ALLCHANNELS"],
    );
    let v: Vec<String> = q(&mut c, &["CONFIG", "GET", "acl-pubsub-default"]);
    assert_eq!(v[1], "allchannels");
    // A new user, and `reset`, get every channel; an existing user keeps its own.
    setuser(&mut c, "b", &["on"]);
    setuser(&mut c, "a", &["+ping"]);
    let list: Vec<String> = q(&mut c, &["ACL", "LIST"]);
    assert!(list.contains(&"user b on &* -@all".to_string()), "{list:?}");
    assert!(
        list.contains(&"user a on resetchannels -@all +ping".to_string()),
        "{list:?}"
    );
    setuser(&mut c, "a", &["reset"]);
    let list: Vec<String> = q(&mut c, &["ACL", "LIST"]);
    assert!(
        list.contains(&"user a off sanitize-payload &* -@all".to_string()),
        "{list:?}"
    );
    // And a user that may use every channel may subscribe to any.
    setuser(&mut c, "b", &["nopass", "+subscribe"]);
    let _sub = client(&s, "b", &["SUBSCRIBE", "anything"]);
    let _: () = q(
        &mut c,
        &["CONFIG", "SET", "acl-pubsub-default", "resetchannels"],
    );
    setuser(&mut c, "b", &["reset"]);
    let list: Vec<String> = q(&mut c, &["ACL", "LIST"]);
    assert!(
        list.contains(&"user b off sanitize-payload resetchannels -@all".to_string()),
        "{list:?}"
    );
}

#[test]
fn losing_a_channel_closes_the_subscribers_that_use_it() {
    let s = TestServer::start();
    let mut admin = s.conn();
    // (rules applied after BASE, subscriber of ch1 kept, of pattern ch* kept, plain client kept)
    let cases: &[(&[&str], bool, bool)] = &[
        (&["off"], true, true),
        (&["-subscribe", "-psubscribe"], true, true),
        (&["&other"], true, true),
        (&["resetchannels", "&ch*"], true, true),
        (&["resetchannels", "&ch1"], true, false),
        (&["resetchannels", "&c*"], true, false),
        (&["reset", "on", "nopass", "+@all", "~*"], false, false),
        (&["allchannels"], true, true),
    ];
    for (rules, sub_kept, psub_kept) in cases {
        setuser(&mut admin, "u", BASE);
        let mut sub = client(&s, "u", &["SUBSCRIBE", "ch1"]);
        let mut psub = client(&s, "u", &["PSUBSCRIBE", "ch*"]);
        let mut ssub = client(&s, "u", &["SSUBSCRIBE", "ch1"]);
        let mut plain = client(&s, "u", &[]);
        // Another user's subscriber is never touched.
        setuser(&mut admin, "w", BASE);
        let mut other = client(&s, "w", &["SUBSCRIBE", "ch1"]);
        setuser(&mut admin, "u", rules);
        assert_eq!(alive(&mut sub), *sub_kept, "SUBSCRIBE ch1 after {rules:?}");
        assert_eq!(
            alive(&mut ssub),
            *sub_kept,
            "SSUBSCRIBE ch1 after {rules:?}"
        );
        assert_eq!(
            alive(&mut psub),
            *psub_kept,
            "PSUBSCRIBE ch* after {rules:?}"
        );
        assert!(
            alive(&mut plain),
            "a client without subscriptions, after {rules:?}"
        );
        assert!(
            alive(&mut other),
            "another user's subscriber, after {rules:?}"
        );
    }
    // A selector's channels count too: taking the selector away closes the subscriber.
    for (rules, kept) in [
        (&["(&other +@all)"][..], true),
        (&["clearselectors"][..], false),
    ] {
        setuser(
            &mut admin,
            "u",
            &["reset", "on", "nopass", "+@all", "~*", "(&ch* +@pubsub)"],
        );
        let mut sub = client(&s, "u", &["SUBSCRIBE", "ch1"]);
        setuser(&mut admin, "u", rules);
        assert_eq!(alive(&mut sub), kept, "after {rules:?}");
    }
    // A client that unsubscribed is a plain client again.
    setuser(&mut admin, "u", BASE);
    let mut was = client(&s, "u", &["SUBSCRIBE", "ch1"]);
    send(&mut was, &["UNSUBSCRIBE"]);
    assert!(read_some(&mut was).contains("unsubscribe"));
    setuser(&mut admin, "u", &["resetchannels"]);
    assert!(alive(&mut was));
    // A message published after the change does not reach a closed subscriber: its
    // connection ends without it.
    setuser(&mut admin, "u", BASE);
    let mut sub = client(&s, "u", &["SUBSCRIBE", "ch1"]);
    setuser(&mut admin, "u", &["resetchannels"]);
    let _: i64 = q(&mut admin, &["PUBLISH", "ch1", "secret"]);
    assert!(!read_until_closed(&mut sub).contains("secret"));
}

#[test]
fn deleting_a_user_closes_all_its_clients_and_its_own_after_the_reply() {
    let s = TestServer::start();
    let mut admin = s.conn();
    setuser(&mut admin, "u", BASE);
    let mut sub = client(&s, "u", &["SUBSCRIBE", "ch1"]);
    let mut plain = client(&s, "u", &[]);
    let n: i64 = q(&mut admin, &["ACL", "DELUSER", "u"]);
    assert_eq!(n, 1);
    assert!(!alive(&mut sub));
    assert!(!alive(&mut plain));
    // A user that deletes itself gets the reply, then the connection closes.
    setuser(&mut admin, "u", BASE);
    let mut me = client(&s, "u", &[]);
    send(&mut me, &["ACL", "DELUSER", "u"]);
    assert_eq!(read_until_closed(&mut me), ":1\r\n");
}

#[test]
fn acl_load_closes_every_client_but_the_default_users() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("users.acl");
    let text = "user default on nopass ~* &* +@all\nuser u on nopass ~* &ch* +@all\n";
    std::fs::write(&file, text).unwrap();
    let path = file.clone();
    let s = TestServer::with(move |c| c.aclfile = Some(path));
    let mut sub = client(&s, "u", &["SUBSCRIBE", "ch1"]);
    let mut plain = client(&s, "u", &[]);
    let mut dsub = TcpStream::connect(s.addr).unwrap();
    dsub.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    send(&mut dsub, &["SUBSCRIBE", "zz"]);
    assert!(read_some(&mut dsub).contains("subscribe"));
    // The same file: Redis 7.0 still closes the clients of every user but default (and
    // does not check default's subscribers, even when its channels shrank).
    std::fs::write(&file, text.replace("&* +@all\nuser", "&ch* +@all\nuser")).unwrap();
    let mut admin = s.conn();
    let _: () = q(&mut admin, &["ACL", "LOAD"]);
    assert!(!alive(&mut sub));
    assert!(!alive(&mut plain));
    assert!(alive(&mut dsub));
    // A client of another user that runs ACL LOAD gets the reply, then is closed.
    let mut me = client(&s, "u", &[]);
    send(&mut me, &["ACL", "LOAD"]);
    assert_eq!(read_until_closed(&mut me), "+OK\r\n");
}
