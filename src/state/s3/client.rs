//! A small S3 object client on `ureq`: GET, conditional PUT, conditional DELETE and list, with
//! bounded retries, signed with SigV4.
//!
//! Owns: URLs (path-style or virtual-hosted, https by default, plain http only to a loopback
//! host unless allowed), which failures are retried (connection errors, timeouts, 5xx, 429;
//! never a 4xx answer), and turning S3's answers into [`S3Error`]s that say in one line what is
//! wrong and what to do. Not: what the objects mean (see `store`), nor credentials discovery
//! (see `sigv4`).
//!
//! A retried conditional write can be ambiguous: if the first attempt reached the server but
//! its answer was lost, the retry meets its own write and fails the precondition. Replies say
//! how many attempts a request took so the caller can check the object before calling it a
//! conflict.

use std::fmt;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ureq::http::{Request, Uri};

pub(super) mod error;

pub(crate) use error::S3Error;

use super::interrupt;
use super::sigv4::{self, Credentials};
use super::xml;
use crate::percent::percent_encode;

/// Largest object body read (a state of millions of resources still fits).
const BODY_LIMIT: u64 = 1 << 30;

/// Where the bucket is and how to reach it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// `http(s)://host[:port]`; `None`: AWS (`https://s3.REGION.amazonaws.com`).
    pub endpoint: Option<String>,
    /// The bucket.
    pub bucket: String,
    /// The signing region.
    pub region: String,
    /// `https://host/bucket/key` instead of `https://bucket.host/key`.
    pub path_style: bool,
    /// Allow plain http to a host that is not loopback (state and credentials' signatures would
    /// cross the network unencrypted).
    pub allow_http: bool,
}

/// The default of `requestTimeout`: S3 answers a state's small requests in milliseconds, so a
/// server silent this long is taken as hung and the attempt retried.
pub(crate) const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// How often and how patiently a failing request is retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retry {
    /// Attempts in all (at least 1).
    pub(crate) attempts: u32,
    /// Pause after the first failure; doubles each time up to `max_pause`.
    pub(crate) first_pause: Duration,
    /// Longest pause between attempts.
    pub(crate) max_pause: Duration,
    /// Longest wait for each step of an attempt that moves no bulk data: connecting, sending
    /// the request head, the server's answer head (`requestTimeout`; a hung server fails an
    /// attempt after this).
    pub(crate) timeout: Duration,
    /// Longest a whole attempt may take, bodies included (a large snapshot).
    pub(crate) transfer_timeout: Duration,
    /// Longest a call may keep trying, all its attempts and pauses together (`callDeadline`,
    /// else `NIVIS_STORE_DEADLINE`). Counted from when the endpoint was first seen failing (by
    /// any client of the process), so once it has been down this long the calls that follow (a
    /// retry, the rescue's lock note, the audit record, the release) fail at once instead of
    /// each waiting as long again.
    pub(crate) deadline: Duration,
}

/// The default of [`Retry::deadline`]: about the 5 attempts of 5 s the book promises.
pub(crate) const DEFAULT_CALL_DEADLINE: Duration = Duration::from_secs(30);

/// A failure this recent counts as the same outage: a call right after one that gave up at the
/// deadline fails at once; a call later than this tries again.
const OUTAGE_MEMORY: Duration = Duration::from_secs(10);

/// How long the server has been failing: since the first failure of the outage, and the last.
#[derive(Debug, Clone, Copy)]
struct Outage {
    since: Instant,
    last: Instant,
}

impl Default for Retry {
    fn default() -> Retry {
        Retry {
            attempts: 5,
            first_pause: Duration::from_millis(200),
            max_pause: Duration::from_secs(2),
            timeout: DEFAULT_REQUEST_TIMEOUT,
            transfer_timeout: Duration::from_secs(60),
            deadline: DEFAULT_CALL_DEADLINE,
        }
    }
}

/// What a PUT or DELETE must find for it to happen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Condition<'a> {
    /// Unconditionally.
    Always,
    /// Only if no object exists under the key (`If-None-Match: *`).
    Absent,
    /// Only if the object's ETag is this one (`If-Match`).
    Matches(&'a str),
}

/// An object as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Object {
    pub body: Vec<u8>,
    pub(crate) etag: String,
}

/// A successful write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    pub(crate) etag: String,
    /// Attempts it took; above 1, an earlier attempt may have been applied too.
    pub(crate) attempts: u32,
}

/// One bucket on one endpoint, with credentials.
pub struct Client {
    agent: ureq::Agent,
    /// `scheme://authority`, bucket included for virtual-hosted style.
    origin: String,
    /// The Host header value (what ureq sends for `origin`).
    host: String,
    /// `/bucket` in path style, empty otherwise.
    base_path: String,
    /// The endpoint as users wrote it, for messages.
    shown: String,
    bucket: String,
    region: String,
    creds: Credentials,
    retry: Retry,
}

/// The outage under way at each endpoint (as shown), if its last attempt failed: shared by every
/// client of the process (the store's, its lock's, the audit log's, a later read), so that a
/// server down past the deadline costs the run one deadline, not one per client.
static OUTAGES: Mutex<Vec<(String, Outage)>> = Mutex::new(Vec::new());

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("endpoint", &self.shown)
            .field("bucket", &self.bucket)
            .finish_non_exhaustive()
    }
}

struct Reply {
    status: u16,
    etag: Option<String>,
    body: Vec<u8>,
    attempts: u32,
}

impl Client {
    /// A client for `target`; checks the endpoint URL, sends nothing.
    pub fn new(target: &Target, creds: Credentials, retry: Retry) -> Result<Client, S3Error> {
        let shown = target
            .endpoint
            .clone()
            .unwrap_or_else(|| format!("https://s3.{}.amazonaws.com", target.region));
        let uri: Uri = shown
            .parse()
            .map_err(|e| S3Error::Config(format!("backend endpoint {shown:?}: {e}")))?;
        let scheme = uri.scheme_str().unwrap_or("");
        let host = uri
            .host()
            .ok_or_else(|| S3Error::Config(format!("backend endpoint {shown:?} has no host")))?;
        let loopback = is_loopback(host);
        match scheme {
            "https" => {}
            "http" if loopback || target.allow_http => {}
            "http" => {
                return Err(S3Error::Config(format!(
                    "backend endpoint {shown}: plain http to a host that is not loopback would \
                     send the state unencrypted; use https (or set allowHttp = true)"
                )))
            }
            _ => {
                return Err(S3Error::Config(format!(
                    "backend endpoint {shown:?}: use an http(s):// URL"
                )))
            }
        }
        if !uri.path().trim_matches('/').is_empty() {
            return Err(S3Error::Config(format!(
                "backend endpoint {shown}: give the server only (scheme, host, port), no path"
            )));
        }
        let default_port = if scheme == "https" { 443 } else { 80 };
        let mut authority = host.to_string();
        if let Some(port) = uri.port_u16().filter(|p| *p != default_port) {
            authority = format!("{authority}:{port}");
        }
        let (host_header, base_path) = if target.path_style {
            (
                authority,
                format!("/{}", percent_encode(&target.bucket, true)),
            )
        } else {
            (format!("{}.{authority}", target.bucket), String::new())
        };
        let mut config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .user_agent(concat!("nivis/", env!("CARGO_PKG_VERSION")))
            .timeout_connect(Some(retry.timeout))
            .timeout_send_request(Some(retry.timeout))
            .timeout_recv_response(Some(retry.timeout))
            .timeout_global(Some(retry.transfer_timeout.max(retry.timeout)))
            .max_redirects(0)
            .tls_config(
                ureq::tls::TlsConfig::builder()
                    .root_certs(ureq::tls::RootCerts::PlatformVerifier)
                    .build(),
            );
        if loopback {
            config = config.proxy(None);
        }
        Ok(Client {
            agent: ureq::Agent::new_with_config(config.build()),
            origin: format!("{scheme}://{host_header}"),
            host: host_header,
            base_path,
            shown,
            bucket: target.bucket.clone(),
            region: target.region.clone(),
            creds,
            retry,
        })
    }

    /// The bucket.
    pub(crate) fn bucket(&self) -> &str {
        &self.bucket
    }

    /// Reads `key`; `Ok(None)` if there is no such object.
    pub fn get(&self, key: &str) -> Result<Option<Object>, S3Error> {
        let reply = self.send("GET", Some(key), &[], &[], &[])?;
        match reply.status {
            200 => Ok(Some(Object {
                etag: self.etag_of(&reply)?,
                body: reply.body,
            })),
            404 if error_code(&reply.body).as_deref() == Some("NoSuchKey") => Ok(None),
            _ => Err(self.failure(key, &reply)),
        }
    }

    /// Writes `body` to `key` if `condition` holds.
    pub fn put(
        &self,
        key: &str,
        body: &[u8],
        condition: Condition<'_>,
    ) -> Result<Written, S3Error> {
        let headers = condition_header(condition);
        let reply = self.send("PUT", Some(key), &[], &headers, body)?;
        match reply.status {
            200 => Ok(Written {
                etag: self.etag_of(&reply)?,
                attempts: reply.attempts,
            }),
            _ => Err(self.failure(key, &reply)),
        }
    }

    /// Deletes `key` if `condition` holds; deleting a missing object succeeds.
    pub fn delete(&self, key: &str, condition: Condition<'_>) -> Result<(), S3Error> {
        let headers = condition_header(condition);
        let reply = self.send("DELETE", Some(key), &[], &headers, &[])?;
        match reply.status {
            200 | 204 => Ok(()),
            404 if error_code(&reply.body).as_deref() == Some("NoSuchKey") => Ok(()),
            _ => Err(self.failure(key, &reply)),
        }
    }

    /// Every key starting with `prefix`, in S3's (lexicographic) order.
    pub fn list(&self, prefix: &str) -> Result<Vec<String>, S3Error> {
        let mut keys = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let mut query = vec![
                ("list-type", "2".to_string()),
                ("prefix", prefix.to_string()),
            ];
            if let Some(t) = &token {
                query.push(("continuation-token", t.clone()));
            }
            let reply = self.send("GET", None, &query, &[], &[])?;
            if reply.status != 200 {
                return Err(self.failure(prefix, &reply));
            }
            let page = xml::list_page(&reply.body).ok_or_else(|| S3Error::NotS3 {
                endpoint: self.shown.clone(),
                status: reply.status,
                detail: "a listing that is not a ListBucketResult".into(),
            })?;
            keys.extend(page.keys);
            match page.next {
                Some(next) if page.truncated => token = Some(next),
                _ => return Ok(keys),
            }
        }
    }

    /// Checks that the bucket exists and the credentials may list it, with one small request.
    /// (Some servers create a missing bucket on the first write instead of refusing it.)
    pub(crate) fn probe(&self, prefix: &str) -> Result<(), S3Error> {
        let query = [
            ("list-type", "2".to_string()),
            ("max-keys", "1".to_string()),
            ("prefix", prefix.to_string()),
        ];
        let reply = self.send("GET", None, &query, &[], &[])?;
        match reply.status {
            200 if xml::list_page(&reply.body).is_some() => Ok(()),
            200 => Err(S3Error::NotS3 {
                endpoint: self.shown.clone(),
                status: 200,
                detail: "a listing that is not a ListBucketResult".into(),
            }),
            _ => Err(self.failure(prefix, &reply)),
        }
    }

    fn etag_of(&self, reply: &Reply) -> Result<String, S3Error> {
        reply.etag.clone().ok_or_else(|| S3Error::NotS3 {
            endpoint: self.shown.clone(),
            status: reply.status,
            detail: "a success without an ETag header".into(),
        })
    }

    /// Sends one request, retrying outages; returns the first answer that is not one.
    fn send(
        &self,
        method: &str,
        key: Option<&str>,
        query: &[(&str, String)],
        headers: &[(&str, String)],
        body: &[u8],
    ) -> Result<Reply, S3Error> {
        let path = match key {
            Some(key) => format!("{}/{}", self.base_path, percent_encode(key, false)),
            None if self.base_path.is_empty() => "/".to_string(),
            None => self.base_path.clone(),
        };
        let query_string = sigv4::canonical_query(query);
        let url = if query_string.is_empty() {
            format!("{}{path}", self.origin)
        } else {
            format!("{}{path}?{query_string}", self.origin)
        };
        let payload = sigv4::payload_hash(body);
        let mut pause = self.retry.first_pause;
        let mut attempt = 0;
        if let Some(down) = self.past_deadline() {
            return Err(self.gave_up(down, 0));
        }
        loop {
            attempt += 1;
            let request = self.signed(method, &url, &path, query, headers, body, &payload)?;
            let agent = self.agent.clone();
            let outcome = interrupt::wait_for(move || perform(&agent, request))
                .map_err(|interrupt::Abandoned| self.abandoned(method, attempt))?;
            if outcome.is_err() {
                interrupt::give_up();
            }
            let failed = !matches!(&outcome, Ok(r) if !is_retried_status(r.status));
            let down = self.note_outcome(failed);
            let out_of_time = down.is_some_and(|d| d + pause >= self.retry.deadline);
            if out_of_time && attempt < self.retry.attempts.max(1) {
                return Err(self.gave_up(down.unwrap_or_default(), attempt));
            }
            // After Ctrl-C a failed attempt is not tried again: the run is stopping.
            let last = attempt >= self.retry.attempts.max(1) || interrupt::interrupted();
            match outcome {
                Ok(reply) if !is_retried_status(reply.status) || last => {
                    return match reply.status {
                        s if is_retried_status(s) => Err(S3Error::Server {
                            endpoint: self.shown.clone(),
                            status: s,
                            code: error_code(&reply.body).unwrap_or_default(),
                            attempts: attempt,
                        }),
                        _ => Ok(Reply {
                            attempts: attempt,
                            ..reply
                        }),
                    };
                }
                Err(detail) if last => {
                    return Err(S3Error::Unreachable {
                        endpoint: self.shown.clone(),
                        detail: detail.to_string(),
                        attempts: attempt,
                    })
                }
                Ok(_) | Err(_) => {
                    self.retrying(method, &url, attempt);
                    if interrupt::pause(pause) {
                        return Err(self.abandoned(method, attempt));
                    }
                    pause = (pause * 2).min(self.retry.max_pause);
                }
            }
        }
    }

    /// The request for one attempt, signed now (a signature is valid for minutes only).
    // Every part of a request is signed in one go, so each is an argument.
    #[allow(clippy::too_many_arguments, reason = "signed as one")]
    fn signed(
        &self,
        method: &str,
        url: &str,
        path: &str,
        query: &[(&str, String)],
        headers: &[(&str, String)],
        body: &[u8],
        payload: &str,
    ) -> Result<Request<Vec<u8>>, S3Error> {
        let signed = sigv4::sign(
            &self.creds,
            &self.region,
            &amz_date(SystemTime::now()),
            &sigv4::Request {
                method,
                host: &self.host,
                path,
                query,
                headers,
                payload_sha256: payload,
            },
        );
        let mut request = Request::builder().method(method).uri(url);
        for (k, v) in headers.iter().chain(signed.iter()) {
            request = request.header(*k, v);
        }
        request.body(body.to_vec()).map_err(|e| {
            S3Error::Config(format!("cannot build the S3 request {method} {url}: {e}"))
        })
    }

    /// Says that attempt `attempt` of a call failed and is retried: the first time as a warning
    /// that the run waits for the state store (not for a provider).
    fn retrying(&self, method: &str, url: &str, attempt: u32) {
        log::debug!("S3 {method} {url}: attempt {attempt} failed; retrying");
        if attempt == 1 {
            log::warn!(
                "waiting for the state store {}: {method} failed; retrying for up to {} s",
                self.shown,
                self.retry.deadline.as_secs()
            );
        }
    }

    /// Records whether the last attempt `failed`; returns how long the outage has lasted (none:
    /// the server answered).
    fn note_outcome(&self, failed: bool) -> Option<Duration> {
        let mut outages = OUTAGES.lock().unwrap_or_else(PoisonError::into_inner);
        let at = outages.iter().position(|(e, _)| *e == self.shown);
        if !failed {
            if let Some(at) = at {
                outages.swap_remove(at);
            }
            return None;
        }
        let now = Instant::now();
        let since = at.map_or(now, |at| outages[at].1.since);
        let outage = Outage { since, last: now };
        match at {
            Some(at) => outages[at].1 = outage,
            None => outages.push((self.shown.clone(), outage)),
        }
        Some(now - since)
    }

    /// How long the server has been failing, when that is past the deadline and its last
    /// failure is recent: the call is not tried.
    fn past_deadline(&self) -> Option<Duration> {
        let outages = OUTAGES.lock().unwrap_or_else(PoisonError::into_inner);
        let o = outages.iter().find(|(e, _)| *e == self.shown)?.1;
        let down = o.since.elapsed();
        (down >= self.retry.deadline && o.last.elapsed() < OUTAGE_MEMORY).then_some(down)
    }

    /// The error for a call given up at the deadline, `down` into the outage.
    fn gave_up(&self, down: Duration, attempts: u32) -> S3Error {
        S3Error::Unreachable {
            endpoint: self.shown.clone(),
            detail: format!(
                "no answer for {} s, past the deadline of a state store call ({} s; the backend \
                 field callDeadline or NIVIS_STORE_DEADLINE sets it)",
                down.as_secs(),
                self.retry.deadline.as_secs()
            ),
            attempts,
        }
    }

    /// The error for a request given up after Ctrl-C.
    fn abandoned(&self, method: &str, attempts: u32) -> S3Error {
        S3Error::Interrupted {
            endpoint: self.shown.clone(),
            method: method.to_string(),
            attempts,
        }
    }

    /// The error for an answer that is not the success expected.
    fn failure(&self, key: &str, reply: &Reply) -> S3Error {
        let endpoint = self.shown.clone();
        let Some(err) = xml::error_document(&reply.body) else {
            let snippet: String = String::from_utf8_lossy(&reply.body)
                .chars()
                .take(80)
                .collect::<String>()
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ");
            let detail = if snippet.is_empty() {
                "no S3 error document".to_string()
            } else {
                format!("no S3 error document but {snippet:?}")
            };
            return match reply.status {
                412 => S3Error::PreconditionFailed {
                    key: key.to_string(),
                    attempts: reply.attempts,
                },
                status => S3Error::NotS3 {
                    endpoint,
                    status,
                    detail,
                },
            };
        };
        match (reply.status, err.code.as_str()) {
            (412, _) | (409, "ConditionalRequestConflict") => S3Error::PreconditionFailed {
                key: key.to_string(),
                attempts: reply.attempts,
            },
            (_, "NoSuchBucket") => S3Error::NoSuchBucket {
                endpoint,
                bucket: self.bucket.clone(),
            },
            (
                _,
                "InvalidAccessKeyId"
                | "SignatureDoesNotMatch"
                | "ExpiredToken"
                | "InvalidToken"
                | "TokenRefreshRequired"
                | "AuthorizationHeaderMalformed",
            ) => S3Error::Credentials {
                endpoint,
                code: err.code,
                source: self.creds.source.clone(),
            },
            (_, "AccessDenied") => S3Error::AccessDenied {
                bucket: self.bucket.clone(),
                key: key.to_string(),
                source: self.creds.source.clone(),
            },
            (status, _) => S3Error::Refused {
                endpoint,
                status,
                code: err.code,
                message: err.message,
            },
        }
    }
}

/// Sends one signed request and reads its answer (on a thread of its own, see `interrupt`).
fn perform(agent: &ureq::Agent, request: Request<Vec<u8>>) -> Result<Reply, ureq::Error> {
    let bodiless = request.body().is_empty() && request.method() != "PUT";
    let sent = if bodiless {
        let (parts, _) = request.into_parts();
        agent.run(Request::from_parts(parts, ()))
    } else {
        agent.run(request)
    };
    let mut response = sent?;
    let status = response.status().as_u16();
    let etag = response
        .headers()
        .get("etag")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let body = response
        .body_mut()
        .with_config()
        .limit(BODY_LIMIT)
        .read_to_vec()?;
    Ok(Reply {
        status,
        etag,
        body,
        attempts: 1,
    })
}

fn condition_header(condition: Condition<'_>) -> Vec<(&'static str, String)> {
    match condition {
        Condition::Always => Vec::new(),
        Condition::Absent => vec![("if-none-match", "*".to_string())],
        Condition::Matches(etag) => vec![("if-match", etag.to_string())],
    }
}

fn is_retried_status(status: u16) -> bool {
    status == 429 || (500..600).contains(&status)
}

fn error_code(body: &[u8]) -> Option<String> {
    xml::error_document(body).map(|e| e.code)
}

fn is_loopback(host: &str) -> bool {
    let host = host.trim_matches(['[', ']']);
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// `YYYYMMDDTHHMMSSZ` for `t`.
fn amz_date(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    crate::state::holder::format_utc(secs).replace(['-', ':'], "")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn creds() -> Credentials {
        Credentials {
            access_key: "AK".into(),
            secret_key: "SK".into(),
            session_token: None,
            source: "test".into(),
        }
    }

    fn target(endpoint: Option<&str>, path_style: bool) -> Target {
        Target {
            endpoint: endpoint.map(str::to_string),
            bucket: "my-bucket".into(),
            region: "eu-west-1".into(),
            path_style,
            allow_http: false,
        }
    }

    #[test]
    fn builds_urls_for_both_styles() {
        let c = Client::new(&target(None, false), creds(), Retry::default()).unwrap();
        assert_eq!(c.origin, "https://my-bucket.s3.eu-west-1.amazonaws.com");
        assert_eq!(c.base_path, "");
        let c = Client::new(
            &target(Some("http://127.0.0.1:9000"), true),
            creds(),
            Retry::default(),
        )
        .unwrap();
        assert_eq!(
            (c.origin.as_str(), c.host.as_str()),
            ("http://127.0.0.1:9000", "127.0.0.1:9000")
        );
        assert_eq!(c.base_path, "/my-bucket");
        let c = Client::new(
            &target(Some("https://minio.example:443"), true),
            creds(),
            Retry::default(),
        )
        .unwrap();
        assert_eq!(
            c.host, "minio.example",
            "the default port is not part of Host"
        );
    }

    #[test]
    fn refuses_plain_http_to_remote_hosts_and_paths() {
        let err = Client::new(
            &target(Some("http://minio.example:9000"), true),
            creds(),
            Retry::default(),
        )
        .unwrap_err();
        assert!(err.to_string().contains("use https"), "{err}");
        let mut allowed = target(Some("http://minio.example:9000"), true);
        allowed.allow_http = true;
        assert!(Client::new(&allowed, creds(), Retry::default()).is_ok());
        let err = Client::new(
            &target(Some("https://h/base"), true),
            creds(),
            Retry::default(),
        )
        .unwrap_err();
        assert!(err.to_string().contains("no path"), "{err}");
    }

    #[test]
    fn formats_amz_dates() {
        let t = UNIX_EPOCH + Duration::from_secs(1_369_353_600);
        assert_eq!(amz_date(t), "20130524T000000Z");
    }

    #[test]
    fn a_call_gives_up_at_its_deadline_and_the_next_one_at_once() {
        // A server that accepts connections and never answers: a hung one.
        let hung = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = hung.local_addr().unwrap().port();
        let retry = Retry {
            attempts: 20,
            first_pause: Duration::from_millis(10),
            max_pause: Duration::from_millis(20),
            timeout: Duration::from_millis(300),
            transfer_timeout: Duration::from_secs(5),
            deadline: Duration::from_secs(1),
        };
        let c = Client::new(
            &target(Some(&format!("http://127.0.0.1:{port}")), true),
            creds(),
            retry,
        )
        .unwrap();
        let started = Instant::now();
        let err = c.get("k").unwrap_err();
        let took = started.elapsed();
        assert!(took < Duration::from_millis(1800), "{took:?}: {err}");
        assert!(err.to_string().contains("callDeadline"), "{err}");
        let again = Instant::now();
        let err = c.get("k").unwrap_err();
        assert!(again.elapsed() < Duration::from_millis(50), "{err}");
        assert!(
            matches!(err, S3Error::Unreachable { attempts: 0, .. }),
            "{err:?}"
        );
        drop(hung);
    }

    #[test]
    fn unreachable_endpoints_fail_after_the_bounded_retries() {
        // A port nobody listens on: bind, note the port, close.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let retry = Retry {
            attempts: 3,
            first_pause: Duration::from_millis(10),
            max_pause: Duration::from_millis(20),
            timeout: Duration::from_secs(5),
            transfer_timeout: Duration::from_secs(5),
            deadline: DEFAULT_CALL_DEADLINE,
        };
        let c = Client::new(
            &target(Some(&format!("http://127.0.0.1:{port}")), true),
            creds(),
            retry,
        )
        .unwrap();
        let err = c.get("k").unwrap_err();
        let S3Error::Unreachable { attempts, .. } = &err else {
            panic!("{err:?}")
        };
        assert_eq!(*attempts, 3);
        assert!(err.is_outage());
        assert!(
            err.to_string().contains("cannot reach the S3 endpoint"),
            "{err}"
        );
    }
}
