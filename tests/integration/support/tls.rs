//! TLS for the tests: a certificate authority of the test's own ([`TestCa`]) that signs server
//! certificates with chosen names and validity (valid, expired, for another host), and a TLS
//! front ([`TlsFront`]) that terminates https:// in front of a plain-HTTP server of this
//! process (the in-process S3 server), as a company's MinIO or COS endpoint would present it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

/// A certificate authority made for one test.
pub struct TestCa {
    cert: rcgen::Certificate,
    key: KeyPair,
}

/// A server certificate and its key, in PEM.
pub struct ServerCert {
    pub cert_pem: String,
    pub key_pem: String,
}

/// When a certificate is valid.
#[derive(Clone, Copy)]
pub enum Validity {
    /// From a year ago to a year from now.
    Current,
    /// 2020 only.
    Expired,
}

impl TestCa {
    pub fn new(name: &str) -> TestCa {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(
            DnType::CommonName,
            format!("outbox-archiver test CA {name}"),
        );
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let cert = params.self_signed(&key).unwrap();
        TestCa { cert, key }
    }

    pub fn pem(&self) -> String {
        self.cert.pem()
    }

    /// Writes the CA's certificate to `dir/name` and returns the path.
    pub fn write(&self, dir: &Path, name: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, self.pem()).unwrap();
        path
    }

    /// A server certificate for `names` (host names and IP addresses, as subject alternative
    /// names), signed by this CA.
    pub fn issue(&self, names: &[&str], validity: Validity) -> ServerCert {
        let key = KeyPair::generate().unwrap();
        let mut params =
            CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
                .unwrap();
        params.distinguished_name.push(
            DnType::CommonName,
            names.first().copied().unwrap_or("server"),
        );
        let year = chrono::Datelike::year(&chrono::Utc::now());
        (params.not_before, params.not_after) = match validity {
            Validity::Current => (
                rcgen::date_time_ymd(year - 1, 1, 1),
                rcgen::date_time_ymd(year + 1, 12, 31),
            ),
            Validity::Expired => (
                rcgen::date_time_ymd(2020, 1, 1),
                rcgen::date_time_ymd(2020, 12, 31),
            ),
        };
        let cert = params.signed_by(&key, &self.cert, &self.key).unwrap();
        ServerCert {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        }
    }
}

impl ServerCert {
    /// Writes `server-cert.pem` and `server-key.pem` into `dir`.
    pub fn write(&self, dir: &Path) {
        std::fs::write(dir.join("server-cert.pem"), &self.cert_pem).unwrap();
        std::fs::write(dir.join("server-key.pem"), &self.key_pem).unwrap();
    }
}

/// https:// on 127.0.0.1 in front of a plain-HTTP server: each connection's TLS is terminated
/// here and its bytes relayed. Dropping it stops accepting.
pub struct TlsFront {
    pub port: u16,
    stop: CancellationToken,
}

impl Drop for TlsFront {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl TlsFront {
    /// Serves `cert` on a free port, relaying to `upstream` (`host:port`).
    pub async fn start(upstream: &str, cert: &ServerCert) -> TlsFront {
        use rustls::pki_types::pem::PemObject;
        let chain = rustls::pki_types::CertificateDer::pem_slice_iter(cert.cert_pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .unwrap();
        let key =
            rustls::pki_types::PrivateKeyDer::from_pem_slice(cert.key_pem.as_bytes()).unwrap();
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::aws_lc_rs::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let stop = CancellationToken::new();
        let stopped = stop.clone();
        let upstream = upstream.to_string();
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    _ = stopped.cancelled() => break,
                    accepted = listener.accept() => accepted,
                };
                let Ok((stream, _)) = accepted else { continue };
                let (acceptor, upstream) = (acceptor.clone(), upstream.clone());
                tokio::spawn(async move {
                    // A client that does not trust the certificate ends the handshake here.
                    let Ok(mut tls) = acceptor.accept(stream).await else {
                        return;
                    };
                    let Ok(mut plain) = TcpStream::connect(&upstream).await else {
                        return;
                    };
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
                });
            }
        });
        TlsFront { port, stop }
    }
}
