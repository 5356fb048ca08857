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
use rustls::server::{StoresServerSessions, WebPkiClientVerifier};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, ServerConfig,
    SignatureScheme, SupportedCipherSuite, SupportedProtocolVersion,
};

/// The files a TLS endpoint needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// This endpoint's certificate chain (PEM), leaf first.
    pub cert: PathBuf,
    /// Its private key (PEM: PKCS#8, PKCS#1 or SEC1, or encrypted PKCS#8).
    pub key: PathBuf,
    /// The passphrase of an encrypted `key` (`tls-key-file-pass`).
    pub key_pass: Option<KeyPass>,
    /// The CA certificates (PEM) that peers' certificates must chain to.
    pub ca: Option<PathBuf>,
    /// The certificate chain and key this endpoint presents when it connects to a peer
    /// (Redis's `tls-client-cert-file` / `tls-client-key-file`, and the key's
    /// `tls-client-key-file-pass`); `cert`/`key`/`key_pass` when `None`.
    pub client: Option<(PathBuf, PathBuf, Option<KeyPass>)>,
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
    inner: Arc<dyn StoresServerSessions>,
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

impl StoresServerSessions for TimedSessions {
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

/// The longest ticket lifetime a TLS 1.3 server may advertise (RFC 8446, 4.6.1: seven days).
pub const MAX_TICKET_LIFETIME_SECS: u32 = 7 * 24 * 60 * 60;

/// Session tickets that name a session in [`TimedSessions`] (the cache is the state; the
/// ticket is a random 32-byte id, as rustls's own stateful tickets), so that the lifetime a
/// client is told is `tls-session-cache-timeout`, as Redis (OpenSSL) tells it. rustls
/// advertises a fixed 86,400 s for the tickets of its `session_storage` (a constant in
/// `server/tls13.rs`); the lifetime of a [`rustls::server::ProducesTickets`] is what it sends
/// instead (TLS 1.3 `ticket_lifetime`, TLS 1.2 RFC 5077 `ticket_lifetime_hint`).
/// A ticket can be offered again until the timeout (`get`, not `take`), as an OpenSSL ticket
/// can; rustls accepts no early data here, so a replayed ticket is only a resumed handshake.
#[derive(Debug)]
struct CachedTickets {
    sessions: Arc<TimedSessions>,
    random: &'static dyn rustls::crypto::SecureRandom,
    lifetime: u32,
}

impl rustls::server::ProducesTickets for CachedTickets {
    fn enabled(&self) -> bool {
        true
    }

    fn lifetime(&self) -> u32 {
        self.lifetime
    }

    fn encrypt(&self, plain: &[u8]) -> Option<Vec<u8>> {
        let mut id = vec![0; 32];
        self.random.fill(&mut id).ok()?;
        self.sessions.put(id.clone(), plain.to_vec()).then_some(id)
    }

    fn decrypt(&self, ticket: &[u8]) -> Option<Vec<u8>> {
        self.sessions.get(ticket)
    }
}

/// Give `config` the session cache `cache` describes (off: no session is kept and no
/// TLS 1.3 ticket is sent, so every connection makes a full handshake).
fn set_session_cache(config: &mut ServerConfig, cache: SessionCache) {
    if cache.enabled && cache.size > 0 && cache.timeout_secs > 0 {
        let sessions = Arc::new(TimedSessions {
            inner: rustls::server::ServerSessionMemoryCache::new(cache.size),
            timeout_secs: cache.timeout_secs,
        });
        config.session_storage = sessions.clone();
        config.ticketer = Arc::new(CachedTickets {
            sessions,
            random: config.crypto_provider().secure_random,
            lifetime: u32::try_from(cache.timeout_secs)
                .unwrap_or(u32::MAX)
                .min(MAX_TICKET_LIFETIME_SECS),
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

/// The private key in a PEM file: PKCS#8, PKCS#1 or SEC1, or an encrypted PKCS#8 key
/// (`ENCRYPTED PRIVATE KEY`, PBES2: what `openssl genpkey -aes-256-cbc` and
/// `openssl pkcs8 -topk8` write) decrypted with `pass` (Redis's `tls-key-file-pass`). A
/// pass given for an unencrypted key is not needed and not used, as with OpenSSL in Redis.
/// OpenSSL's legacy encrypted PEM (`Proc-Type: 4,ENCRYPTED`) is refused by name.
pub fn load_key(path: &Path, pass: Option<&KeyPass>) -> Result<PrivateKeyDer<'static>, String> {
    let text = std::fs::read(path)
        .map_err(|e| format!("cannot read a private key from {}: {e}", path.display()))?;
    if contains(&text, b"Proc-Type: 4,ENCRYPTED") {
        return Err(format!(
            "the private key in {} is encrypted in OpenSSL's legacy PEM format \
             (Proc-Type: 4,ENCRYPTED), which Tollgate does not read; convert it to an \
             encrypted PKCS#8 key (openssl pkcs8 -topk8 -v2 aes-256-cbc -in old.pem -out \
             key.pem) or to an unencrypted one (openssl pkey -in old.pem -out key.pem)",
            path.display()
        ));
    }
    match pem_block(&text, "ENCRYPTED PRIVATE KEY") {
        Some(block) => decrypt_key(path, block, pass),
        None => PrivateKeyDer::from_pem_slice(&text)
            .map_err(|e| format!("cannot read a private key from {}: {e}", path.display())),
    }
}

/// The passphrase of an encrypted private key; its `Debug` does not show it.
#[derive(Clone, PartialEq, Eq)]
pub struct KeyPass(pub String);

impl std::fmt::Debug for KeyPass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KeyPass(..)")
    }
}

/// What an encrypted key must be, for errors about one that is not.
const PBES2: &str = "Tollgate reads PBES2 keys (PBKDF2 or scrypt with AES-CBC, as openssl \
     genpkey -aes-256-cbc and openssl pkcs8 -topk8 -v2 aes-256-cbc write)";

fn decrypt_key(
    path: &Path,
    block: &str,
    pass: Option<&KeyPass>,
) -> Result<PrivateKeyDer<'static>, String> {
    use pkcs8::der::Document;
    let Some(pass) = pass else {
        return Err(format!(
            "the private key in {} is encrypted: give its passphrase in tls-key-file-pass \
             (tls-client-key-file-pass for tls-client-key-file)",
            path.display()
        ));
    };
    let bad = |e: &dyn std::fmt::Display| {
        format!(
            "cannot read the encrypted private key in {} ({e}): {PBES2}",
            path.display()
        )
    };
    let (_, doc) = Document::from_pem(block).map_err(|e| bad(&e))?;
    let info = pkcs8::EncryptedPrivateKeyInfo::try_from(doc.as_bytes()).map_err(|e| bad(&e))?;
    // An algorithm pkcs5 does not implement is named; any other failure is the padding or
    // the structure of what a wrong passphrase decrypts to (pkcs5 0.7 reports a bad padding
    // as `EncryptFailed`).
    let plain = info.decrypt(pass.0.as_bytes()).map_err(|e| {
        use pkcs8::pkcs5::Error as Pkcs5;
        match e {
            pkcs8::Error::EncryptedPrivateKey(
                e @ (Pkcs5::UnsupportedAlgorithm { .. }
                | Pkcs5::AlgorithmParametersInvalid { .. }
                | Pkcs5::NoPbes1CryptSupport),
            ) => format!(
                "cannot decrypt the private key in {} ({e}): {PBES2}",
                path.display()
            ),
            _ => format!(
                "cannot decrypt the private key in {}: wrong passphrase",
                path.display()
            ),
        }
    })?;
    Ok(PrivateKeyDer::Pkcs8(plain.as_bytes().to_vec().into()))
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// The PEM block labelled `label` in `text`, from its BEGIN line to its END line.
fn pem_block<'a>(text: &'a [u8], label: &str) -> Option<&'a str> {
    let text = std::str::from_utf8(text).ok()?;
    let begin = format!("-----BEGIN {label}-----");
    let end = format!("-----END {label}-----");
    let start = text.find(&begin)?;
    let stop = start + text[start..].find(&end)? + end.len();
    Some(&text[start..stop])
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
    let key = load_key(&files.key, files.key_pass.as_ref())?;
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
    let (cert, key, pass) = files.client.clone().unwrap_or_else(|| {
        (
            files.cert.clone(),
            files.key.clone(),
            files.key_pass.clone(),
        )
    });
    let client = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&opts.versions)
        .map_err(|e| format!("TLS protocols and cipher suites: {e}"))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(SignedByCa(inner)))
        .with_client_auth_cert(load_certs(&cert)?, load_key(&key, pass.as_ref())?)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A CA-signed certificate and its key, the key also encrypted by the openssl CLI
    /// (`openssl pkcs8 -topk8 -v2 aes-256-cbc`) with `pass`: (ca, cert, plain key,
    /// encrypted key).
    fn files(dir: &Path, pass: &str) -> (PathBuf, PathBuf, PathBuf, PathBuf) {
        use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
        let ca_key = KeyPair::generate().unwrap();
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = ca_params.self_signed(&ca_key).unwrap();
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(vec!["127.0.0.1".to_string()])
            .unwrap()
            .signed_by(&key, &ca, &ca_key)
            .unwrap();
        let paths = (
            dir.join("ca.pem"),
            dir.join("node.crt"),
            dir.join("node.key"),
            dir.join("node.enc.key"),
        );
        std::fs::write(&paths.0, ca.pem()).unwrap();
        std::fs::write(&paths.1, cert.pem()).unwrap();
        std::fs::write(&paths.2, key.serialize_pem()).unwrap();
        let out = std::process::Command::new("openssl")
            .args(["pkcs8", "-topk8", "-v2", "aes-256-cbc", "-in"])
            .arg(&paths.2)
            .arg("-out")
            .arg(&paths.3)
            .args(["-passout", &format!("pass:{pass}")])
            .output()
            .expect("openssl");
        assert!(out.status.success(), "{out:?}");
        paths
    }

    #[test]
    fn encrypted_pkcs8_keys_need_their_passphrase() {
        let dir = tempfile::tempdir().unwrap();
        let (_, _, plain, enc) = files(dir.path(), "pw");
        let pass = |p: &str| Some(KeyPass(p.to_string()));
        let e = load_key(&enc, None).unwrap_err();
        assert!(e.contains("is encrypted: give its passphrase"), "{e}");
        let e = load_key(&enc, pass("wrong").as_ref()).unwrap_err();
        assert!(e.ends_with("wrong passphrase"), "{e}");
        let key = load_key(&enc, pass("pw").as_ref()).unwrap();
        assert_eq!(key, load_key(&plain, None).unwrap());
        // A passphrase for a key that is not encrypted is not needed (as with OpenSSL).
        assert_eq!(load_key(&plain, pass("pw").as_ref()).unwrap(), key);
        assert_eq!(format!("{:?}", pass("pw").unwrap()), "KeyPass(..)");
    }

    /// The cluster link's client key (`tls-client-key-file`) is read with its own
    /// passphrase (`tls-client-key-file-pass`), the server key with `tls-key-file-pass`.
    #[test]
    fn the_cluster_client_key_has_its_own_passphrase() {
        let dir = tempfile::tempdir().unwrap();
        let (ca, cert, plain, enc) = files(dir.path(), "client pw");
        let tls = |client_pass: Option<&str>| TlsFiles {
            cert: cert.clone(),
            key: plain.clone(),
            key_pass: None,
            ca: Some(ca.clone()),
            client: Some((
                cert.clone(),
                enc.clone(),
                client_pass.map(|p| KeyPass(p.to_string())),
            )),
        };
        let opts = TlsOptions::default();
        let e = ClusterTls::load(&tls(None), &opts).unwrap_err();
        assert!(e.contains("is encrypted"), "{e}");
        let e = ClusterTls::load(&tls(Some("pw")), &opts).unwrap_err();
        assert!(e.contains("wrong passphrase"), "{e}");
        ClusterTls::load(&tls(Some("client pw")), &opts).unwrap();
        // The server key's passphrase is `key_pass`.
        let mut f = tls(Some("client pw"));
        f.key = enc.clone();
        assert!(ClusterTls::load(&f, &opts).is_err());
        f.key_pass = Some(KeyPass("client pw".into()));
        ClusterTls::load(&f, &opts).unwrap();
    }
}
