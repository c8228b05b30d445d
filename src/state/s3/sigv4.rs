//! AWS Signature Version 4 for S3 requests, and the credentials it signs with.
//!
//! Owns: the canonical request (method, URI-encoded path, sorted query, sorted lowercase
//! headers, signed-header list, payload hash), the string to sign, the HMAC key chain and the
//! `Authorization` header; where credentials come from (environment variables, else a profile of
//! the shared credentials file). Not: sending anything (see `client`), nor choosing URLs.
//!
//! The payload is always signed (`x-amz-content-sha256` holds its real hash): S3 requires the
//! header, and a signed body means a proxy cannot swap the state we upload.

use std::fmt;
use std::path::PathBuf;

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

use crate::percent::percent_encode;

/// Why no credentials were found; the message says what to set.
#[derive(Debug)]
pub(crate) enum CredentialsError {
    /// Neither the environment's keys nor the profile in the shared credentials file.
    Missing {
        /// The profile looked for.
        profile: String,
        /// The shared credentials file looked in (`None`: no `$HOME` to find it).
        file: Option<PathBuf>,
    },
    /// The shared credentials file is larger than 1 MiB.
    TooLarge {
        /// The file.
        path: PathBuf,
    },
    /// The shared credentials file is not a regular file (a device or a pipe).
    NotAFile {
        /// The file.
        path: PathBuf,
    },
    /// The shared credentials file cannot be read.
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

impl fmt::Display for CredentialsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CredentialsError::Missing { profile, file } => write!(
                f,
                "no S3 credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or add a \
                 [{profile}] profile to the shared credentials file ({})",
                file.as_ref()
                    .map_or("~/.aws/credentials".into(), |f| f.display().to_string())
            ),
            CredentialsError::TooLarge { path } => {
                write!(f, "{}: larger than 1 MiB", path.display())
            }
            CredentialsError::NotAFile { path } => {
                write!(f, "{}: not a regular file", path.display())
            }
            CredentialsError::Read { path, source } => {
                write!(f, "cannot read {}: {source}", path.display())
            }
        }
    }
}

impl std::error::Error for CredentialsError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CredentialsError::Read { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// An access key pair (and session token) to sign with. `Debug` never shows the secret.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    /// AWS_ACCESS_KEY_ID.
    pub access_key: String,
    /// AWS_SECRET_ACCESS_KEY.
    pub secret_key: String,
    /// AWS_SESSION_TOKEN, for temporary credentials.
    pub session_token: Option<String>,
    /// Where they came from, for error messages ("environment", "profile p in FILE").
    pub source: String,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("access_key", &self.access_key)
            .field("secret_key", &"(hidden)")
            .field(
                "session_token",
                &self.session_token.as_ref().map(|_| "(hidden)"),
            )
            .field("source", &self.source)
            .finish()
    }
}

/// The largest shared credentials file read (it holds a few keys).
const CREDENTIALS_FILE_LIMIT: u64 = 1 << 20;

impl Credentials {
    /// Credentials the way AWS tools find them: `AWS_ACCESS_KEY_ID` + `AWS_SECRET_ACCESS_KEY`
    /// (+ `AWS_SESSION_TOKEN`) if set; else the profile `profile` (or `AWS_PROFILE`, else
    /// `default`) of the shared credentials file (`AWS_SHARED_CREDENTIALS_FILE`, else
    /// `~/.aws/credentials`). The error says what to set.
    pub(crate) fn discover(profile: Option<&str>) -> Result<Credentials, CredentialsError> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        if profile.is_none() {
            if let (Some(access_key), Some(secret_key)) =
                (var("AWS_ACCESS_KEY_ID"), var("AWS_SECRET_ACCESS_KEY"))
            {
                return Ok(Credentials {
                    access_key,
                    secret_key,
                    session_token: var("AWS_SESSION_TOKEN"),
                    source: "the environment (AWS_ACCESS_KEY_ID)".into(),
                });
            }
        }
        let profile = profile
            .map(str::to_string)
            .or_else(|| var("AWS_PROFILE"))
            .unwrap_or_else(|| "default".into());
        let file = var("AWS_SHARED_CREDENTIALS_FILE")
            .map(PathBuf::from)
            .or_else(|| var("HOME").map(|h| PathBuf::from(h).join(".aws/credentials")));
        let missing = || CredentialsError::Missing {
            profile: profile.clone(),
            file: file.clone(),
        };
        let Some(path) = &file else {
            return Err(missing());
        };
        // A device or a pipe (/dev/zero) would be read forever.
        match std::fs::metadata(path) {
            Ok(m) if m.is_file() && m.len() <= CREDENTIALS_FILE_LIMIT => {}
            Ok(m) if m.is_file() => {
                return Err(CredentialsError::TooLarge { path: path.clone() });
            }
            Ok(_) => return Err(CredentialsError::NotAFile { path: path.clone() }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(missing()),
            Err(source) => {
                return Err(CredentialsError::Read {
                    path: path.clone(),
                    source,
                })
            }
        }
        let text = std::fs::read_to_string(path).map_err(|source| CredentialsError::Read {
            path: path.clone(),
            source,
        })?;
        let found = profile_entries(&text, &profile);
        let get = |key: &str| found.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone());
        match (get("aws_access_key_id"), get("aws_secret_access_key")) {
            (Some(access_key), Some(secret_key)) => Ok(Credentials {
                access_key,
                secret_key,
                session_token: get("aws_session_token"),
                source: format!("profile {profile} in {}", path.display()),
            }),
            _ => Err(missing()),
        }
    }
}

/// The `key = value` lines of section `[profile]` of an INI-style credentials file.
fn profile_entries(text: &str, profile: &str) -> Vec<(String, String)> {
    let mut inside = false;
    let mut out = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.starts_with('#') || line.starts_with(';') || line.is_empty() {
            continue;
        }
        if let Some(section) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            inside = section.trim() == profile;
            continue;
        }
        if inside {
            if let Some((k, v)) = line.split_once('=') {
                out.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
            }
        }
    }
    out
}

/// One request as SigV4 sees it.
#[derive(Debug)]
pub(super) struct Request<'a> {
    /// `GET`, `PUT`, ...
    pub(crate) method: &'a str,
    /// The `Host` header value (with `:port` unless it is the scheme's default).
    pub(crate) host: &'a str,
    /// The path, already URI-encoded as it goes on the wire (see [`percent_encode`]).
    pub(crate) path: &'a str,
    /// Query parameters, not encoded.
    pub(crate) query: &'a [(&'a str, String)],
    /// Further headers to sign (e.g. `if-match`), names in lowercase.
    pub(crate) headers: &'a [(&'a str, String)],
    /// Hex sha256 of the body.
    pub(crate) payload_sha256: &'a str,
}

/// Signs `req` for `region` at `amz_date` (`YYYYMMDDTHHMMSSZ`); returns the headers to send
/// besides `req.headers`: `x-amz-date`, `x-amz-content-sha256`, the session token if any, and
/// `authorization`.
pub(super) fn sign(
    creds: &Credentials,
    region: &str,
    amz_date: &str,
    req: &Request<'_>,
) -> Vec<(&'static str, String)> {
    let mut out = vec![
        ("x-amz-date", amz_date.to_string()),
        ("x-amz-content-sha256", req.payload_sha256.to_string()),
    ];
    if let Some(token) = &creds.session_token {
        out.push(("x-amz-security-token", token.clone()));
    }
    let mut headers: Vec<(String, String)> = req
        .headers
        .iter()
        .map(|(k, v)| (k.to_ascii_lowercase(), v.trim().to_string()))
        .chain(out.iter().map(|(k, v)| (k.to_string(), v.clone())))
        .chain([("host".to_string(), req.host.to_string())])
        .collect();
    headers.sort();
    let signed: Vec<&str> = headers.iter().map(|(k, _)| k.as_str()).collect();
    let signed = signed.join(";");
    let canonical = format!(
        "{}\n{}\n{}\n{}\n{}\n{}",
        req.method,
        req.path,
        canonical_query(req.query),
        headers
            .iter()
            .map(|(k, v)| format!("{k}:{v}\n"))
            .collect::<String>(),
        signed,
        req.payload_sha256
    );
    let date = &amz_date[..8];
    let scope = format!("{date}/{region}/s3/aws4_request");
    let to_sign = format!(
        "AWS4-HMAC-SHA256\n{amz_date}\n{scope}\n{}",
        hex::encode(Sha256::digest(canonical.as_bytes()))
    );
    let mut key = hmac(
        format!("AWS4{}", creds.secret_key).as_bytes(),
        date.as_bytes(),
    );
    for part in [region, "s3", "aws4_request"] {
        key = hmac(&key, part.as_bytes());
    }
    let signature = hex::encode(hmac(&key, to_sign.as_bytes()));
    out.push((
        "authorization",
        format!(
            "AWS4-HMAC-SHA256 Credential={}/{scope}, SignedHeaders={signed}, Signature={signature}",
            creds.access_key
        ),
    ));
    out
}

fn hmac(key: &[u8], data: &[u8]) -> Vec<u8> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes keys of any length");
    mac.update(data);
    mac.finalize().into_bytes().to_vec()
}

/// The query string as sent and as signed: `k=v` pairs, both URI-encoded, sorted by key.
pub(super) fn canonical_query(query: &[(&str, String)]) -> String {
    let mut pairs: Vec<(String, String)> = query
        .iter()
        .map(|(k, v)| (percent_encode(k, true), percent_encode(v, true)))
        .collect();
    pairs.sort();
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&")
}

/// Hex sha256 of `body`.
pub(super) fn payload_hash(body: &[u8]) -> String {
    hex::encode(Sha256::digest(body))
}

#[cfg(test)]
mod tests {
    use super::*;

    // The worked examples of AWS's "Signature Calculations for the Authorization Header"
    // (S3 API reference): their published signatures.
    fn example_creds() -> Credentials {
        Credentials {
            access_key: "AKIAIOSFODNN7EXAMPLE".into(),
            secret_key: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY".into(),
            session_token: None,
            source: "test".into(),
        }
    }

    fn signature(headers: &[(&'static str, String)]) -> String {
        let auth = &headers
            .iter()
            .find(|(k, _)| *k == "authorization")
            .unwrap()
            .1;
        auth.rsplit_once("Signature=").unwrap().1.to_string()
    }

    /// Signs AWS's example request (GET, bucket `examplebucket`, 2013-05-24) for `path`.
    fn example(
        path: &str,
        query: &[(&str, String)],
        headers: &[(&str, String)],
    ) -> Vec<(&'static str, String)> {
        sign(
            &example_creds(),
            "us-east-1",
            "20130524T000000Z",
            &Request {
                method: "GET",
                host: "examplebucket.s3.amazonaws.com",
                path,
                query,
                headers,
                payload_sha256: &payload_hash(b""),
            },
        )
    }

    #[test]
    fn matches_the_aws_get_object_example() {
        let headers = example("/test.txt", &[], &[("range", "bytes=0-9".into())]);
        assert_eq!(
            signature(&headers),
            "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"
        );
        let auth = &headers.last().unwrap().1;
        assert!(auth.contains("SignedHeaders=host;range;x-amz-content-sha256;x-amz-date"));
        assert!(auth.contains("Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request"));
    }

    #[test]
    fn matches_the_aws_list_objects_example() {
        let headers = example(
            "/",
            &[("max-keys", "2".into()), ("prefix", "J".into())],
            &[],
        );
        assert_eq!(
            signature(&headers),
            "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7"
        );
    }

    #[test]
    fn encodes_the_query_like_s3() {
        assert_eq!(
            canonical_query(&[("prefix", "a/b".into()), ("list-type", "2".into())]),
            "list-type=2&prefix=a%2Fb"
        );
    }

    #[test]
    fn reads_a_profile_and_hides_the_secret() {
        let text = "[default]\naws_access_key_id = A1\naws_secret_access_key=S1\n\n\
                    [ci]\n# comment\nAWS_ACCESS_KEY_ID = A2\naws_secret_access_key = S2\n\
                    aws_session_token = T2\n";
        let ci = profile_entries(text, "ci");
        assert_eq!(
            ci,
            [
                ("aws_access_key_id".into(), "A2".into()),
                ("aws_secret_access_key".into(), "S2".into()),
                ("aws_session_token".into(), "T2".into())
            ]
        );
        assert!(profile_entries(text, "nope").is_empty());
        let shown = format!("{:?}", example_creds());
        assert!(!shown.contains("EXAMPLEKEY"), "{shown}");
    }
}
