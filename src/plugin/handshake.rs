//! The go-plugin handshake line a provider prints on stdout:
//! `CORE|APP|NETWORK|ADDRESS|PROTOCOL[|CERT[|MUX]]`.
//!
//! Owns: parsing it and saying what is wrong with one Nivis cannot use. Not: reading it
//! (`launch`), the TLS certificate it carries (`tls`).

use std::fmt;

/// The parsed handshake line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Handshake {
    /// Negotiated app protocol major (5 or 6).
    pub(crate) protocol: u32,
    /// gRPC target, e.g. `unix:/tmp/plugin123`.
    pub(crate) target: String,
    /// The provider's TLS certificate (the 6th field, base64 DER) when it serves mutual TLS;
    /// `None` when the field is absent or, as go-plugin reads it, 50 characters or shorter.
    pub(crate) server_cert: Option<String>,
}

/// Why a go-plugin handshake line is not one Nivis can use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HandshakeError {
    /// Fewer than 4 `|`-separated fields.
    TooFewFields(usize),
    /// The go-plugin core version is not 1.
    CoreVersion(String),
    /// The app protocol version is not a number.
    ProtocolNotANumber(String),
    /// The transport is not gRPC (`netrpc` when absent).
    Transport(String),
    /// The plugin asked for gRPC multiplexing.
    Multiplexing,
    /// The network is neither `unix` nor `tcp`.
    Network(String),
    /// The first line on stdout is longer than go-plugin allows.
    LineTooLong {
        /// The limit, in KiB.
        limit_kib: usize,
    },
}

impl fmt::Display for HandshakeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HandshakeError::TooFewFields(n) => {
                write!(f, "expected at least 4 `|`-separated fields, got {n}")
            }
            HandshakeError::CoreVersion(v) => {
                write!(f, "incompatible go-plugin core version {v:?} (want 1)")
            }
            HandshakeError::ProtocolNotANumber(v) => {
                write!(f, "protocol version {v:?} is not a number")
            }
            HandshakeError::Transport(t) => write!(
                f,
                "transport {t:?}: only gRPC providers (Terraform 0.12 and later) are supported"
            ),
            HandshakeError::Multiplexing => {
                f.write_str("the plugin asked for gRPC multiplexing, which Nivis never requests")
            }
            HandshakeError::Network(n) => write!(f, "unknown network {n:?}"),
            HandshakeError::LineTooLong { limit_kib } => write!(
                f,
                "the first line on stdout is longer than {limit_kib} KiB, go-plugin's limit"
            ),
        }
    }
}

impl std::error::Error for HandshakeError {}

/// Parses `CORE|APP|NETWORK|ADDRESS|PROTOCOL[|CERT[|MUX]]`.
pub(crate) fn parse_handshake(line: &str) -> Result<Handshake, HandshakeError> {
    let parts: Vec<&str> = line.trim().split('|').collect();
    if parts.len() < 4 {
        return Err(HandshakeError::TooFewFields(parts.len()));
    }
    if parts[0] != "1" {
        return Err(HandshakeError::CoreVersion(parts[0].into()));
    }
    let protocol: u32 = parts[1]
        .parse()
        .map_err(|_| HandshakeError::ProtocolNotANumber(parts[1].into()))?;
    let transport = parts.get(4).copied().unwrap_or("netrpc");
    if transport != "grpc" {
        return Err(HandshakeError::Transport(transport.into()));
    }
    if parts.get(6).is_some_and(|m| !m.is_empty()) {
        return Err(HandshakeError::Multiplexing);
    }
    let target = match parts[2] {
        "unix" => format!("unix:{}", parts[3]),
        "tcp" => parts[3].to_string(),
        other => return Err(HandshakeError::Network(other.into())),
    };
    let server_cert = parts
        .get(5)
        .filter(|cert| cert.len() > 50)
        .map(|cert| cert.to_string());
    Ok(Handshake {
        protocol,
        target,
        server_cert,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handshake_variants() {
        let h = parse_handshake("1|5|unix|/tmp/plugin123|grpc|\n").unwrap();
        assert_eq!(
            h,
            Handshake {
                protocol: 5,
                target: "unix:/tmp/plugin123".into(),
                server_cert: None,
            }
        );
        let h = parse_handshake("1|6|unix|/tmp/p|grpc").unwrap();
        assert_eq!(h.protocol, 6);
        assert_eq!(
            parse_handshake("1|6|unix|/tmp/p|grpc|MIIBcert")
                .unwrap()
                .server_cert,
            None
        );
        let cert = "M".repeat(51);
        assert_eq!(
            parse_handshake(&format!("1|6|unix|/tmp/p|grpc|{cert}"))
                .unwrap()
                .server_cert,
            Some(cert)
        );
        assert!(parse_handshake("1|6|tcp|127.0.0.1:1234|grpc||").is_ok());
        assert!(parse_handshake("2|6|unix|/tmp/p|grpc|")
            .unwrap_err()
            .to_string()
            .contains("core version"));
        assert!(parse_handshake("1|5|unix|/tmp/p|netrpc|")
            .unwrap_err()
            .to_string()
            .contains("netrpc"));
        assert!(parse_handshake("1|5|unix|/tmp/p")
            .unwrap_err()
            .to_string()
            .contains("netrpc"));
        assert!(parse_handshake("hello world")
            .unwrap_err()
            .to_string()
            .contains("at least 4"));
        assert!(parse_handshake("1|x|unix|/p|grpc|")
            .unwrap_err()
            .to_string()
            .contains("not a number"));
        assert!(parse_handshake("1|6|unix|/p|grpc||true")
            .unwrap_err()
            .to_string()
            .contains("multiplex"));
    }
}
