//! The client ports' listening sockets (`port` and `tls-port`), which CONFIG SET moves at run
//! time as Redis 7.0's `changeListenPort` does: the new port is bound first (a port that
//! cannot be bound answers Redis's error and the old listener stays), then the old listener
//! is closed; connections already accepted are not touched, and port 0 closes the port.
//!
//! The accept loop (`Server::serve`) polls whichever listeners are current under this
//! module's lock, so a move is complete when CONFIG SET answers: the old port refuses
//! connections from then on and the new one accepts them, without a message to that loop
//! (its task is woken to poll the new socket).

use std::future::Future;
use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::task::{Context, Poll, Waker};

use parking_lot::Mutex;
use tokio::net::{TcpListener, TcpSocket, TcpStream};

/// Redis's text when a port cannot be bound (`applyPort`, `applyTLSPort`).
pub const CANNOT_LISTEN: &str = "Unable to listen on this port. Check server logs.";

/// The pending-connection queue of a client port (what `TcpListener::bind` uses).
const BACKLOG: u32 = 1024;

/// Which client port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Port {
    /// `port`: plaintext.
    Plain,
    /// `tls-port`.
    Tls,
}

/// The client ports' listeners, replaceable while the server runs.
pub struct Listeners {
    slots: Mutex<Slots>,
}

struct Slots {
    plain: Option<TcpListener>,
    tls: Option<TcpListener>,
    /// The accept loop's task, woken when a listener is replaced.
    waker: Option<Waker>,
    /// Poll the TLS listener first next time (so neither port starves the other).
    tls_first: bool,
}

/// An accepted connection, and whether it came over the TLS port.
pub type Accepted = (io::Result<(TcpStream, SocketAddr)>, bool);

impl Listeners {
    /// The listeners bound at start.
    pub fn new(plain: Option<TcpListener>, tls: Option<TcpListener>) -> Listeners {
        Listeners {
            slots: Mutex::new(Slots {
                plain,
                tls,
                waker: None,
                tls_first: false,
            }),
        }
    }

    /// The address `which` listens on now, if it is open.
    pub fn addr(&self, which: Port) -> Option<SocketAddr> {
        let s = self.slots.lock();
        let l = match which {
            Port::Plain => &s.plain,
            Port::Tls => &s.tls,
        };
        l.as_ref().and_then(|l| l.local_addr().ok())
    }

    /// The next connection on either port (never, while both are closed).
    pub fn accept(&self) -> impl Future<Output = Accepted> + '_ {
        std::future::poll_fn(move |cx| self.poll_accept(cx))
    }

    fn poll_accept(&self, cx: &mut Context<'_>) -> Poll<Accepted> {
        let mut s = self.slots.lock();
        if !s.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            s.waker = Some(cx.waker().clone());
        }
        s.tls_first = !s.tls_first;
        let order = match s.tls_first {
            true => [(&s.tls, true), (&s.plain, false)],
            false => [(&s.plain, false), (&s.tls, true)],
        };
        for (listener, over_tls) in order {
            if let Some(l) = listener {
                if let Poll::Ready(r) = l.poll_accept(cx) {
                    return Poll::Ready((r, over_tls));
                }
            }
        }
        Poll::Pending
    }

    /// Close both ports (the server stops; `Shared` may outlive it).
    pub fn close(&self) {
        let (plain, tls) = {
            let mut s = self.slots.lock();
            (s.plain.take(), s.tls.take())
        };
        drop((plain, tls));
    }

    /// Move port `which` to `port` on address `bind` (0 closes it). On an error (Redis's
    /// text; the cause is logged) the listener in use stays.
    pub fn rebind(&self, which: Port, bind: &str, port: u16) -> Result<(), String> {
        let fresh = match port {
            0 => None,
            _ => Some(listen(bind, port).map_err(|e| {
                tracing::warn!(%bind, port, error = %e, "Could not create server TCP listening socket");
                CANNOT_LISTEN.to_string()
            })?),
        };
        let (old, waker) = {
            let mut s = self.slots.lock();
            let slot = match which {
                Port::Plain => &mut s.plain,
                Port::Tls => &mut s.tls,
            };
            let old = std::mem::replace(slot, fresh);
            (old, s.waker.take())
        };
        // Dropping the old listener closes its socket now: its port refuses connections
        // from here on.
        drop(old);
        if let Some(w) = waker {
            w.wake();
        }
        Ok(())
    }
}

/// A listening socket on `bind`:`port` (the first of the name's addresses that can be
/// bound), with `SO_REUSEADDR` as redis-server and `TcpListener::bind` set it.
pub fn listen(bind: &str, port: u16) -> io::Result<TcpListener> {
    // Registering the socket needs the runtime's reactor.
    if tokio::runtime::Handle::try_current().is_err() {
        return Err(io::Error::other("no runtime to register the listener with"));
    }
    let mut last = None;
    for addr in (bind, port).to_socket_addrs()? {
        let socket = match addr {
            SocketAddr::V4(_) => TcpSocket::new_v4()?,
            SocketAddr::V6(_) => TcpSocket::new_v6()?,
        };
        socket.set_reuseaddr(true)?;
        match socket.bind(addr).and_then(|()| socket.listen(BACKLOG)) {
            Ok(l) => return Ok(l),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{bind} resolves to no address"),
        )
    }))
}
