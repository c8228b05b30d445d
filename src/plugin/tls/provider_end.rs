//! The provider's end of go-plugin's AutoMTLS, as a go-plugin server does it: a certificate of
//! its own (made as Nivis's client certificate is, [`super::cert`]), TLS required of every
//! connection, the client's certificate pinned to exactly the one the client passed in
//! `PLUGIN_CLIENT_CERT`, and the handshake line's certificate field. Each TLS connection is
//! carried to a new plaintext connection to the provider's own gRPC server (built without TLS).
//!
//! Used by the fake providers (`fakes/`), so that Terraform and Nivis reach them as they reach
//! a real provider; Nivis's runs use the client side only. Not: the client side (`super`), the
//! gRPC server, the process's lifetime.

use std::io;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::Arc;

use base64::Engine;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::{ServerConfig, ServerConnection};

use super::cert::PluginCert;
use super::{Pinned, TlsError, HANDSHAKE_TIMEOUT};

/// A provider's TLS identity and what it accepts: see the module documentation.
pub struct AutoMtlsServer {
    config: Arc<ServerConfig>,
    cert_der: Vec<u8>,
}

impl AutoMtlsServer {
    /// A fresh certificate, and a configuration that accepts only the client that presents
    /// the certificate in `client_pem` (the PEM of `PLUGIN_CLIENT_CERT`).
    pub fn new(client_pem: &str) -> Result<AutoMtlsServer, TlsError> {
        let client = CertificateDer::from_pem_slice(client_pem.as_bytes()).map_err(|e| {
            TlsError::Config(format!("PLUGIN_CLIENT_CERT is not a PEM certificate: {e}"))
        })?;
        let ours = PluginCert::generate().map_err(|e| TlsError::Config(e.to_string()))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier = Arc::new(Pinned::new(client.to_vec(), &provider));
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(ours.key_pkcs8.clone()));
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Config(e.to_string()))?
            .with_client_cert_verifier(verifier)
            .with_single_cert(vec![CertificateDer::from(ours.cert_der.clone())], key)
            .map_err(|e| TlsError::Config(e.to_string()))?;
        config.alpn_protocols = vec![b"h2".to_vec()];
        Ok(AutoMtlsServer {
            config: Arc::new(config),
            cert_der: ours.cert_der,
        })
    }

    /// The handshake line's sixth field: the certificate's DER in standard base64 without
    /// padding (go-plugin's `RawStdEncoding`).
    pub fn handshake_cert(&self) -> String {
        base64::engine::general_purpose::STANDARD_NO_PAD.encode(&self.cert_der)
    }

    /// Accepts connections on `listener` until the process ends: each, once its TLS handshake
    /// succeeds, is carried to a new plaintext connection to the gRPC server at `backend`. A
    /// connection that fails the handshake (no certificate, another one, not TLS) is closed.
    pub fn serve(self, listener: UnixListener, backend: PathBuf) {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let config = Arc::clone(&self.config);
            let backend = backend.clone();
            let spawned = std::thread::Builder::new()
                .name("mtls-conn".into())
                .spawn(move || {
                    if let Err(e) = carry(stream, config, &backend) {
                        log::debug!(target: "provider", "a TLS connection ended: {e}");
                    }
                });
            if let Err(e) = spawned {
                log::debug!(target: "provider", "no thread for a TLS connection: {e}");
            }
        }
    }
}

/// Completes the TLS handshake on `stream`, then copies bytes between the session and a new
/// connection to `backend` until either side closes.
fn carry(
    mut stream: UnixStream,
    config: Arc<ServerConfig>,
    backend: &std::path::Path,
) -> io::Result<()> {
    let mut conn = ServerConnection::new(config).map_err(io::Error::other)?;
    stream.set_read_timeout(Some(HANDSHAKE_TIMEOUT))?;
    while conn.is_handshaking() {
        conn.complete_io(&mut stream)?;
    }
    stream.set_read_timeout(None)?;
    let plain = UnixStream::connect(backend)?;
    crate::plugin::bridge::pump(&plain, stream, conn.into())
}

#[cfg(test)]
mod tests {
    use std::io::{BufRead, Read, Write};
    use std::time::Duration;

    use rustls::Connection;

    use super::*;
    use crate::plugin::tls::TlsClient;

    /// Sends `line` through the session and reads the answer's first line.
    fn exchange(conn: &mut Connection, sock: &mut UnixStream, line: &[u8]) -> io::Result<Vec<u8>> {
        conn.writer().write_all(line)?;
        let mut got = Vec::new();
        let mut buf = [0u8; 64];
        while !got.ends_with(b"\n") {
            match conn.reader().read(&mut buf) {
                Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if conn.complete_io(sock)? == (0, 0) {
                        return Err(io::ErrorKind::UnexpectedEof.into());
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Ok(got)
    }

    #[test]
    fn a_client_with_the_pinned_certificate_gets_through_and_another_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (front, back) = (dir.path().join("front.sock"), dir.path().join("back.sock"));
        let ours = PluginCert::generate().unwrap();
        let server = AutoMtlsServer::new(&ours.pem()).unwrap();
        let pinned = base64::engine::general_purpose::STANDARD_NO_PAD
            .decode(server.handshake_cert())
            .unwrap();
        assert_eq!(pinned, server.cert_der, "the field is the DER, unpadded");
        let backend = UnixListener::bind(&back).unwrap();
        let listener = UnixListener::bind(&front).unwrap();
        std::thread::spawn(move || server.serve(listener, back));
        // The gRPC server's stand-in answers each connection's first line.
        std::thread::spawn(move || {
            for s in backend.incoming().flatten() {
                let mut line = String::new();
                if io::BufReader::new(&s).read_line(&mut line).is_ok() {
                    let _ = (&s).write_all(format!("echo {line}").as_bytes());
                }
            }
        });
        let client = TlsClient::new(&ours, pinned.clone()).unwrap();
        let (mut sock, conn) = client.connect(&front).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        let answer = exchange(&mut conn.into(), &mut sock, b"hello\n").unwrap();
        assert_eq!(answer, b"echo hello\n");
        // Another client certificate: no answer comes through.
        let stranger = PluginCert::generate().unwrap();
        let client = TlsClient::new(&stranger, pinned).unwrap();
        let refused = client.connect(&front).map(|(mut sock, conn)| {
            sock.set_read_timeout(Some(Duration::from_secs(20)))
                .unwrap();
            exchange(&mut conn.into(), &mut sock, b"hello\n")
        });
        assert!(
            !matches!(refused, Ok(Ok(_))),
            "a stranger's certificate was accepted"
        );
    }
}
