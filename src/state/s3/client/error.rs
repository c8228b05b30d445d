//! [`S3Error`]: why an S3 request failed, worded in one line with what to do.

use std::fmt;

use super::super::interrupt;

/// Why an S3 request failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum S3Error {
    /// No answer: connection refused, DNS, TLS, timeouts; after every retry.
    Unreachable {
        /// The endpoint the request went to.
        endpoint: String,
        /// The last failure, as the transport reported it.
        detail: String,
        /// How many times the request was tried.
        attempts: u32,
    },
    /// The server kept failing (5xx, 429) through every retry.
    Server {
        /// The endpoint the request went to.
        endpoint: String,
        /// The last HTTP status.
        status: u16,
        /// The last S3 error code (empty when the answer had none).
        code: String,
        /// How many times the request was tried.
        attempts: u32,
    },
    /// The server refused the credentials (unknown key, wrong secret, expired token).
    Credentials {
        /// The endpoint the request went to.
        endpoint: String,
        /// The S3 error code (`InvalidAccessKeyId`, `SignatureDoesNotMatch`, ...).
        code: String,
        /// Where the credentials came from (environment, profile, ...).
        source: String,
    },
    /// The credentials are valid but not allowed to do this.
    AccessDenied {
        /// The bucket the request named.
        bucket: String,
        /// The object key the request named.
        key: String,
        /// Where the credentials came from (environment, profile, ...).
        source: String,
    },
    /// The bucket does not exist.
    NoSuchBucket {
        /// The endpoint the request went to.
        endpoint: String,
        /// The bucket it named.
        bucket: String,
    },
    /// The answer is not S3's: no S3 error document, or a success without the headers S3 sends.
    NotS3 {
        /// The endpoint the request went to.
        endpoint: String,
        /// The HTTP status.
        status: u16,
        /// What was wrong with the answer.
        detail: String,
    },
    /// A conditional request's condition did not hold (412, or 409 for a concurrent
    /// conditional write).
    PreconditionFailed {
        /// The object key the condition was on.
        key: String,
        /// How many times the request was tried.
        attempts: u32,
    },
    /// Any other refusal.
    Refused {
        /// The endpoint the request went to.
        endpoint: String,
        /// The HTTP status.
        status: u16,
        /// The S3 error code.
        code: String,
        /// The S3 error message.
        message: String,
    },
    /// The configuration cannot work (bad endpoint URL, plain http to a remote host).
    Config(String),
    /// Given up after Ctrl-C: the server did not answer within the grace an interrupted run
    /// gives it (or an earlier request of this run was already given up).
    Interrupted {
        /// The endpoint, as configured.
        endpoint: String,
        /// The request's HTTP method.
        method: String,
        /// Attempts made.
        attempts: u32,
    },
}

impl S3Error {
    /// Whether retrying later could help: the store is down or failing, not refusing.
    #[cfg(test)] // used by the unit tests only
    pub(crate) fn is_outage(&self) -> bool {
        matches!(self, S3Error::Unreachable { .. } | S3Error::Server { .. })
    }
}

impl fmt::Display for S3Error {
    // Long because it words every kind of failure, each with what to do, in one table.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            S3Error::Unreachable {
                endpoint,
                detail,
                attempts,
            } => write!(
                f,
                "cannot reach the S3 endpoint {endpoint} ({detail}; {attempts} attempt(s)); \
                 check the endpoint and that the server is up"
            ),
            S3Error::Server {
                endpoint,
                status,
                code,
                attempts,
            } => write!(
                f,
                "the S3 endpoint {endpoint} keeps failing (HTTP {status}{}; {attempts} \
                 attempt(s)); retry later",
                if code.is_empty() {
                    String::new()
                } else {
                    format!(" {code}")
                }
            ),
            S3Error::Credentials {
                endpoint,
                code,
                source,
            } => write!(
                f,
                "the S3 endpoint {endpoint} refused the credentials from {source} ({code}); \
                 check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (or the profile)"
            ),
            S3Error::AccessDenied {
                bucket,
                key,
                source,
            } => write!(
                f,
                "access denied to s3://{bucket}/{key} for the credentials from {source}; grant \
                 them read, write and list on the bucket"
            ),
            S3Error::NoSuchBucket { endpoint, bucket } => write!(
                f,
                "the bucket {bucket:?} does not exist at {endpoint}; create it (Nivis never \
                 creates buckets) or fix `bucket` in the backend configuration"
            ),
            S3Error::NotS3 {
                endpoint,
                status,
                detail,
            } => write!(
                f,
                "{endpoint} does not answer like S3 (HTTP {status}: {detail}); check `endpoint` \
                 in the backend configuration"
            ),
            S3Error::PreconditionFailed { key, .. } => write!(
                f,
                "{key} was changed by someone else meanwhile (conditional write refused)"
            ),
            S3Error::Refused {
                endpoint,
                status,
                code,
                message,
            } => write!(
                f,
                "the S3 endpoint {endpoint} refused the request (HTTP {status} {code}: {message})"
            ),
            S3Error::Config(msg) => write!(f, "{msg}"),
            S3Error::Interrupted {
                endpoint,
                method,
                attempts,
            } => write!(
                f,
                "interrupted: the S3 endpoint {endpoint} did not answer a {method} request \
                 ({attempts} attempt(s)) within {}s of Ctrl-C, so this run stopped waiting for it",
                interrupt::GRACE.as_secs()
            ),
        }
    }
}

impl std::error::Error for S3Error {}
