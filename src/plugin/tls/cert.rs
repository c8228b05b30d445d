//! The certificate either end of go-plugin's AutoMTLS presents: Nivis's to a provider, and the
//! fake providers' to their client ([`super::provider_end`]). A fresh self-signed ECDSA P-256
//! certificate per launch, DER built by hand (a few fixed structures; no X.509 crate).
//!
//! Owns: the key pair and the certificate's bytes, as go-plugin's `generateCert` makes them
//! (CA, key usage digitalSignature | keyEncipherment | keyAgreement | certSign, extended key
//! usage clientAuth + serverAuth, subject and DNS name `localhost`). Not: the TLS session
//! (`super`), where the certificate goes (`launch` hands its PEM to the provider).

use std::time::{Duration, SystemTime};

use base64::Engine;
use ring::rand::{SecureRandom, SystemRandom};
use ring::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_ASN1_SIGNING};

/// A certificate and its private key, both DER, and the certificate as PEM.
pub(crate) struct PluginCert {
    /// The certificate (X.509 DER).
    pub(crate) cert_der: Vec<u8>,
    /// The private key (PKCS#8 DER); lives in memory only.
    pub(crate) key_pkcs8: Vec<u8>,
}

/// Why a certificate could not be made (the system random source failed).
#[derive(Debug)]
pub(crate) struct CertError(pub(crate) &'static str);

impl std::fmt::Display for CertError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "cannot make the TLS certificate for go-plugin's mutual TLS: {}",
            self.0
        )
    }
}

impl std::error::Error for CertError {}

// Object identifiers, DER-encoded (tag, length, value).
const OID_EC_PUBLIC_KEY: &[u8] = &[0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01];
const OID_P256: &[u8] = &[0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07];
const OID_ECDSA_SHA256: &[u8] = &[0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x02];
const OID_ORGANIZATION: &[u8] = &[0x06, 0x03, 0x55, 0x04, 0x0a];
const OID_COMMON_NAME: &[u8] = &[0x06, 0x03, 0x55, 0x04, 0x03];
const OID_BASIC_CONSTRAINTS: &[u8] = &[0x06, 0x03, 0x55, 0x1d, 0x13];
const OID_KEY_USAGE: &[u8] = &[0x06, 0x03, 0x55, 0x1d, 0x0f];
const OID_EXT_KEY_USAGE: &[u8] = &[0x06, 0x03, 0x55, 0x1d, 0x25];
const OID_SUBJECT_ALT_NAME: &[u8] = &[0x06, 0x03, 0x55, 0x1d, 0x11];
const OID_CLIENT_AUTH: &[u8] = &[0x06, 0x08, 0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x02];
const OID_SERVER_AUTH: &[u8] = &[0x06, 0x08, 0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x01];

/// The certificate's validity: from an hour ago (clocks of one machine agree; the margin is for
/// a clock stepped back) to a year from now (a provider process lives for one command).
const VALID_BEFORE: Duration = Duration::from_secs(3600);
const VALID_AFTER: Duration = Duration::from_secs(365 * 24 * 3600);

impl PluginCert {
    /// Generates a key pair and a certificate for it, signed by itself.
    pub(crate) fn generate() -> Result<PluginCert, CertError> {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &rng)
            .map_err(|_| CertError("generating the key pair failed"))?;
        let key = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, pkcs8.as_ref(), &rng)
            .map_err(|_| CertError("reading the generated key pair failed"))?;
        let mut serial = [0u8; 16];
        rng.fill(&mut serial)
            .map_err(|_| CertError("the system random source failed"))?;
        // Positive and minimal: clear the sign bit, keep the first byte non-zero.
        serial[0] = (serial[0] & 0x7f) | 0x40;
        let now = SystemTime::now();
        let tbs = tbs_certificate(
            &serial,
            now - VALID_BEFORE,
            now + VALID_AFTER,
            key.public_key().as_ref(),
        );
        let signature = key
            .sign(&rng, &tbs)
            .map_err(|_| CertError("signing the certificate failed"))?;
        let mut bit_string = vec![0];
        bit_string.extend_from_slice(signature.as_ref());
        let cert_der = der(
            0x30,
            &[
                tbs,
                der(0x30, &[OID_ECDSA_SHA256.to_vec()]),
                der(0x03, &[bit_string]),
            ],
        );
        Ok(PluginCert {
            cert_der,
            key_pkcs8: pkcs8.as_ref().to_vec(),
        })
    }

    /// The certificate as PEM, what go-plugin reads from `PLUGIN_CLIENT_CERT`.
    pub(crate) fn pem(&self) -> String {
        let body = base64::engine::general_purpose::STANDARD.encode(&self.cert_der);
        let mut pem = String::from("-----BEGIN CERTIFICATE-----\n");
        for line in body.as_bytes().chunks(64) {
            pem.push_str(std::str::from_utf8(line).unwrap_or_default());
            pem.push('\n');
        }
        pem.push_str("-----END CERTIFICATE-----\n");
        pem
    }
}

/// The to-be-signed part: version 3, serial, issuer = subject = O=Nivis CN=localhost,
/// validity, the P-256 public key, and the extensions go-plugin sets.
fn tbs_certificate(
    serial: &[u8],
    not_before: SystemTime,
    not_after: SystemTime,
    public_key: &[u8],
) -> Vec<u8> {
    let name = der(
        0x30,
        &[
            der(
                0x31,
                &[der(
                    0x30,
                    &[OID_ORGANIZATION.to_vec(), der(0x0c, &[b"Nivis".to_vec()])],
                )],
            ),
            der(
                0x31,
                &[der(
                    0x30,
                    &[
                        OID_COMMON_NAME.to_vec(),
                        der(0x0c, &[b"localhost".to_vec()]),
                    ],
                )],
            ),
        ],
    );
    let validity = der(0x30, &[utc_time(not_before), utc_time(not_after)]);
    let mut key_bits = vec![0];
    key_bits.extend_from_slice(public_key);
    let spki = der(
        0x30,
        &[
            der(0x30, &[OID_EC_PUBLIC_KEY.to_vec(), OID_P256.to_vec()]),
            der(0x03, &[key_bits]),
        ],
    );
    der(
        0x30,
        &[
            der(0xa0, &[der(0x02, &[vec![0x02]])]),
            der(0x02, &[serial.to_vec()]),
            der(0x30, &[OID_ECDSA_SHA256.to_vec()]),
            name.clone(),
            validity,
            name,
            spki,
            der(0xa3, &[der(0x30, &[extensions()])]),
        ],
    )
}

/// The extensions go-plugin puts in its certificates: basic constraints (CA, critical), key
/// usage (critical), extended key usage, subject alternative name.
fn extensions() -> Vec<u8> {
    let critical = der(0x01, &[vec![0xff]]);
    let extension = |oid: &[u8], critical: Option<&Vec<u8>>, value: Vec<u8>| {
        let mut parts = vec![oid.to_vec()];
        parts.extend(critical.cloned());
        parts.push(der(0x04, &[value]));
        der(0x30, &parts)
    };
    // Bits 0 (digitalSignature), 2 (keyEncipherment), 4 (keyAgreement), 5 (keyCertSign);
    // the two trailing bits are unused.
    let key_usage = der(0x03, &[vec![0x02, 0xac]]);
    [
        extension(
            OID_BASIC_CONSTRAINTS,
            Some(&critical),
            der(0x30, std::slice::from_ref(&critical)),
        ),
        extension(OID_KEY_USAGE, Some(&critical), key_usage),
        extension(
            OID_EXT_KEY_USAGE,
            None,
            der(0x30, &[OID_CLIENT_AUTH.to_vec(), OID_SERVER_AUTH.to_vec()]),
        ),
        extension(
            OID_SUBJECT_ALT_NAME,
            None,
            der(0x30, &[der(0x82, &[b"localhost".to_vec()])]),
        ),
    ]
    .concat()
}

/// One DER element: `tag`, the definite length of the concatenated `parts`, the parts.
fn der(tag: u8, parts: &[Vec<u8>]) -> Vec<u8> {
    let body = parts.concat();
    let mut out = vec![tag];
    let len = body.len();
    if len < 0x80 {
        out.push(len as u8);
    } else {
        let bytes: Vec<u8> = len
            .to_be_bytes()
            .into_iter()
            .skip_while(|b| *b == 0)
            .collect();
        out.push(0x80 | bytes.len() as u8);
        out.extend(bytes);
    }
    out.extend(body);
    out
}

/// `time` as a DER UTCTime (`YYMMDDHHMMSSZ`; valid until 2049, which a year's validity from
/// any date this code runs at stays within).
fn utc_time(time: SystemTime) -> Vec<u8> {
    // "2026-11-26T02:33:11Z" -> "261126023311Z"
    let text = humantime::format_rfc3339_seconds(time).to_string();
    let digits: String = text[2..19].chars().filter(char::is_ascii_digit).collect();
    der(0x17, &[format!("{digits}Z").into_bytes()])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_and_times_encode_as_der() {
        assert_eq!(der(0x04, &[vec![1, 2]]), vec![0x04, 2, 1, 2]);
        let long = der(0x04, &[vec![0; 300]]);
        assert_eq!(&long[..4], &[0x04, 0x82, 0x01, 0x2c]);
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1_795_660_391);
        assert_eq!(utc_time(t), [&[0x17, 13][..], b"261126023311Z"].concat());
    }

    #[test]
    fn the_certificate_is_one_der_sequence_and_its_pem_wraps_it() {
        let cert = PluginCert::generate().unwrap();
        let der = &cert.cert_der;
        // SEQUENCE, two length bytes, covering exactly the rest.
        assert_eq!(der[0..2], [0x30, 0x82]);
        assert_eq!(
            usize::from(der[2]) << 8 | usize::from(der[3]),
            der.len() - 4
        );
        let pem = cert.pem();
        assert!(pem.starts_with("-----BEGIN CERTIFICATE-----\nMII"), "{pem}");
        let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(body)
            .unwrap();
        assert_eq!(&decoded, der);
    }
}
