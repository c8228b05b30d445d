//! The one place provider installation touches the network: blocking HTTP GETs with `ureq`.
//!
//! Owns the URL policy (https only; plain http only to a loopback host and only when the
//! caller allows it, for tests and local registries), proxies (from the usual environment
//! variables; never for loopback hosts), timeouts, size limits, 404-as-absent, and relative
//! URL resolution. Does not know any protocol document: the registry and network mirror
//! modules parse what it fetches.

use std::io::{self, Read, Write};
use std::path::Path;
use std::time::Duration;

use sha2::{Digest, Sha256};
use ureq::http::Uri;
use ureq::ResponseExt;

use super::credentials::Credentials;
use super::error::InstallError;

/// Sent as `X-Terraform-Version`: the core version OpenTofu reports to providers.
const TERRAFORM_VERSION: &str = "1.13.0";

/// Limit for JSON documents and checksum files.
pub(crate) const SMALL_LIMIT: u64 = 16 * 1024 * 1024;

/// A blocking HTTP client with Nivis's URL policy.
pub(crate) struct Http {
    proxied: ureq::Agent,
    direct: ureq::Agent,
    insecure_loopback: bool,
    credentials: Credentials,
}

impl Http {
    /// A client; `insecure_loopback` allows `http://` URLs whose host is a loopback address.
    pub(crate) fn new(insecure_loopback: bool) -> Http {
        let base = || {
            ureq::Agent::config_builder()
                .http_status_as_error(false)
                .user_agent(concat!("nivis/", env!("CARGO_PKG_VERSION")))
                .timeout_connect(Some(Duration::from_secs(30)))
                .timeout_recv_response(Some(Duration::from_secs(120)))
                .timeout_per_read(Some(Duration::from_secs(120)))
                .max_redirects(10)
        };
        Http {
            proxied: ureq::Agent::new_with_config(base().https_only(true).build()),
            direct: ureq::Agent::new_with_config(base().proxy(None).build()),
            insecure_loopback,
            credentials: Credentials::from_environment(),
        }
    }

    fn check(&self, url: &str) -> Result<(Uri, bool), InstallError> {
        let uri: Uri = url.parse().map_err(|e| InstallError::Network {
            url: url.to_string(),
            detail: format!("invalid URL: {e}"),
        })?;
        let host = uri.host().unwrap_or("");
        let loopback =
            super::address::host_is_loopback(host) || host.trim_matches(['[', ']']) == "::1";
        match uri.scheme_str() {
            Some("https") => Ok((uri, loopback)),
            Some("http") if loopback && self.insecure_loopback => Ok((uri, true)),
            Some("http") => Err(InstallError::Network {
                url: url.to_string(),
                detail: if loopback {
                    "plain http is only used for a loopback host when insecure http is allowed \
                     (NIVIS_REGISTRY_INSECURE_HTTP=1)"
                        .into()
                } else {
                    "only https URLs are used".into()
                },
            }),
            _ => Err(InstallError::Network {
                url: url.to_string(),
                detail: "only https URLs are used".into(),
            }),
        }
    }

    /// GET; `Ok(None)` on 404 (and 410). Returns the final URL after redirects.
    fn get(&self, url: &str) -> Result<Option<(String, ureq::Body)>, InstallError> {
        let (uri, loopback) = self.check(url)?;
        let agent = if loopback {
            &self.direct
        } else {
            &self.proxied
        };
        let token = uri
            .host()
            .and_then(|h| self.credentials.token_for(h, uri.port_u16()));
        let mut request = agent
            .get(uri.clone())
            .header("X-Terraform-Version", TERRAFORM_VERSION);
        // Only to the host the token is for: ureq drops it on any redirect (its default).
        if let Some(token) = token {
            request = request.header("Authorization", format!("Bearer {token}"));
        }
        let resp = request.call().map_err(|e| InstallError::Network {
            url: url.to_string(),
            detail: e.to_string(),
        })?;
        let status = resp.status().as_u16();
        let final_url = resp.get_uri().to_string();
        let (_, mut body) = resp.into_parts();
        match status {
            200..=299 => Ok(Some((final_url, body))),
            404 | 410 => Ok(None),
            401 | 403 => Err(InstallError::BadResponse {
                url: url.to_string(),
                detail: format!(
                    "HTTP status {status}: the server wants credentials{}; set {} or add the host to ~/.terraform.d/credentials.tfrc.json",
                    if token.is_some() { " and refused the token it was given" } else { "" },
                    Credentials::env_var_for(uri.host().unwrap_or("host")),
                ),
            }),
            s => {
                let text = body
                    .with_config()
                    .limit(4096)
                    .read_to_string()
                    .unwrap_or_default();
                Err(InstallError::BadResponse {
                    url: url.to_string(),
                    detail: format!("HTTP status {s}: {}", text.trim()),
                })
            }
        }
    }

    /// GET a small document; `Ok(None)` on 404.
    pub(crate) fn get_bytes(
        &self,
        url: &str,
        limit: u64,
    ) -> Result<Option<(String, Vec<u8>)>, InstallError> {
        let Some((final_url, body)) = self.get(url)? else {
            return Ok(None);
        };
        let bytes = read_limited(body.into_reader(), limit).map_err(|e| InstallError::Network {
            url: url.to_string(),
            detail: format!("reading the answer: {e}"),
        })?;
        Ok(Some((final_url, bytes)))
    }

    /// GET a JSON document; `Ok(None)` on 404.
    pub(crate) fn get_json<T: serde::de::DeserializeOwned>(
        &self,
        url: &str,
    ) -> Result<Option<(String, T)>, InstallError> {
        let Some((final_url, bytes)) = self.get_bytes(url, SMALL_LIMIT)? else {
            return Ok(None);
        };
        let value = serde_json::from_slice(&bytes).map_err(|e| InstallError::BadResponse {
            url: url.to_string(),
            detail: format!("invalid JSON document: {e}"),
        })?;
        Ok(Some((final_url, value)))
    }

    /// Streams `url` into a new file `dest`, stopping after `max` bytes (more is reported as a
    /// size of `max + 1`). Returns the size and sha256 of what was written; `Ok(None)` on 404.
    pub(crate) fn download(
        &self,
        url: &str,
        dest: &Path,
        max: u64,
    ) -> Result<Option<(u64, [u8; 32])>, InstallError> {
        let Some((_, body)) = self.get(url)? else {
            return Ok(None);
        };
        let mut reader = body.into_reader().take(max + 1);
        let mut file = std::fs::File::create(dest)
            .map_err(|e| InstallError::io(dest, "create download file", e))?;
        let mut sha = Sha256::new();
        let mut buf = vec![0u8; 256 * 1024];
        let mut total = 0u64;
        loop {
            let n = reader.read(&mut buf).map_err(|e| InstallError::Network {
                url: url.to_string(),
                detail: format!("download interrupted: {e}"),
            })?;
            if n == 0 {
                break;
            }
            sha.update(&buf[..n]);
            file.write_all(&buf[..n])
                .map_err(|e| InstallError::io(dest, "write download file", e))?;
            total += n as u64;
        }
        file.sync_all()
            .map_err(|e| InstallError::io(dest, "write download file", e))?;
        Ok(Some((total, sha.finalize().into())))
    }
}

/// Reads at most `limit` bytes of `r`; more is an error.
pub(crate) fn read_limited(r: impl Read, limit: u64) -> io::Result<Vec<u8>> {
    let mut buf = Vec::new();
    r.take(limit + 1).read_to_end(&mut buf)?;
    if buf.len() as u64 > limit {
        return Err(io::Error::other(format!("more than {limit} bytes")));
    }
    Ok(buf)
}

/// A base URL that has no `scheme://`, so nothing can be resolved against it.
#[derive(Debug)]
pub(crate) struct RelativeBase {
    /// The base URL as given.
    base: String,
}

impl std::fmt::Display for RelativeBase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "base URL {:?} is not absolute", self.base)
    }
}

impl std::error::Error for RelativeBase {}

/// Resolves `reference` against `base` (RFC 3986 §5.2, without query merging subtleties that
/// registries do not use).
pub(crate) fn resolve(base: &str, reference: &str) -> Result<String, RelativeBase> {
    if let Some((scheme, _)) = reference.split_once("://") {
        if scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
        {
            return Ok(reference.to_string());
        }
    }
    let (scheme, rest) = base
        .split_once("://")
        .ok_or_else(|| RelativeBase { base: base.into() })?;
    if let Some(r) = reference.strip_prefix("//") {
        return Ok(format!("{scheme}://{r}"));
    }
    let (authority, path_and_query) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let base_path = path_and_query.split(['?', '#']).next().unwrap_or("/");
    if reference.is_empty() {
        return Ok(base.to_string());
    }
    let (ref_path, ref_tail) = match reference.find(['?', '#']) {
        Some(i) => (&reference[..i], &reference[i..]),
        None => (reference, ""),
    };
    let merged = if ref_path.starts_with('/') {
        ref_path.to_string()
    } else if ref_path.is_empty() {
        base_path.to_string()
    } else {
        let dir = &base_path[..=base_path.rfind('/').unwrap_or(0)];
        format!("{dir}{ref_path}")
    };
    Ok(format!(
        "{scheme}://{authority}{}{ref_tail}",
        remove_dot_segments(&merged)
    ))
}

fn remove_dot_segments(path: &str) -> String {
    let mut out: Vec<&str> = Vec::new();
    let segments: Vec<&str> = path.split('/').collect();
    let last = segments.len().saturating_sub(1);
    for (i, seg) in segments.iter().enumerate() {
        match *seg {
            "." => {
                if i == last {
                    out.push("");
                }
            }
            ".." => {
                if out.len() > 1 {
                    out.pop();
                }
                if i == last {
                    out.push("");
                }
            }
            s => out.push(s),
        }
    }
    let joined = out.join("/");
    if joined.starts_with('/') {
        joined
    } else {
        format!("/{joined}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_urls() {
        let b = "https://h.example/.well-known/terraform.json";
        assert_eq!(
            resolve(b, "/v1/providers/").unwrap(),
            "https://h.example/v1/providers/"
        );
        assert_eq!(
            resolve(b, "v1/").unwrap(),
            "https://h.example/.well-known/v1/"
        );
        assert_eq!(resolve(b, "../v1/").unwrap(), "https://h.example/v1/");
        assert_eq!(
            resolve(b, "https://o.example/x").unwrap(),
            "https://o.example/x"
        );
        assert_eq!(resolve(b, "//o.example/x").unwrap(), "https://o.example/x");
        let j = "http://127.0.0.1:9/m/h/ns/t/2.0.0.json";
        assert_eq!(
            resolve(j, "terraform-provider-t_2.0.0_linux_amd64.zip").unwrap(),
            "http://127.0.0.1:9/m/h/ns/t/terraform-provider-t_2.0.0_linux_amd64.zip"
        );
        assert_eq!(
            resolve("https://a/b/c?q=1", "d?x").unwrap(),
            "https://a/b/d?x"
        );
    }

    #[test]
    fn url_policy() {
        let strict = Http::new(false);
        assert!(strict.check("https://registry.opentofu.org/x").is_ok());
        assert!(strict.check("http://registry.opentofu.org/x").is_err());
        assert!(strict.check("http://127.0.0.1:8/x").is_err());
        let loose = Http::new(true);
        assert!(loose.check("http://127.0.0.1:8/x").is_ok());
        assert!(loose.check("http://localhost:8/x").is_ok());
        assert!(loose.check("http://10.0.0.1/x").is_err());
        assert!(loose.check("ftp://127.0.0.1/x").is_err());
    }
}
