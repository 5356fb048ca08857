//! TLS on the client port (`tls-port`) and the reload of every TLS certificate (client port
//! and cluster link) on `CONFIG SET tls-*` and on SIGHUP.
//!
//! rustls through tokio-rustls, with the ring provider (no OpenSSL); the PEM files are read
//! by `tollgate_raft::tls`, which the cluster link shares. A reload builds a new rustls
//! configuration and swaps it in: handshakes from then on use it, and connections already
//! made keep the session they have (nothing is dropped). A reload that fails (a missing
//! file, a key that does not match the certificate) changes nothing and says why.
//!
//! A TLS connection is served by the same code as a plaintext one
//! (`connection::serve` is generic over the stream); the handshake and the stream's reads
//! are here. A client that does not complete the handshake within [`HANDSHAKE_TIMEOUT`] is
//! dropped, so a half-open TLS connection cannot hold a `maxclients` slot for long.
//!
//! Reads (issue 17, counted with `bench/tls_counts.sh`): rustls asks its socket for 4 KiB
//! at a time while a record is incomplete, so a request of more than 4 KiB (a pipeline, a
//! large value) took a `recvfrom` per 4 KiB: 10 per `-P 32` pipeline of 1,000-byte SETs,
//! where Redis makes 7 (OpenSSL reads a record's header, then its body). [`ReadAhead`] reads
//! the socket [`READ_AHEAD`] bytes (a whole record) at a time once a read has filled what
//! rustls asked for (more is waiting), and hands rustls the pieces it asks for; reads that
//! find less go straight into rustls's buffer, so small requests are read as without this
//! layer (no copy).
//! It sits under tokio-rustls, which keeps all the TLS work. Records that arrive together
//! (a multiplexing client's commands, one record each) are already answered with one
//! write: a tokio-rustls read takes every record that is decrypted or can be read without
//! waiting, as far as the caller's buffer goes.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use bytes::{Buf, BytesMut};
use parking_lot::RwLock;
use rustls::SupportedProtocolVersion;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;
use tollgate_raft::tls::{ClientAuth, ClusterTls, KeyPass, TlsFiles, TlsOptions};

use super::Shared;
use crate::config::{Config, TlsConfig};

/// How long a client has to complete the TLS handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The error CONFIG SET answers when new TLS settings cannot be used (Redis's text; the
/// reason goes to the log, as in Redis).
pub const RELOAD_FAILED: &str = "Unable to update TLS configuration. Check server logs.";

/// The client port's TLS configuration, replaced whole by a reload.
pub struct ClientTls {
    acceptor: RwLock<TlsAcceptor>,
}

impl ClientTls {
    /// Read the files of `c`.
    pub fn load(c: &TlsConfig) -> Result<ClientTls, String> {
        Ok(ClientTls {
            acceptor: RwLock::new(acceptor(c)?),
        })
    }

    /// Read the files again; on an error the configuration in use stays.
    pub fn reload(&self, c: &TlsConfig) -> Result<(), String> {
        let fresh = acceptor(c)?;
        *self.acceptor.write() = fresh;
        Ok(())
    }

    /// The configuration for the next handshake.
    pub fn acceptor(&self) -> TlsAcceptor {
        self.acceptor.read().clone()
    }
}

fn acceptor(c: &TlsConfig) -> Result<TlsAcceptor, String> {
    let config = tollgate_raft::tls::server_config(&files(c)?, c.auth_clients, &options(c)?)?;
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// The protocol choices of `c`: versions, cipher suites and whose order picks the suite.
pub fn options(c: &TlsConfig) -> Result<TlsOptions, String> {
    Ok(TlsOptions {
        versions: versions(&c.protocols),
        suites: tollgate_raft::tls::cipher_suites(&c.ciphers, &c.ciphersuites)?,
        prefer_server_order: c.prefer_server_ciphers,
        session_cache: tollgate_raft::tls::SessionCache {
            enabled: c.session_caching,
            size: c.session_cache_size,
            timeout_secs: c.session_cache_timeout,
        },
    })
}

/// `tls-ciphers` checked: TLS 1.2 suite names rustls implements (OpenSSL's or IANA's).
pub fn check_ciphers(v: &str) -> Result<String, String> {
    tollgate_raft::tls::cipher_suites(v, "").map(|_| v.to_string())
}

/// `tls-ciphersuites` checked: TLS 1.3 suite names rustls implements.
pub fn check_ciphersuites(v: &str) -> Result<String, String> {
    tollgate_raft::tls::cipher_suites("", v).map(|_| v.to_string())
}

/// The certificate, key and CA files of `c` (certificate and key are required).
pub fn files(c: &TlsConfig) -> Result<TlsFiles, String> {
    if c.cert_file.is_empty() || c.key_file.is_empty() {
        return Err(
            "TLS needs a certificate and its key: set tls-cert-file and tls-key-file".into(),
        );
    }
    let ca = (!c.ca_cert_file.is_empty()).then(|| PathBuf::from(&c.ca_cert_file));
    if ca.is_none() && c.auth_clients != ClientAuth::None && c.port != 0 {
        return Err("tls-auth-clients yes or optional checks client certificates against a CA: set tls-ca-cert-file (or tls-auth-clients no)".into());
    }
    let pass = |p: &str| (!p.is_empty()).then(|| KeyPass(p.to_string()));
    let client = match (c.client_cert_file.is_empty(), c.client_key_file.is_empty()) {
        (true, true) => None,
        (false, false) => Some((
            PathBuf::from(&c.client_cert_file),
            PathBuf::from(&c.client_key_file),
            pass(&c.client_key_file_pass),
        )),
        _ => {
            return Err(
                "tls-client-cert-file and tls-client-key-file go together: set both or neither"
                    .into(),
            )
        }
    };
    Ok(TlsFiles {
        cert: PathBuf::from(&c.cert_file),
        key: PathBuf::from(&c.key_file),
        key_pass: pass(&c.key_file_pass),
        ca,
        client,
    })
}

/// `tls-protocols` checked: any of `TLSv1.2`, `TLSv1.3` (any case, separated by spaces);
/// "" means both.
pub fn check_protocols(v: &str) -> Result<String, String> {
    for word in v.split(' ').filter(|w| !w.is_empty()) {
        match word.to_ascii_lowercase().as_str() {
            "tlsv1.2" | "tlsv1.3" => {}
            "tlsv1" | "tlsv1.1" => {
                return Err(format!(
                    "{word} is not supported: Tollgate's TLS (rustls) implements TLSv1.2 and TLSv1.3 only"
                ))
            }
            _ => {
                return Err(
                    "Invalid tls-protocols specified. Use a combination of 'TLSv1.2' and 'TLSv1.3'."
                        .into(),
                )
            }
        }
    }
    Ok(v.to_string())
}

/// The versions a checked `tls-protocols` names.
pub fn versions(protocols: &str) -> Vec<&'static SupportedProtocolVersion> {
    let words: Vec<String> = protocols
        .split(' ')
        .filter(|w| !w.is_empty())
        .map(str::to_ascii_lowercase)
        .collect();
    if words.is_empty() {
        return tollgate_raft::tls::all_versions();
    }
    let mut v = Vec::new();
    if words.iter().any(|w| w == "tlsv1.2") {
        v.push(&rustls::version::TLS12);
    }
    if words.iter().any(|w| w == "tlsv1.3") {
        v.push(&rustls::version::TLS13);
    }
    v
}

/// The cluster link's TLS files (the same settings as the client port's; the CA is
/// required: every peer is verified against it).
pub fn cluster_files(c: &TlsConfig) -> Result<TlsFiles, String> {
    let mut f = files(c)?;
    if f.ca.is_none() {
        if c.ca_cert_file.is_empty() {
            return Err("tls-cluster yes needs tls-ca-cert-file: every node's certificate is verified against that CA".into());
        }
        f.ca = Some(PathBuf::from(&c.ca_cert_file));
    }
    Ok(f)
}

/// The cluster link's TLS for a configuration with `tls-cluster yes`.
pub fn cluster_tls(c: &TlsConfig) -> Result<Option<Arc<ClusterTls>>, String> {
    if !c.cluster {
        return Ok(None);
    }
    Ok(Some(Arc::new(ClusterTls::load(
        &cluster_files(c)?,
        &options(c)?,
    )?)))
}

/// Read every TLS certificate in use again (CONFIG SET of a `tls-*` setting, SIGHUP).
pub fn reload(shared: &Shared, config: &Config) -> Result<(), String> {
    if let Some(client) = shared.tls.get() {
        client.reload(&config.tls)?;
    }
    if let Some(cluster) = &shared.cluster_tls {
        cluster.reload(&cluster_files(&config.tls)?, &options(&config.tls)?)?;
    }
    Ok(())
}

/// Apply a CONFIG SET of the TLS settings (`Apply::Tls`): refused, with Redis's text, when
/// the new files cannot be used.
pub fn apply(shared: &Shared, new: &Config) -> Result<(), String> {
    reload(shared, new).map_err(|why| {
        tracing::warn!("Failed to configure TLS: {why}");
        RELOAD_FAILED.to_string()
    })
}

/// Complete the TLS handshake of an accepted client, then serve it.
pub async fn serve(shared: Arc<Shared>, socket: TcpStream, peer: SocketAddr) {
    let Some(tls) = shared.tls.get() else {
        return;
    };
    let _ = socket.set_nodelay(true);
    let laddr = socket.local_addr().unwrap_or(shared.addr);
    let fd = std::os::fd::AsRawFd::as_raw_fd(&socket);
    let accept = tls.acceptor().accept(ReadAhead::new(socket));
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, accept).await {
        Ok(Ok(stream)) => super::connection::serve(shared, stream, peer, laddr, fd).await,
        Ok(Err(e)) => tracing::debug!(%peer, error = %e, "TLS handshake failed"),
        Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
    }
}

/// Bytes [`ReadAhead`] asks the socket for at a time: a whole TLS record (16 KiB of
/// plaintext, the content type, the AEAD tag and the 5-byte header; TLS 1.2's explicit
/// nonce) fits.
pub const READ_AHEAD: usize = 16 * 1024 + 1024;

/// A TLS client's socket, read [`READ_AHEAD`] bytes at a time and handed to rustls in the
/// pieces it asks for. The buffer is allocated at the first read and never zeroed, so a
/// connection that only sends small requests touches one page of it.
pub struct ReadAhead {
    io: TcpStream,
    buf: BytesMut,
    /// Whether the last read from the socket filled what was asked: more is likely waiting,
    /// so the next read takes [`READ_AHEAD`] bytes. Otherwise rustls's buffer is read into
    /// directly (a small request: no copy, as without this layer).
    ahead: bool,
}

impl ReadAhead {
    pub fn new(io: TcpStream) -> ReadAhead {
        ReadAhead {
            io,
            buf: BytesMut::new(),
            ahead: false,
        }
    }
}

impl AsyncRead for ReadAhead {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.buf.is_empty() {
            if !this.ahead || out.remaining() >= READ_AHEAD {
                let asked = out.remaining();
                let before = out.filled().len();
                ready!(Pin::new(&mut this.io).poll_read(cx, out))?;
                this.ahead = asked > 0 && out.filled().len() - before == asked;
                return Poll::Ready(Ok(()));
            }
            // Empty: this takes the buffer back from its start (no allocation after the
            // first read).
            this.buf.reserve(READ_AHEAD);
            let n = ready!(std::pin::pin!(this.io.read_buf(&mut this.buf)).poll(cx))?;
            // A read that found less than a few KiB waiting ends the read-ahead: small
            // requests go straight into rustls's buffer again.
            this.ahead = n >= 4096;
        }
        let n = out.remaining().min(this.buf.len());
        out.put_slice(&this.buf[..n]);
        this.buf.advance(n);
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for ReadAhead {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}
