//! Fault and behaviour knobs of the fakes.
//!
//! A spawned fake reads them from its environment ([`Knobs::from_env`]); an in-process test
//! builds the struct itself, so tests running in parallel threads never share them.

use std::path::PathBuf;
use std::time::Duration;

/// What a fake does besides its plain behaviour. Every list names objects by their label
/// (alpha: `label`, beta: `from`).
#[derive(Debug, Clone, Default)]
pub(crate) struct Knobs {
    /// Applies of these fail with a diagnostic, creating nothing (`NIVIS_FAKE_FAIL_ON`).
    pub fail_on: Vec<String>,
    /// Applies of these fail after the object exists, returning it (`NIVIS_FAKE_PARTIAL_ON`).
    pub partial_on: Vec<String>,
    /// Deletes of these fail (`NIVIS_FAKE_FAIL_DELETE_ON`).
    pub fail_delete_on: Vec<String>,
    /// The process dies mid-apply with a Go-style panic (`NIVIS_FAKE_CRASH_ON`). Only
    /// meaningful for a spawned fake: in process it would end the test binary.
    pub crash_on: Vec<String>,
    /// Reads report a changed `value` (`NIVIS_FAKE_DRIFT_ON`).
    pub drift_on: Vec<String>,
    /// Reads report the object gone (`NIVIS_FAKE_GONE_ON`).
    pub gone_on: Vec<String>,
    /// Reads answer an empty collection where the object holds null, as an SDKv2 provider
    /// answers create with null and read with `{}` (`NIVIS_FAKE_EMPTY_AT_READ_ON`).
    pub empty_at_read_on: Vec<String>,
    /// Reads of these fail with a diagnostic, as a read of an object the API refuses to
    /// show does (`NIVIS_FAKE_FAIL_READ_ON`).
    pub fail_read_on: Vec<String>,
    /// Every apply sleeps this long first (`NIVIS_FAKE_SLOW_MS`).
    pub slow: Option<Duration>,
    /// Applies of objects whose label matches a pattern sleep that pattern's time first, the
    /// first match counting (`NIVIS_FAKE_LATENCY_MS="slow*=3000,db=8000"`: a pattern is a
    /// label, or a prefix before `*`). Added to `slow`.
    pub latency: Vec<(String, Duration)>,
    /// Applies of objects whose label matches the pattern (as in `latency`) wait until the
    /// file exists (`NIVIS_FAKE_HOLD_UNTIL="hold*=/path/to/file"`), so a test decides when an
    /// operation in flight ends.
    pub hold_until: Option<(String, PathBuf)>,
    /// KiB of noise written to stdout and stderr on plan, apply and startup (`NIVIS_FAKE_NOISE`).
    pub noise_kib: Option<usize>,
    /// The object log: one JSON line per remote object created or deleted
    /// (`NIVIS_FAKE_OBJECT_LOG`).
    pub object_log: Option<PathBuf>,
    /// First value of the per-process counter (`NIVIS_FAKE_COUNTER`, or the older
    /// `TERRAE_NIVIS_FAKE_COUNTER`).
    pub counter_seed: u64,
    /// alpha's secrets are `<prefix>-N` (`NIVIS_FAKE_SECRET`; default `secret`), so a test can
    /// hunt for a value unique to its run.
    pub secret_prefix: Option<String>,
    /// alpha's resource schema version; 1 adds `revision` (`NIVIS_FAKE_ALPHA_SCHEMA_VERSION`).
    pub alpha_schema_version: i64,
    /// alpha's applies fail with a diagnostic that quotes the label in other encodings
    /// (URL-encoded, Go-JSON-escaped, hex, base64 at three alignments), also written to its
    /// stderr (`NIVIS_FAKE_LEAK_LABEL`): a sensitive label must stay masked in every form.
    pub leak_label: bool,
    /// The validation log: one JSON line per ValidateResourceConfig / ValidateDataResourceConfig
    /// call the fake answers (`NIVIS_FAKE_VALIDATE_LOG`), so a test sees which calls were spared.
    pub validate_log: Option<PathBuf>,
    /// The upgrade log: one JSON line per UpgradeResourceState call the fake answers
    /// (`NIVIS_FAKE_UPGRADE_LOG`), so a test sees which upgrades were spared.
    pub upgrade_log: Option<PathBuf>,
    /// The call log: one JSON line per ReadResource and PlanResourceChange call the fake
    /// answers (`NIVIS_FAKE_CALL_LOG`), so a test sees how often each object was refreshed and
    /// planned.
    pub call_log: Option<PathBuf>,
    /// Ephemeral resources ask to be renewed this long after each open or renewal
    /// (`NIVIS_FAKE_RENEW_MS`; unset: never).
    pub renew_after: Option<Duration>,
}

/// Reads an environment knob; empty counts as unset.
pub(crate) fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

fn list(name: &str) -> Vec<String> {
    env(name)
        .map(|v| v.split(',').map(str::to_string).collect())
        .unwrap_or_default()
}

impl Knobs {
    /// The knobs a spawned fake was given in its environment.
    pub(crate) fn from_env() -> Knobs {
        Knobs {
            fail_on: list("NIVIS_FAKE_FAIL_ON"),
            partial_on: list("NIVIS_FAKE_PARTIAL_ON"),
            fail_delete_on: list("NIVIS_FAKE_FAIL_DELETE_ON"),
            crash_on: list("NIVIS_FAKE_CRASH_ON"),
            drift_on: list("NIVIS_FAKE_DRIFT_ON"),
            gone_on: list("NIVIS_FAKE_GONE_ON"),
            empty_at_read_on: list("NIVIS_FAKE_EMPTY_AT_READ_ON"),
            fail_read_on: list("NIVIS_FAKE_FAIL_READ_ON"),
            slow: env("NIVIS_FAKE_SLOW_MS")
                .and_then(|v| v.parse().ok())
                .map(Duration::from_millis),
            latency: latencies(env("NIVIS_FAKE_LATENCY_MS").as_deref().unwrap_or("")),
            hold_until: env("NIVIS_FAKE_HOLD_UNTIL").and_then(|v| {
                let (pattern, path) = v.split_once('=')?;
                Some((pattern.to_string(), PathBuf::from(path)))
            }),
            noise_kib: env("NIVIS_FAKE_NOISE").and_then(|v| v.parse().ok()),
            object_log: env("NIVIS_FAKE_OBJECT_LOG").map(PathBuf::from),
            counter_seed: env("NIVIS_FAKE_COUNTER")
                .or_else(|| env("TERRAE_NIVIS_FAKE_COUNTER"))
                .and_then(|v| v.parse().ok())
                .unwrap_or(0),
            secret_prefix: env("NIVIS_FAKE_SECRET"),
            alpha_schema_version: env("NIVIS_FAKE_ALPHA_SCHEMA_VERSION")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0),
            leak_label: env("NIVIS_FAKE_LEAK_LABEL").is_some(),
            validate_log: env("NIVIS_FAKE_VALIDATE_LOG").map(PathBuf::from),
            upgrade_log: env("NIVIS_FAKE_UPGRADE_LOG").map(PathBuf::from),
            call_log: env("NIVIS_FAKE_CALL_LOG").map(PathBuf::from),
            renew_after: env("NIVIS_FAKE_RENEW_MS")
                .and_then(|v| v.parse().ok())
                .map(Duration::from_millis),
        }
    }
}

/// The `pattern=ms` pairs of `NIVIS_FAKE_LATENCY_MS`; a malformed pair is left out.
pub(crate) fn latencies(spec: &str) -> Vec<(String, Duration)> {
    (spec.split(','))
        .filter_map(|pair| {
            let (pattern, ms) = pair.trim().split_once('=')?;
            let ms: u64 = ms.trim().parse().ok()?;
            Some((pattern.trim().to_string(), Duration::from_millis(ms)))
        })
        .collect()
}

impl Knobs {
    /// How long an apply of the object labelled `label` sleeps for `latency`.
    pub(crate) fn latency_of(&self, label: Option<&str>) -> Option<Duration> {
        let label = label?;
        (self.latency.iter())
            .find(|(pattern, _)| label_matches(pattern, label))
            .map(|(_, d)| *d)
    }

    /// Waits, if `hold_until` names the object labelled `label`, until its file exists.
    pub(crate) fn hold(&self, label: Option<&str>) {
        let Some((pattern, path)) = &self.hold_until else {
            return;
        };
        if label.is_some_and(|label| label_matches(pattern, label)) {
            while !path.exists() {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

/// Whether `label` matches `pattern`: the label itself, or a prefix before `*`.
fn label_matches(pattern: &str, label: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => label.starts_with(prefix),
        None => label == pattern,
    }
}

/// Whether `label` is named in `list`.
pub(crate) fn named(list: &[String], label: &str) -> bool {
    list.iter().any(|l| l == label)
}

/// Writes `kib` KiB of noise lines tagged `tag` to stdout and stderr, to prove a chatty
/// provider never blocks its client.
pub(crate) fn write_noise(kib: usize, tag: &str) {
    use std::io::Write;
    let line = format!("{tag}: {}\n", "noise ".repeat(20));
    let mut err = std::io::stderr().lock();
    let mut out = std::io::stdout().lock();
    let mut written = 0;
    while written < kib * 1024 {
        let _ = err.write_all(line.as_bytes());
        let _ = out.write_all(line.as_bytes());
        written += line.len();
    }
}

/// `text` in the encodings a provider's messages use: URL-encoded (RFC 3986), as a Go JSON
/// string (`<`, `>`, `&` as `\u003c`...), hex, and base64 after 0, 1 and 2 bytes of prefix.
pub(crate) fn encoded_forms(text: &str) -> Vec<String> {
    use base64::engine::general_purpose::STANDARD;
    use base64::Engine as _;
    let url: String = text
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect();
    let json = serde_json::to_string(text)
        .unwrap_or_default()
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026");
    let mut forms = vec![
        format!("url={url}"),
        format!("json={json}"),
        format!("hex={}", hex::encode(text)),
    ];
    for prefix in ["", "x", "xy"] {
        forms.push(format!(
            "b64={}",
            STANDARD.encode(format!("{prefix}{text}"))
        ));
    }
    forms
}
