//! Test certificates made at test time with rcgen (no private key is committed): a CA, and
//! certificates it signs for a server or a client (valid for `localhost` and `127.0.0.1`,
//! usable both ways), written as PEM files into a directory the test owns.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, Certificate, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};

/// A certificate authority.
pub struct Ca {
    cert: Certificate,
    key: KeyPair,
    /// Where its certificate is written.
    pub pem: PathBuf,
}

/// A certificate and its key, as files.
#[derive(Clone)]
pub struct Issued {
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl Ca {
    /// A new CA named `name`, its certificate written to `dir/<name>.pem`.
    pub fn new(dir: &Path, name: &str) -> Ca {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let cert = params.self_signed(&key).unwrap();
        let pem = dir.join(format!("{name}.pem"));
        std::fs::write(&pem, cert.pem()).unwrap();
        Ca { cert, key, pem }
    }

    /// A certificate for `name` (server and client use), written to `dir/<name>.crt` and
    /// `dir/<name>.key`.
    pub fn issue(&self, dir: &Path, name: &str) -> Issued {
        self.issue_for(dir, name, KeyPair::generate().unwrap())
    }

    /// [`Ca::issue`] for a key made elsewhere (e.g. by the openssl CLI).
    pub fn issue_for(&self, dir: &Path, name: &str, key: KeyPair) -> Issued {
        let mut params =
            CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
        params.distinguished_name.push(DnType::CommonName, name);
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let cert = params.signed_by(&key, &self.cert, &self.key).unwrap();
        let issued = Issued {
            cert: dir.join(format!("{name}.crt")),
            key: dir.join(format!("{name}.key")),
        };
        std::fs::write(&issued.cert, cert.pem()).unwrap();
        std::fs::write(&issued.key, key.serialize_pem()).unwrap();
        issued
    }
}

/// A path as a command-line argument.
pub fn arg(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}
