//! The S3 backend's configuration: the fields of `nivis.backend` (after CLI overrides), checked,
//! with the environment applied to the key.
//!
//! Owns: field names, defaults and their validation; the environment's key; making a client and
//! a cipher. Not: reading the flake or the flags (see `state::backend`).

use std::path::PathBuf;

use serde_json::{Map, Value as Json};

use super::client::{Client, Retry, Target};
use super::crypt::{Cipher, KeySource};
use super::sigv4::Credentials;
use super::RemoteError;
use crate::secrets::Redactor;
use crate::state::StateError;

/// The environment whose state is the backend's `key` itself.
pub(crate) const DEFAULT_ENV: &str = "default";

/// Why the fields of an `s3` backend (or an environment name) cannot work.
#[derive(Debug, Clone, PartialEq)]
pub enum ConfigError {
    /// A field this backend type does not have (a typo?).
    UnknownField {
        /// The field as given.
        field: String,
    },
    /// A text field holding something else.
    NotText {
        /// The field.
        field: String,
        /// What it holds.
        found: Json,
    },
    /// A flag holding something other than `true` or `false`.
    NotAFlag {
        /// The field.
        field: String,
        /// What it holds.
        found: Json,
    },
    /// A required field is missing.
    Missing {
        /// The field.
        field: &'static str,
    },
    /// A bucket name S3 would refuse.
    BadBucket {
        /// The bucket as given.
        bucket: String,
    },
    /// An object key that is not relative (leading or trailing `/`, or `//`).
    BadKey {
        /// The key as given.
        key: String,
    },
    /// Both `encryptionKeyEnv` and `encryptionKeyFile` are given.
    TwoKeySources,
    /// `maxAttempts` outside 1 to 20.
    BadMaxAttempts {
        /// What it holds.
        found: Json,
    },
    /// `requestTimeout` outside 1 to 600 seconds.
    BadRequestTimeout {
        /// What it holds.
        found: Json,
    },
    /// `callDeadline` (or `NIVIS_STORE_DEADLINE`) outside 1 to 3600 seconds.
    BadCallDeadline {
        /// What it holds.
        found: Json,
    },
    /// An `envKeyPrefix` with a `/`.
    BadEnvPrefix {
        /// The prefix as given.
        prefix: String,
    },
    /// An environment name that could leave its directory or key prefix.
    BadEnvName {
        /// The name as given.
        env: String,
    },
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConfigError::UnknownField { field } => write!(
                f,
                "backend field {field:?} is not known for type \"s3\" (known: {})",
                FIELDS[1..].join(", ")
            ),
            ConfigError::NotText { field, found } => write!(
                f,
                "backend field {field} must be a non-empty string, not {found}"
            ),
            ConfigError::NotAFlag { field, found } => {
                write!(
                    f,
                    "backend field {field} must be true or false, not {found}"
                )
            }
            ConfigError::Missing { field } => write!(f, "the s3 backend needs `{field}`"),
            ConfigError::BadBucket { bucket } => write!(
                f,
                "backend bucket {bucket:?}: S3 bucket names have 3 to 63 characters"
            ),
            ConfigError::BadKey { key } => write!(
                f,
                "backend key {key:?}: use a relative object key like prod/nivis.state"
            ),
            ConfigError::TwoKeySources => {
                f.write_str("give encryptionKeyEnv or encryptionKeyFile, not both")
            }
            ConfigError::BadMaxAttempts { found } => {
                write!(f, "backend field maxAttempts must be 1 to 20, not {found}")
            }
            ConfigError::BadRequestTimeout { found } => write!(
                f,
                "backend field requestTimeout must be 1 to 600 (seconds), not {found}"
            ),
            ConfigError::BadCallDeadline { found } => write!(
                f,
                "backend field callDeadline (or NIVIS_STORE_DEADLINE) must be 1 to 3600 \
                 (seconds), not {found}"
            ),
            ConfigError::BadEnvPrefix { prefix } => {
                write!(f, "backend envKeyPrefix {prefix:?} must not contain '/'")
            }
            ConfigError::BadEnvName { env } => write!(
                f,
                "environment {env:?}: use up to 64 letters, digits, '-', '_' or '.'"
            ),
        }
    }
}

impl std::error::Error for ConfigError {}

/// A configured S3 backend for one environment.
#[derive(Debug, Clone)]
pub struct S3Backend {
    /// The bucket, endpoint and region the state is kept in.
    pub(crate) target: Target,
    /// `key` as configured (the default environment's state).
    pub(crate) base_key: String,
    /// `envKeyPrefix` (default `env:`, as OpenTofu's `workspace_key_prefix`).
    pub(crate) env_prefix: String,
    /// The selected environment.
    pub(crate) env: String,
    /// `profile`: a profile of the shared credentials file (else the environment's keys).
    pub(crate) profile: Option<String>,
    /// `encryptionKeyEnv` / `encryptionKeyFile`.
    pub(crate) encryption: Option<KeySource>,
    /// How often and how long a failed request is tried again.
    pub(crate) retry: Retry,
    /// The run's secrets: the credentials and the encryption key are taught to it as they are
    /// read. Not part of the configuration (equality ignores it).
    pub(crate) redactor: Redactor,
}

impl PartialEq for S3Backend {
    fn eq(&self, other: &S3Backend) -> bool {
        // Every field but the redactor, which says nothing about where the state is.
        let S3Backend {
            target,
            base_key,
            env_prefix,
            env,
            profile,
            encryption,
            retry,
            redactor: _,
        } = self;
        *target == other.target
            && *base_key == other.base_key
            && *env_prefix == other.env_prefix
            && *env == other.env
            && *profile == other.profile
            && *encryption == other.encryption
            && *retry == other.retry
    }
}

impl Eq for S3Backend {}

/// The fields `type = "s3"` accepts.
pub(crate) const FIELDS: &[&str] = &[
    "type",
    "bucket",
    "key",
    "region",
    "endpoint",
    "usePathStyle",
    "envKeyPrefix",
    "profile",
    "encryptionKeyEnv",
    "encryptionKeyFile",
    "allowHttp",
    "maxAttempts",
    "requestTimeout",
    "callDeadline",
];

impl S3Backend {
    /// Reads the fields of an `s3` backend for environment `env`, for the run whose secrets
    /// `redactor` knows.
    // Long because it reads one backend field after another, each with its own check and message, a
    // table in one place.
    pub fn from_fields(
        fields: &Map<String, Json>,
        env: &str,
        redactor: &Redactor,
    ) -> Result<S3Backend, ConfigError> {
        if let Some(unknown) = fields.keys().find(|k| !FIELDS.contains(&k.as_str())) {
            return Err(ConfigError::UnknownField {
                field: unknown.clone(),
            });
        }
        let text = |name: &str| -> Result<Option<String>, ConfigError> {
            match fields.get(name) {
                None | Some(Json::Null) => Ok(None),
                Some(Json::String(s)) if !s.is_empty() => Ok(Some(s.clone())),
                Some(other) => Err(ConfigError::NotText {
                    field: name.to_string(),
                    found: other.clone(),
                }),
            }
        };
        let flag = |name: &str| -> Result<bool, ConfigError> {
            match fields.get(name) {
                None | Some(Json::Null) => Ok(false),
                Some(Json::Bool(b)) => Ok(*b),
                Some(other) => Err(ConfigError::NotAFlag {
                    field: name.to_string(),
                    found: other.clone(),
                }),
            }
        };
        let required = |field: &'static str| text(field)?.ok_or(ConfigError::Missing { field });
        let bucket = required("bucket")?;
        if !(3..=63).contains(&bucket.len()) {
            return Err(ConfigError::BadBucket { bucket });
        }
        let key = required("key")?;
        if key.starts_with('/') || key.ends_with('/') || key.contains("//") {
            return Err(ConfigError::BadKey { key });
        }
        let region = text("region")?
            .or_else(|| std::env::var("AWS_REGION").ok().filter(|r| !r.is_empty()))
            .or_else(|| {
                std::env::var("AWS_DEFAULT_REGION")
                    .ok()
                    .filter(|r| !r.is_empty())
            })
            .unwrap_or_else(|| "us-east-1".into());
        let encryption = match (text("encryptionKeyEnv")?, text("encryptionKeyFile")?) {
            (Some(_), Some(_)) => return Err(ConfigError::TwoKeySources),
            (Some(var), None) => Some(KeySource::Env(var)),
            (None, Some(file)) => Some(KeySource::File(file.into())),
            (None, None) => None,
        };
        let mut retry = Retry::default();
        match fields.get("maxAttempts") {
            None | Some(Json::Null) => {}
            Some(n) => match n.as_u64() {
                Some(n @ 1..=20) => retry.attempts = n as u32,
                _ => return Err(ConfigError::BadMaxAttempts { found: n.clone() }),
            },
        }
        match fields.get("requestTimeout") {
            None | Some(Json::Null) => {}
            Some(n) => match n.as_u64() {
                Some(n @ 1..=600) => retry.timeout = std::time::Duration::from_secs(n),
                _ => return Err(ConfigError::BadRequestTimeout { found: n.clone() }),
            },
        }
        let env_deadline = std::env::var("NIVIS_STORE_DEADLINE")
            .ok()
            .filter(|v| !v.is_empty())
            .map(|v| serde_json::from_str(&v).unwrap_or(Json::String(v)));
        match fields.get("callDeadline").cloned().or(env_deadline) {
            None | Some(Json::Null) => {}
            Some(n) => match n.as_u64() {
                Some(n @ 1..=3600) => retry.deadline = std::time::Duration::from_secs(n),
                _ => return Err(ConfigError::BadCallDeadline { found: n }),
            },
        }
        let env_prefix = text("envKeyPrefix")?.unwrap_or_else(|| "env:".into());
        if env_prefix.contains('/') {
            return Err(ConfigError::BadEnvPrefix { prefix: env_prefix });
        }
        check_env_name(env)?;
        Ok(S3Backend {
            target: Target {
                endpoint: text("endpoint")?,
                bucket,
                region,
                path_style: flag("usePathStyle")?,
                allow_http: flag("allowHttp")?,
            },
            base_key: key,
            env_prefix,
            env: env.to_string(),
            profile: text("profile")?,
            encryption,
            redactor: redactor.clone(),
            retry,
        })
    }

    /// The object key of the selected environment's state.
    pub(crate) fn key(&self) -> String {
        if self.env == DEFAULT_ENV {
            self.base_key.clone()
        } else {
            format!("{}/{}/{}", self.env_prefix, self.env, self.base_key)
        }
    }

    /// `s3://bucket/key` of the selected environment's state.
    pub(crate) fn url(&self) -> String {
        format!("s3://{}/{}", self.target.bucket, self.key())
    }

    /// Where this machine keeps the results a run could not record in this state (the rescue
    /// file, see `state::rescue`): `$NIVIS_RESCUE_DIR`, else `$XDG_STATE_HOME/nivis/rescue`
    /// (default `~/.local/state/nivis/rescue`), outside any project directory so that a `path:`
    /// flake never copies it into the Nix store. One file per state (endpoint, bucket and key),
    /// named readably after the key. Per remote state rather than per project directory: any
    /// run of this machine against the state (another checkout, another directory) must find
    /// and record it first.
    pub(crate) fn rescue_path(&self) -> Result<PathBuf, StateError> {
        let dir = match std::env::var_os("NIVIS_RESCUE_DIR").filter(|v| !v.is_empty()) {
            Some(dir) => PathBuf::from(dir),
            None => crate::xdg::state_home()
                .map_err(|_| {
                    RemoteError::Invalid(
                        "cannot find a place for the S3 rescue file of this machine: set \
                         XDG_STATE_HOME, HOME or NIVIS_RESCUE_DIR"
                            .into(),
                    )
                })?
                .join("nivis/rescue"),
        };
        Ok(dir.join(rescue_file_name(
            self.target.endpoint.as_deref().unwrap_or(""),
            &self.url(),
        )))
    }

    /// A client with credentials from the environment or the profile.
    pub(crate) fn client(&self) -> Result<Client, StateError> {
        let creds = Credentials::discover(self.profile.as_deref())
            .map_err(|e| RemoteError::Invalid(e.to_string()))?;
        // Redacted from every printout of the run from now on, like any secret.
        self.redactor.remember(&creds.secret_key);
        if let Some(token) = &creds.session_token {
            self.redactor.remember(token);
        }
        Client::new(&self.target, creds, self.retry)
            .map_err(|e| RemoteError::s3(format!("use {}", self.url()), e).into())
    }

    /// The cipher, if the state is encrypted.
    pub(crate) fn cipher(&self) -> Result<Option<Cipher>, StateError> {
        match &self.encryption {
            None => Ok(None),
            Some(source) => Cipher::load(source, &self.redactor)
                .map(Some)
                .map_err(|e| RemoteError::Invalid(e.to_string()).into()),
        }
    }

    /// The environments with a state in the bucket: `default` if the base key exists, and each
    /// `ENV` with an object `ENVPREFIX/ENV/key`.
    pub(crate) fn envs(&self) -> Result<Vec<String>, StateError> {
        let client = self.client()?;
        let prefix = format!("{}/", self.env_prefix);
        let listed = |p: &str| {
            client
                .list(p)
                .map_err(|e| StateError::from(RemoteError::s3(format!("list {p}"), e)))
        };
        let mut envs = Vec::new();
        if listed(&self.base_key)?.contains(&self.base_key) {
            envs.push(DEFAULT_ENV.to_string());
        }
        let suffix = format!("/{}", self.base_key);
        for key in listed(&prefix)? {
            if let Some(env) = key
                .strip_prefix(&prefix)
                .and_then(|rest| rest.strip_suffix(&suffix))
                .filter(|env| !env.contains('/'))
            {
                envs.push(env.to_string());
            }
        }
        Ok(envs)
    }
}

/// A readable file name for the state `url` at `endpoint`, unique by a digest of both.
fn rescue_file_name(endpoint: &str, url: &str) -> String {
    crate::state::rescue::file_name(
        url.trim_start_matches("s3://"),
        format!("{endpoint}\n{url}").as_bytes(),
    )
}

/// Environment names: letters, digits, `-`, `_`, `.`; not empty, not `.`/`..`.
pub(crate) fn check_env_name(env: &str) -> Result<(), ConfigError> {
    let ok = !env.is_empty()
        && env != "."
        && env != ".."
        && env.len() <= 64
        && env
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(())
    } else {
        Err(ConfigError::BadEnvName {
            env: env.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fields(v: Json) -> Map<String, Json> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn reads_fields_with_defaults_and_environments() {
        let f = fields(
            json!({"type": "s3", "bucket": "team-state", "key": "prod/nivis.state",
            "region": "eu-west-1", "endpoint": "http://127.0.0.1:9000", "usePathStyle": true}),
        );
        let b = S3Backend::from_fields(&f, "default", &Redactor::new()).unwrap();
        assert_eq!(b.key(), "prod/nivis.state");
        assert_eq!(b.url(), "s3://team-state/prod/nivis.state");
        assert!(b.target.path_style);
        assert_eq!(b.target.region, "eu-west-1");
        let dev = S3Backend::from_fields(&f, "dev", &Redactor::new()).unwrap();
        assert_eq!(dev.key(), "env:/dev/prod/nivis.state");
    }

    #[test]
    fn refuses_what_cannot_work() {
        let bad = |v: Json, env: &str| {
            S3Backend::from_fields(&fields(v), env, &Redactor::new())
                .unwrap_err()
                .to_string()
        };
        assert!(bad(json!({"key": "k"}), "default").contains("needs `bucket`"));
        assert!(bad(json!({"bucket": "ab", "key": "k"}), "default").contains("3 to 63"));
        assert!(bad(json!({"bucket": "abc", "key": "/k"}), "default").contains("relative"));
        assert!(
            bad(json!({"bucket": "abc", "key": "k", "bukcet": 1}), "default")
                .contains("\"bukcet\" is not known")
        );
        assert!(bad(
            json!({"bucket": "abc", "key": "k", "usePathStyle": "yes"}),
            "default"
        )
        .contains("true or false"));
        assert!(bad(json!({"bucket": "abc", "key": "k"}), "../x").contains("environment"));
        assert!(bad(
            json!({"bucket": "abc", "key": "k", "encryptionKeyEnv": "A",
            "encryptionKeyFile": "/f"}),
            "default"
        )
        .contains("not both"));
    }

    #[test]
    fn rescue_file_names_are_readable_and_distinct() {
        let a = rescue_file_name("", "s3://bucket/env:/dev/k");
        assert!(
            a.starts_with("bucket_env__dev_k-") && a.ends_with(".rescue"),
            "{a}"
        );
        assert_ne!(a, rescue_file_name("", "s3://bucket/env:/dev/k2"));
        assert_ne!(
            a,
            rescue_file_name("http://127.0.0.1:9000", "s3://bucket/env:/dev/k"),
            "the same bucket and key on another server"
        );
    }
}
