//! Bearer tokens for private registries and network mirrors, found where OpenTofu and Terraform
//! look: `TF_TOKEN_<host>` environment variables (dots written as `_`, hyphens as `__`, e.g.
//! `TF_TOKEN_registry_example_com`), then `~/.terraform.d/credentials.tfrc.json`
//! (`{"credentials": {"host[:port]": {"token": "…"}}}`, as `tofu login` writes it).
//!
//! Owns: finding a token for a host. Not: sending it (`http` adds it to requests for that exact
//! host only, and never forwards it across a redirect) nor HCL CLI configuration files.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Environment variables holding tokens start with this; the host follows, encoded.
const ENV_PREFIX: &str = "TF_TOKEN_";

/// Tokens by lower-case host (with `:port` when the credentials file names one).
#[derive(Default)]
pub(crate) struct Credentials {
    tokens: HashMap<String, String>,
}

impl Credentials {
    /// From the process environment and the user's credentials file.
    pub(crate) fn from_environment() -> Credentials {
        let file = std::env::var_os("HOME")
            .map(|home| PathBuf::from(home).join(".terraform.d/credentials.tfrc.json"));
        // vars_os: std::env::vars panics on a variable that is not UTF-8.
        let vars = std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)));
        Credentials::from_sources(vars, file.as_deref())
    }

    fn from_sources(vars: impl Iterator<Item = (String, String)>, file: Option<&Path>) -> Self {
        let mut tokens = HashMap::new();
        if let Some(text) = file.and_then(|f| std::fs::read_to_string(f).ok()) {
            match serde_json::from_str::<serde_json::Value>(&text) {
                Ok(doc) => {
                    if let Some(hosts) = doc["credentials"].as_object() {
                        for (host, entry) in hosts {
                            if let Some(token) = entry["token"].as_str() {
                                tokens.insert(host.to_ascii_lowercase(), token.to_string());
                            }
                        }
                    }
                }
                Err(e) => log::warn!(
                    "ignoring {}: not valid JSON ({e})",
                    file.map(Path::display)
                        .map(|d| d.to_string())
                        .unwrap_or_default()
                ),
            }
        }
        // The environment wins over the file, as in OpenTofu.
        for (name, token) in vars {
            if let Some(encoded) = name.strip_prefix(ENV_PREFIX) {
                if !encoded.is_empty() && !token.is_empty() {
                    let host = encoded.replace("__", "-").replace('_', ".");
                    tokens.insert(host.to_ascii_lowercase(), token);
                }
            }
        }
        Credentials { tokens }
    }

    /// The environment variable that holds the token for `host`: `TF_TOKEN_registry_example_com`.
    pub(crate) fn env_var_for(host: &str) -> String {
        format!("{ENV_PREFIX}{}", host.replace('-', "__").replace('.', "_"))
    }

    /// The token for `host` (and `port`, if the URL has one): `host:port` first, then `host`.
    pub(crate) fn token_for(&self, host: &str, port: Option<u16>) -> Option<&str> {
        let host = host.trim_matches(['[', ']']).to_ascii_lowercase();
        port.and_then(|p| self.tokens.get(&format!("{host}:{p}")))
            .or_else(|| self.tokens.get(&host))
            .map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn environment_names_decode_and_win_over_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("credentials.tfrc.json");
        std::fs::write(
            &file,
            r#"{"credentials": {"registry.example.com": {"token": "from-file"},
                                 "mirror.example.com:8443": {"token": "with-port"},
                                 "other.example.com": {"token": "other"}}}"#,
        )
        .unwrap();
        let vars = [
            ("TF_TOKEN_registry_example_com", "from-env"),
            ("TF_TOKEN_my__registry_example_com", "hyphen"),
            ("TF_TOKEN_", "ignored"),
            ("PATH", "/bin"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()));
        let c = Credentials::from_sources(vars.into_iter(), Some(&file));
        assert_eq!(c.token_for("registry.example.com", None), Some("from-env"));
        assert_eq!(
            c.token_for("REGISTRY.example.com", Some(443)),
            Some("from-env")
        );
        assert_eq!(c.token_for("my-registry.example.com", None), Some("hyphen"));
        assert_eq!(
            c.token_for("mirror.example.com", Some(8443)),
            Some("with-port")
        );
        assert_eq!(c.token_for("mirror.example.com", None), None);
        assert_eq!(c.token_for("other.example.com", None), Some("other"));
        assert_eq!(c.token_for("example.com", None), None);
        assert_eq!(
            Credentials::env_var_for("my-registry.example.com"),
            "TF_TOKEN_my__registry_example_com"
        );
    }
}
