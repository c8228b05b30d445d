//! Mutual TLS with a provider, as go-plugin's AutoMTLS does it.
//!
//! Owns: the client side of the TLS session with one provider process: our certificate and key
//! ([`cert`]), pinning exactly the certificate the provider printed in its handshake (no chain,
//! no names, no clock: the DER must be byte-equal), checking the provider's handshake signature
//! with that certificate's key (go-plugin's keys are ECDSA P-521, which *ring* cannot verify:
//! the `p521` crate does), ALPN `h2` and server name `localhost`; and, for the fake providers,
//! the provider's side ([`provider_end`]), pinning the client's certificate the same way. Not:
//! moving bytes between gRPC and the session (`bridge`), starting the process (`launch`).

pub(crate) mod cert;
pub(super) mod provider_end;

use std::fmt;
use std::io;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, WebPkiSupportedAlgorithms};
use rustls::pki_types::{
    alg_id, AlgorithmIdentifier, CertificateDer, InvalidSignature, PrivateKeyDer,
    PrivatePkcs8KeyDer, ServerName, SignatureVerificationAlgorithm, UnixTime,
};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{
    CertificateError, ClientConfig, ClientConnection, DigitallySignedStruct, DistinguishedName,
    SignatureScheme,
};

pub(crate) use cert::PluginCert;

/// How long the TLS handshake with a provider may take.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a TLS session with a provider could not be set up.
#[derive(Debug)]
pub enum TlsError {
    /// The certificate field of the provider's handshake line is not base64 DER.
    BadServerCert(String),
    /// Our certificate or the TLS configuration could not be made.
    Config(String),
    /// Connecting to the provider's socket or the TLS handshake failed.
    Handshake(io::Error),
}

impl fmt::Display for TlsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TlsError::BadServerCert(why) => write!(
                f,
                "the certificate in its plugin handshake is unreadable ({why})"
            ),
            TlsError::Config(why) => write!(f, "cannot set up mutual TLS: {why}"),
            TlsError::Handshake(e) => write!(f, "the mutual TLS handshake failed: {e}"),
        }
    }
}

impl std::error::Error for TlsError {}

/// Decodes the handshake's certificate field (go-plugin: base64 without padding; padded is
/// accepted too).
pub(crate) fn decode_server_cert(field: &str) -> Result<Vec<u8>, TlsError> {
    use base64::Engine;
    let engine = base64::engine::GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        base64::engine::GeneralPurposeConfig::new()
            .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
    );
    engine
        .decode(field.trim())
        .map_err(|e| TlsError::BadServerCert(e.to_string()))
}

/// What every connection to one provider uses: our identity and the pinned provider certificate.
#[derive(Clone)]
pub(crate) struct TlsClient {
    config: Arc<ClientConfig>,
}

impl TlsClient {
    /// A client that presents `ours` and accepts only `server_cert` (DER).
    pub(crate) fn new(ours: &PluginCert, server_cert: Vec<u8>) -> Result<TlsClient, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier = Arc::new(Pinned::new(server_cert, &provider));
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(ours.key_pkcs8.clone()));
        let mut config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Config(e.to_string()))?
            .dangerous()
            .with_custom_certificate_verifier(verifier)
            .with_client_auth_cert(vec![CertificateDer::from(ours.cert_der.clone())], key)
            .map_err(|e| TlsError::Config(e.to_string()))?;
        config.alpn_protocols = vec![b"h2".to_vec()];
        Ok(TlsClient {
            config: Arc::new(config),
        })
    }

    /// Connects to the provider's socket and completes the TLS handshake.
    pub(crate) fn connect(
        &self,
        socket: &Path,
    ) -> Result<(UnixStream, ClientConnection), TlsError> {
        let name = ServerName::try_from("localhost").expect("a valid DNS name");
        let mut conn = ClientConnection::new(Arc::clone(&self.config), name)
            .map_err(|e| TlsError::Config(e.to_string()))?;
        let mut stream = UnixStream::connect(socket).map_err(TlsError::Handshake)?;
        stream
            .set_read_timeout(Some(HANDSHAKE_TIMEOUT))
            .map_err(TlsError::Handshake)?;
        while conn.is_handshaking() {
            conn.complete_io(&mut stream).map_err(TlsError::Handshake)?;
        }
        stream.set_read_timeout(None).map_err(TlsError::Handshake)?;
        Ok((stream, conn))
    }
}

/// Accepts exactly one certificate of the other end (the provider's, or on the provider's
/// side the client's), and handshake signatures made with its key.
#[derive(Debug)]
struct Pinned {
    cert: Vec<u8>,
    ring: WebPkiSupportedAlgorithms,
}

impl Pinned {
    /// Pins `cert` (DER); signatures are checked with `provider`'s algorithms and P-521's.
    fn new(cert: Vec<u8>, provider: &rustls::crypto::CryptoProvider) -> Pinned {
        Pinned {
            cert,
            ring: provider.signature_verification_algorithms,
        }
    }

    /// Whether `end_entity` is the pinned certificate, byte for byte.
    fn check(&self, end_entity: &CertificateDer<'_>) -> Result<(), rustls::Error> {
        if end_entity.as_ref() == self.cert.as_slice() {
            Ok(())
        } else {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::ApplicationVerificationFailure,
            ))
        }
    }

    /// Checks a handshake signature with *ring*'s algorithms, then with the P-521 ones.
    fn verify(
        &self,
        verify: impl Fn(&WebPkiSupportedAlgorithms) -> Result<HandshakeSignatureValid, rustls::Error>,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify(&self.ring).or_else(|_| verify(&P521_ALGORITHMS))
    }

    fn schemes(&self) -> Vec<SignatureScheme> {
        // First: go-plugin's keys are P-521, and a TLS 1.2 peer takes the first scheme its
        // key can make (the `ecdsa` crate refuses a SHA-256 digest for P-521: too short).
        let mut schemes = vec![SignatureScheme::ECDSA_NISTP521_SHA512];
        schemes.extend(self.ring.supported_schemes());
        schemes
    }
}

impl ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.check(end_entity)
            .map(|()| ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.verify(|algs| verify_tls12_signature(message, cert, dss, algs))
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.verify(|algs| verify_tls13_signature(message, cert, dss, algs))
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.schemes()
    }
}

impl ClientCertVerifier for Pinned {
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        // go-plugin's client presents its one certificate whatever the hint.
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        self.check(end_entity)
            .map(|()| ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.verify(|algs| verify_tls12_signature(message, cert, dss, algs))
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.verify(|algs| verify_tls13_signature(message, cert, dss, algs))
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.schemes()
    }
}

/// ECDSA with a P-521 key (go-plugin's server keys) over a SHA-2 digest. In TLS 1.3 the
/// scheme is SHA-512; in TLS 1.2 a server may pick SHA-384 for the same key.
#[derive(Debug)]
enum EcdsaP521 {
    Sha384,
    Sha512,
}

impl SignatureVerificationAlgorithm for EcdsaP521 {
    fn verify_signature(
        &self,
        public_key: &[u8],
        message: &[u8],
        signature: &[u8],
    ) -> Result<(), InvalidSignature> {
        use p521::ecdsa::signature::hazmat::PrehashVerifier;
        use sha2::Digest;
        let key =
            p521::ecdsa::VerifyingKey::from_sec1_bytes(public_key).map_err(|_| InvalidSignature)?;
        let signature =
            p521::ecdsa::Signature::from_der(signature).map_err(|_| InvalidSignature)?;
        let digest = match self {
            EcdsaP521::Sha384 => sha2::Sha384::digest(message).to_vec(),
            EcdsaP521::Sha512 => sha2::Sha512::digest(message).to_vec(),
        };
        key.verify_prehash(&digest, &signature)
            .map_err(|_| InvalidSignature)
    }

    fn public_key_alg_id(&self) -> AlgorithmIdentifier {
        alg_id::ECDSA_P521
    }

    fn signature_alg_id(&self) -> AlgorithmIdentifier {
        match self {
            EcdsaP521::Sha384 => alg_id::ECDSA_SHA384,
            EcdsaP521::Sha512 => alg_id::ECDSA_SHA512,
        }
    }
}

static P521_SHA384: &dyn SignatureVerificationAlgorithm = &EcdsaP521::Sha384;
static P521_SHA512: &dyn SignatureVerificationAlgorithm = &EcdsaP521::Sha512;

static P521_ALGORITHMS: WebPkiSupportedAlgorithms = WebPkiSupportedAlgorithms {
    all: &[P521_SHA384, P521_SHA512],
    mapping: &[
        (SignatureScheme::ECDSA_NISTP521_SHA512, &[P521_SHA512]),
        (SignatureScheme::ECDSA_NISTP384_SHA384, &[P521_SHA384]),
    ],
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_handshake_certificate_decodes_with_or_without_padding() {
        assert_eq!(decode_server_cert("AAEC").unwrap(), vec![0, 1, 2]);
        assert_eq!(decode_server_cert("AAE").unwrap(), vec![0, 1]);
        assert_eq!(decode_server_cert("AAE=").unwrap(), vec![0, 1]);
        assert!(decode_server_cert("not base64!").is_err());
    }

    #[test]
    fn only_the_pinned_certificate_is_accepted() {
        let pinned = Pinned::new(vec![1, 2, 3], &rustls::crypto::ring::default_provider());
        let name = ServerName::try_from("localhost").unwrap();
        let check = |der: &[u8]| {
            pinned.verify_server_cert(&CertificateDer::from(der), &[], &name, &[], UnixTime::now())
        };
        assert!(check(&[1, 2, 3]).is_ok());
        assert!(check(&[1, 2, 4]).is_err());
        assert!(check(&[1, 2, 3, 4]).is_err());
        assert!(ServerCertVerifier::supported_verify_schemes(&pinned)
            .contains(&SignatureScheme::ECDSA_NISTP521_SHA512));
        // The provider's end pins the client's certificate the same way.
        let client = |der: &[u8]| {
            pinned.verify_client_cert(&CertificateDer::from(der), &[], UnixTime::now())
        };
        assert!(client(&[1, 2, 3]).is_ok());
        assert!(client(&[3, 2, 1]).is_err());
    }
}
