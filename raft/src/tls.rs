//! TLS with rustls (ring provider; no OpenSSL): reading PEM certificates and keys, building
//! the server and client configurations, and [`ClusterTls`], the mutual TLS of the cluster
//! link, which a reload swaps without touching established connections.
//!
//! The server crate builds its client-port TLS from the same functions ([`server_config`]),
//! so a certificate file is read and checked one way everywhere.
//!
//! The cluster link verifies every peer's certificate chain against the CA and requires a
//! client certificate from every node that connects; it does not compare the certificate's
//! names with the address dialled (as Redis's cluster bus does not): a node is admitted by
//! its CA, so the CA given to the cluster must sign node certificates only (or the cluster
//! secret, still checked inside the TLS session, keeps other holders out; see `transport.rs`).

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, ServerConfig,
    SignatureScheme, SupportedCipherSuite, SupportedProtocolVersion,
};

/// The files a TLS endpoint needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// This endpoint's certificate chain (PEM), leaf first.
    pub cert: PathBuf,
    /// Its private key (PEM: PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// The CA certificates (PEM) that peers' certificates must chain to.
    pub ca: Option<PathBuf>,
    /// The certificate chain and key this endpoint presents when it connects to a peer
    /// (Redis's `tls-client-cert-file` / `tls-client-key-file`); `cert`/`key` when `None`.
    pub client: Option<(PathBuf, PathBuf)>,
}

/// The protocol choices of a TLS endpoint (`tls-protocols`, `tls-ciphers`,
/// `tls-ciphersuites`, `tls-prefer-server-ciphers`).
#[derive(Debug, Clone)]
pub struct TlsOptions {
    /// The protocol versions offered.
    pub versions: Vec<&'static SupportedProtocolVersion>,
    /// The cipher suites offered, in the server's order of preference.
    pub suites: Vec<SupportedCipherSuite>,
    /// Whether a server picks the suite by its own order rather than the client's.
    pub prefer_server_order: bool,
    /// The server's cache of sessions clients may resume.
    pub session_cache: SessionCache,
}

impl Default for TlsOptions {
    fn default() -> Self {
        TlsOptions {
            versions: all_versions(),
            suites: rustls::crypto::ring::DEFAULT_CIPHER_SUITES.to_vec(),
            prefer_server_order: false,
            session_cache: SessionCache::default(),
        }
    }
}

/// Redis's `tls-session-caching`, `tls-session-cache-size` and
/// `tls-session-cache-timeout`: whether a server keeps sessions that clients may resume
/// (an abbreviated handshake: TLS 1.2 session ids, TLS 1.3 tickets that name a cached
/// session), how many, and for how many seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionCache {
    /// `tls-session-caching`.
    pub enabled: bool,
    /// `tls-session-cache-size` (sessions; at least 1).
    pub size: usize,
    /// `tls-session-cache-timeout` (seconds).
    pub timeout_secs: u64,
}

impl Default for SessionCache {
    /// Redis's defaults: on, 20480 sessions, 300 seconds.
    fn default() -> Self {
        SessionCache {
            enabled: true,
            size: 20480,
            timeout_secs: 300,
        }
    }
}

/// rustls's in-memory session cache (`ServerSessionMemoryCache`: a fixed number of
/// sessions, the oldest dropped first) with Redis's timeout on top: each stored session
/// carries the second it was stored, and one older than the timeout is not resumed.
#[derive(Debug)]
struct TimedSessions {
    inner: Arc<dyn rustls::server::StoresServerSessions>,
    timeout_secs: u64,
}

impl TimedSessions {
    fn now() -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
    }

    fn fresh(&self, stored: Vec<u8>) -> Option<Vec<u8>> {
        let at = u64::from_be_bytes(stored.get(..8)?.try_into().ok()?);
        (Self::now().saturating_sub(at) < self.timeout_secs).then(|| stored[8..].to_vec())
    }
}

impl rustls::server::StoresServerSessions for TimedSessions {
    fn put(&self, key: Vec<u8>, value: Vec<u8>) -> bool {
        let mut stored = Self::now().to_be_bytes().to_vec();
        stored.extend_from_slice(&value);
        self.inner.put(key, stored)
    }

    fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.fresh(self.inner.get(key)?)
    }

    fn take(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.fresh(self.inner.take(key)?)
    }

    fn can_cache(&self) -> bool {
        true
    }
}

/// Give `config` the session cache `cache` describes (off: no session is kept and no
/// TLS 1.3 ticket is sent, so every connection makes a full handshake).
fn set_session_cache(config: &mut ServerConfig, cache: SessionCache) {
    if cache.enabled && cache.size > 0 && cache.timeout_secs > 0 {
        config.session_storage = Arc::new(TimedSessions {
            inner: rustls::server::ServerSessionMemoryCache::new(cache.size),
            timeout_secs: cache.timeout_secs,
        });
    } else {
        config.session_storage = Arc::new(rustls::server::NoServerSessionStorage {});
        config.send_tls13_tickets = 0;
    }
}

/// The TLS 1.2 suites rustls implements with the ring provider, by OpenSSL's name and by
/// IANA's (either is accepted in `tls-ciphers`).
const TLS12_NAMES: [(&str, &str); 6] = [
    (
        "ECDHE-ECDSA-AES256-GCM-SHA384",
        "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
    ),
    (
        "ECDHE-ECDSA-AES128-GCM-SHA256",
        "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
    ),
    (
        "ECDHE-ECDSA-CHACHA20-POLY1305",
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
    ),
    (
        "ECDHE-RSA-AES256-GCM-SHA384",
        "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
    ),
    (
        "ECDHE-RSA-AES128-GCM-SHA256",
        "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
    ),
    (
        "ECDHE-RSA-CHACHA20-POLY1305",
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
    ),
];

/// The cipher suites named by `tls12` (`tls-ciphers`: a `:`-separated list of TLS 1.2 suite
/// names, OpenSSL's or IANA's) and `tls13` (`tls-ciphersuites`: IANA names of TLS 1.3
/// suites), in the order given; an empty list keeps every suite of its version. OpenSSL's
/// cipher-list keywords (`HIGH`, `!aNULL`, ...) are refused rather than half understood.
pub fn cipher_suites(tls12: &str, tls13: &str) -> Result<Vec<SupportedCipherSuite>, String> {
    let all = rustls::crypto::ring::ALL_CIPHER_SUITES;
    // rustls spells TLS 1.3 suites `TLS13_...`; IANA (and OpenSSL, and Redis) `TLS_...`.
    let iana = |s: &SupportedCipherSuite| format!("{:?}", s.suite()).replacen("TLS13_", "TLS_", 1);
    let pick = |list: &str, tls13_list: bool| -> Result<Vec<SupportedCipherSuite>, String> {
        let of_version =
            |s: &SupportedCipherSuite| matches!(s, SupportedCipherSuite::Tls13(_)) == tls13_list;
        if list.trim().is_empty() {
            return Ok(all.iter().copied().filter(of_version).collect());
        }
        let mut out = Vec::new();
        for name in list.split(':').map(str::trim).filter(|n| !n.is_empty()) {
            let wanted = TLS12_NAMES
                .iter()
                .find(|(openssl, _)| openssl.eq_ignore_ascii_case(name))
                .map_or(name, |(_, iana)| iana);
            let found = all
                .iter()
                .copied()
                .filter(of_version)
                .find(|s| iana(s).eq_ignore_ascii_case(wanted));
            match found {
                Some(s)
                    if !out
                        .iter()
                        .any(|o: &SupportedCipherSuite| o.suite() == s.suite()) =>
                {
                    out.push(s)
                }
                Some(_) => {}
                None => {
                    let known: Vec<String> =
                        all.iter().filter(|s| of_version(s)).map(iana).collect();
                    return Err(format!(
                        "{} names {name:?}, which is not a {} cipher suite Tollgate's TLS (rustls) implements; use names from: {}",
                        if tls13_list { "tls-ciphersuites" } else { "tls-ciphers" },
                        if tls13_list { "TLS 1.3" } else { "TLS 1.2" },
                        known.join(":")
                    ));
                }
            }
        }
        Ok(out)
    };
    let mut suites = pick(tls13, true)?;
    suites.extend(pick(tls12, false)?);
    Ok(suites)
}

/// Whether a server asks its clients for a certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    /// A certificate signed by the CA is required.
    Required,
    /// A certificate is accepted (and then must be signed by the CA) but not required.
    Optional,
    /// No certificate is asked for.
    None,
}

/// TLS 1.2 and 1.3 (rustls supports nothing older).
pub fn all_versions() -> Vec<&'static SupportedProtocolVersion> {
    vec![&rustls::version::TLS12, &rustls::version::TLS13]
}

/// The crypto provider every configuration uses, offering `suites`.
pub fn provider(suites: &[SupportedCipherSuite]) -> Arc<CryptoProvider> {
    Arc::new(CryptoProvider {
        cipher_suites: suites.to_vec(),
        ..rustls::crypto::ring::default_provider()
    })
}

/// The certificates in a PEM file (at least one).
pub fn load_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("cannot read certificates from {}: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!("no certificate in {}", path.display()));
    }
    Ok(certs)
}

/// The private key in a PEM file.
pub fn load_key(path: &Path) -> Result<PrivateKeyDer<'static>, String> {
    PrivateKeyDer::from_pem_file(path)
        .map_err(|e| format!("cannot read a private key from {}: {e}", path.display()))
}

/// The CA certificates in a PEM file, as trust anchors.
pub fn load_roots(path: &Path) -> Result<Arc<RootCertStore>, String> {
    let mut roots = RootCertStore::empty();
    for cert in load_certs(path)? {
        roots
            .add(cert)
            .map_err(|e| format!("bad CA certificate in {}: {e}", path.display()))?;
    }
    Ok(Arc::new(roots))
}

/// A server configuration: `files.cert`/`files.key`, and client certificates checked
/// against `files.ca` as `auth` says.
pub fn server_config(
    files: &TlsFiles,
    auth: ClientAuth,
    opts: &TlsOptions,
) -> Result<ServerConfig, String> {
    let provider = provider(&opts.suites);
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&opts.versions)
        .map_err(|e| format!("TLS protocols and cipher suites: {e}"))?;
    let verifier = match (auth, &files.ca) {
        (ClientAuth::None, _) => WebPkiClientVerifier::no_client_auth(),
        (_, None) => {
            return Err(
                "checking client certificates needs a CA certificate file (tls-ca-cert-file)"
                    .into(),
            )
        }
        (auth, Some(ca)) => {
            let mut b = WebPkiClientVerifier::builder_with_provider(load_roots(ca)?, provider);
            if auth == ClientAuth::Optional {
                b = b.allow_unauthenticated();
            }
            b.build().map_err(|e| format!("client verifier: {e}"))?
        }
    };
    let certs = load_certs(&files.cert)?;
    let key = load_key(&files.key)?;
    let mut config = builder
        .with_client_cert_verifier(verifier)
        .with_single_cert(certs, key)
        .map_err(|e| {
            format!(
                "certificate {} and key {} do not make a usable pair: {e}",
                files.cert.display(),
                files.key.display()
            )
        })?;
    config.ignore_client_order = opts.prefer_server_order;
    set_session_cache(&mut config, opts.session_cache);
    Ok(config)
}

/// The mutual TLS of the cluster link: both directions' configurations, replaced whole by
/// [`ClusterTls::reload`] (connections already made keep theirs).
#[derive(Debug)]
pub struct ClusterTls {
    configs: RwLock<(Arc<ServerConfig>, Arc<ClientConfig>)>,
}

impl ClusterTls {
    /// Read `files` (the CA is required) into configurations for both directions.
    pub fn load(files: &TlsFiles, opts: &TlsOptions) -> Result<ClusterTls, String> {
        Ok(ClusterTls {
            configs: RwLock::new(cluster_configs(files, opts)?),
        })
    }

    /// Read the files again; on an error the configurations in use stay.
    pub fn reload(&self, files: &TlsFiles, opts: &TlsOptions) -> Result<(), String> {
        let fresh = cluster_configs(files, opts)?;
        *self.configs.write().unwrap_or_else(|e| e.into_inner()) = fresh;
        Ok(())
    }

    /// For accepting a peer's connection.
    pub fn server(&self) -> Arc<ServerConfig> {
        self.configs
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .0
            .clone()
    }

    /// For connecting to a peer.
    pub fn client(&self) -> Arc<ClientConfig> {
        self.configs
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .1
            .clone()
    }
}

fn cluster_configs(
    files: &TlsFiles,
    opts: &TlsOptions,
) -> Result<(Arc<ServerConfig>, Arc<ClientConfig>), String> {
    let Some(ca) = &files.ca else {
        return Err("TLS on the cluster link needs a CA certificate file (tls-ca-cert-file) to verify the other nodes".into());
    };
    let server = server_config(files, ClientAuth::Required, opts)?;
    let provider = provider(&opts.suites);
    let inner = WebPkiServerVerifier::builder_with_provider(load_roots(ca)?, provider.clone())
        .build()
        .map_err(|e| format!("server verifier: {e}"))?;
    let (cert, key) = files
        .client
        .clone()
        .unwrap_or_else(|| (files.cert.clone(), files.key.clone()));
    let client = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&opts.versions)
        .map_err(|e| format!("TLS protocols and cipher suites: {e}"))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(SignedByCa(inner)))
        .with_client_auth_cert(load_certs(&cert)?, load_key(&key)?)
        .map_err(|e| {
            format!(
                "certificate {} and key {} do not make a usable pair: {e}",
                cert.display(),
                key.display()
            )
        })?;
    Ok((Arc::new(server), Arc::new(client)))
}

/// The name a peer at `addr` (`host:port`) is dialled under (its certificate's names are
/// not compared with it; see the module comment).
pub fn server_name(addr: &str) -> ServerName<'static> {
    let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(host.to_string())
        .unwrap_or_else(|_| ServerName::try_from("tollgate-node").expect("a valid DNS name"))
}

/// Accepts a server certificate whose chain verifies against the CA, whatever names it
/// carries (the full check otherwise: signatures, validity dates, key usage).
#[derive(Debug)]
struct SignedByCa(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for SignedByCa {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        // rustls checks the chain first and the name last, so a name error means the chain
        // verified.
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}
