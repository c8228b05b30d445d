//! Provider installation (`nivis::registry`) end to end, with no internet: a provider registry
//! on loopback (plain `std::net`, HTTP/1.1, one thread per connection, bounded lifetime)
//! serving the real null provider zipped and signed with a key made here; tampered variants;
//! mirrors with every network route broken; the mirror writer feeding a fresh machine;
//! concurrent installs into one cache from threads and processes; the lock file format.
//!
//! Tests that need their own environment (proxy variables) or a second process re-run this
//! test binary on one `*_child_*` test, which does nothing unless `NIVIS_REGISTRY_TEST_CHILD`
//! names it.

use std::collections::HashMap;
use std::io::{Cursor, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nivis::registry::{self, Check, InstallError, InstallOptions, LockFile, Origin, Platform};
use pgp::composed::{
    ArmorOptions, DetachedSignature, EncryptionCaps, KeyType, SecretKeyParamsBuilder,
    SignedPublicKey, SignedSecretKey, SubkeyParamsBuilder,
};
use pgp::crypto::hash::HashAlgorithm;
use pgp::ser::Serialize as _;
use pgp::types::Password;
use sha2::{Digest, Sha256};

const VERSION: &str = "2.1.2";
const BINARY_NAME: &str = "terraform-provider-null_v2.1.2_x4";
const H1_EMPTY: &str = "h1:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=";
const CHILD_ENV: &str = "NIVIS_REGISTRY_TEST_CHILD";

// ---------------------------------------------------------------------------------------------
// Fixture: the real null provider, zipped, and signing keys.

struct Fixture {
    binary: PathBuf,
    binary_sha: String,
    /// The release zip for the current platform (the real binary), and its sha256.
    zip: Vec<u8>,
    zip_sha: String,
    /// A small stand-in package for a second platform.
    other_zip: Vec<u8>,
    h1: String,
    h1_other: String,
    signer: SignedSecretKey,
    stranger: SignedSecretKey,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let binary = real_null();
        let bytes = std::fs::read(&binary).expect("read null binary");
        let zip = make_zip(&[(BINARY_NAME, &bytes, 0o755)]);
        let other_zip = make_zip(&[(
            BINARY_NAME,
            b"#!/bin/sh\necho stand-in for another platform\n",
            0o755,
        )]);
        Fixture {
            binary_sha: sha256_hex(&bytes),
            zip_sha: sha256_hex(&zip),
            binary,
            h1: h1_of_zip_bytes(&zip),
            h1_other: h1_of_zip_bytes(&other_zip),
            zip,
            other_zip,
            signer: keygen("Nivis test registry <registry@nivis.test>"),
            stranger: keygen("Somebody else <else@nivis.test>"),
        }
    })
}

/// The real null provider binary, fetched and verified by tests/fetch-providers.py unless
/// `NIVIS_REAL_NULL` names it. Never skips: a missing binary fails the test.
fn real_null() -> PathBuf {
    if let Some(p) = std::env::var_os("NIVIS_REAL_NULL") {
        return PathBuf::from(p);
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fetch-providers.py");
    let out = Command::new("python3")
        .arg(&script)
        .args(["--only", "null"])
        .output()
        .expect("run tests/fetch-providers.py");
    assert!(
        out.status.success(),
        "fetch-providers.py failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("null="))
        .unwrap_or_else(|| panic!("fetch-providers.py printed no null= line: {stdout}"));
    PathBuf::from(line)
}

pub(crate) fn make_zip(entries: &[(&str, &[u8], u32)]) -> Vec<u8> {
    let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
    for (name, content, mode) in entries {
        let opts = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated)
            .compression_level(Some(1))
            .unix_permissions(*mode);
        if name.ends_with('/') {
            w.add_directory(name.trim_end_matches('/'), opts).unwrap();
        } else {
            w.start_file(*name, opts).unwrap();
            w.write_all(content).unwrap();
        }
    }
    w.finish().unwrap().into_inner()
}

fn h1_of_zip_bytes(zip: &[u8]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("p.zip");
    std::fs::write(&p, zip).unwrap();
    registry::h1_of_zip_package(&p).unwrap().to_string()
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn file_sha(p: &Path) -> String {
    sha256_hex(&std::fs::read(p).unwrap_or_else(|e| panic!("read {}: {e}", p.display())))
}

/// An Ed25519 key whose signing subkey signs, as registry keys usually are set up.
fn keygen(uid: &str) -> SignedSecretKey {
    let mut sub = SubkeyParamsBuilder::default();
    sub.key_type(KeyType::Ed25519Legacy)
        .can_sign(true)
        .can_encrypt(EncryptionCaps::None)
        .can_authenticate(false);
    let mut params = SecretKeyParamsBuilder::default();
    params
        .key_type(KeyType::Ed25519Legacy)
        .can_certify(true)
        .can_sign(false)
        .can_encrypt(EncryptionCaps::None)
        .primary_user_id(uid.into())
        .subkeys(vec![sub.build().unwrap()]);
    params
        .build()
        .unwrap()
        .generate(rand::thread_rng())
        .unwrap()
}

fn armored_public(key: &SignedSecretKey) -> String {
    SignedPublicKey::from(key.clone())
        .to_armored_string(ArmorOptions::default())
        .unwrap()
}

/// A binary detached signature by `key`'s signing subkey.
fn sign(key: &SignedSecretKey, data: &[u8]) -> Vec<u8> {
    DetachedSignature::sign_binary_data(
        rand::thread_rng(),
        &key.secret_subkeys[0].key,
        &Password::empty(),
        HashAlgorithm::Sha256,
        data,
    )
    .unwrap()
    .to_bytes()
    .unwrap()
}

fn other_platform() -> Platform {
    let cur = Platform::current();
    let p = if cur.to_string() == "darwin_arm64" {
        "linux_amd64"
    } else {
        "darwin_arm64"
    };
    Platform::parse(p).unwrap()
}

fn zip_name(p: &Platform) -> String {
    format!("terraform-provider-null_{VERSION}_{p}.zip")
}

// ---------------------------------------------------------------------------------------------
// A registry (or any static site) on loopback.

type Routes = HashMap<String, Vec<u8>>;

struct Server {
    host: String,
    requests: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    fn bind() -> (TcpListener, String) {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let host = l.local_addr().unwrap().to_string();
        (l, host)
    }

    /// Serves `routes` (exact paths) until dropped or for at most five minutes.
    fn serve(listener: TcpListener, host: String, routes: Routes) -> Server {
        let routes = Arc::new(routes);
        let requests = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        listener.set_nonblocking(true).unwrap();
        let (r, s) = (requests.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(300);
            while !s.load(Ordering::SeqCst) && Instant::now() < deadline {
                match listener.accept() {
                    Ok((stream, _)) => {
                        let (routes, r) = (routes.clone(), r.clone());
                        std::thread::spawn(move || handle(stream, &routes, &r));
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        std::thread::sleep(Duration::from_millis(2))
                    }
                    Err(_) => break,
                }
            }
        });
        Server {
            host,
            requests,
            stop,
            thread: Some(thread),
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.host)
    }

    fn hits(&self) -> usize {
        self.requests.lock().unwrap().len()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn handle(mut stream: TcpStream, routes: &Routes, requests: &Mutex<Vec<String>>) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 65536 {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let text = String::from_utf8_lossy(&head);
    let path = text
        .lines()
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap_or("/")
        .split('?')
        .next()
        .unwrap_or("/")
        .to_string();
    requests.lock().unwrap().push(path.clone());
    // A private registry: the route "__bearer" holds the token every request must carry.
    let authorized = routes.get("__bearer").is_none_or(|token| {
        let want = format!("authorization: bearer {}", String::from_utf8_lossy(token));
        text.lines().any(|l| l.trim().eq_ignore_ascii_case(&want))
    });
    let (status, body): (&str, &[u8]) = match routes.get(&path) {
        _ if !authorized => ("401 Unauthorized", b"token required"),
        Some(b) => ("200 OK", b),
        None => ("404 Not Found", b"not found"),
    };
    let header = format!(
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nContent-Type: application/octet-stream\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = stream.write_all(header.as_bytes());
    let _ = stream.write_all(body);
    let _ = stream.flush();
}

/// How the test registry misbehaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tamper {
    None,
    /// The zip served is longer than declared.
    Size,
    /// The zip served has one byte changed.
    Sha256,
    /// SHA256SUMS does not list this platform's zip.
    NotListed,
    /// SHA256SUMS is signed by a key the registry does not publish.
    BadSignature,
    /// The other platform's package was re-released with new content (all consistently signed).
    Rereleased,
}

fn start_registry(tamper: Tamper) -> Server {
    let (listener, host) = Server::bind();
    let routes = registry_routes(&host, tamper);
    Server::serve(listener, host, routes)
}

fn registry_routes(host: &str, tamper: Tamper) -> Routes {
    let fx = fixture();
    let (cur, other) = (Platform::current(), other_platform());
    let other_zip = if tamper == Tamper::Rereleased {
        make_zip(&[(BINARY_NAME, b"#!/bin/sh\necho re-released\n", 0o755)])
    } else {
        fx.other_zip.clone()
    };
    // (platform, zip, h1, sha256): the big zip's hashes come from the fixture.
    let packages = [
        (
            cur.clone(),
            fx.zip.clone(),
            fx.h1.clone(),
            fx.zip_sha.clone(),
        ),
        (
            other.clone(),
            other_zip.clone(),
            h1_of_zip_bytes(&other_zip),
            sha256_hex(&other_zip),
        ),
    ];
    let mut sums = String::new();
    for (p, _, _, sha) in &packages {
        if tamper == Tamper::NotListed && *p == cur {
            continue;
        }
        sums.push_str(&format!("{sha}  {}\n", zip_name(p)));
    }
    let signer = if tamper == Tamper::BadSignature {
        &fx.stranger
    } else {
        &fx.signer
    };
    let sums_name = format!("terraform-provider-null_{VERSION}_SHA256SUMS");
    let mut routes = Routes::new();
    routes.insert(
        "/.well-known/terraform.json".into(),
        br#"{"providers.v1":"/v1/providers/"}"#.to_vec(),
    );
    let plat = |p: &Platform| serde_json::json!({"os": p.os, "arch": p.arch});
    routes.insert(
        "/v1/providers/nivis/null/versions".into(),
        serde_json::to_vec(&serde_json::json!({"versions": [
            {"version": VERSION, "protocols": ["5.0"], "platforms": [plat(&cur), plat(&other)]},
            {"version": "2.0.0", "protocols": ["5.0"], "platforms": [plat(&cur)]},
            {"version": "3.0.0", "protocols": ["4.0"], "platforms": [plat(&cur)]},
            {"version": "2.2.0-beta1", "protocols": ["5.0"], "platforms": [plat(&cur)]},
        ]}))
        .unwrap(),
    );
    let mut package_info = serde_json::Map::new();
    for (p, z, h1, sha) in &packages {
        package_info.insert(
            p.to_string(),
            serde_json::json!({"hashes": [h1, format!("zh:{sha}")], "package_size": z.len()}),
        );
    }
    for (p, z, _, sha) in &packages {
        let download_path = format!(
            "/v1/providers/nivis/null/{VERSION}/download/{}/{}",
            p.os, p.arch
        );
        let doc = serde_json::json!({
            "protocols": ["5.0"],
            "os": p.os,
            "arch": p.arch,
            "filename": zip_name(p),
            // One relative to the host, one absolute, one relative to the JSON's own URL.
            "download_url": format!("/files/{}", zip_name(p)),
            "shasums_url": format!("http://{host}/files/{sums_name}"),
            "shasums_signature_url": format!("../{sums_name}.sig"),
            "shasum": sha,
            "signing_keys": {"gpg_public_keys": [{
                "key_id": "",
                "ascii_armor": armored_public(&fx.signer),
                "trust_signature": "",
                "source": "Nivis tests",
                "source_url": null
            }]},
            "packages": package_info,
        });
        routes.insert(download_path, serde_json::to_vec(&doc).unwrap());
        let mut served = z.clone();
        if *p == cur {
            match tamper {
                Tamper::Size => served.extend_from_slice(b"trailing bytes"),
                Tamper::Sha256 => {
                    let mid = served.len() / 2;
                    served[mid] ^= 0xff;
                }
                _ => {}
            }
        }
        routes.insert(format!("/files/{}", zip_name(p)), served);
    }
    routes.insert(
        format!("/v1/providers/nivis/null/{VERSION}/download/{sums_name}.sig"),
        sign(signer, sums.as_bytes()),
    );
    routes.insert(format!("/files/{sums_name}"), sums.into_bytes());
    routes
}

// ---------------------------------------------------------------------------------------------
// Helpers.

fn opts(dir: &Path) -> InstallOptions {
    let mut o = InstallOptions::new(dir.join("cache"), dir.join(".terraform.lock.hcl"));
    o.insecure_loopback_http = true;
    o
}

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(files_under(&p));
            } else {
                out.push(p);
            }
        }
    }
    out
}

/// No package file in the cache, no leftover temporary file, no lock file.
fn assert_nothing_installed(o: &InstallOptions, what: &str) {
    let leftovers: Vec<PathBuf> = files_under(&o.cache_dir)
        .into_iter()
        .filter(|p| !p.starts_with(o.cache_dir.join(".nivis").join("locks")))
        .collect();
    assert!(
        leftovers.is_empty(),
        "{what}: files left in the cache: {leftovers:?}"
    );
    assert!(!o.lock_file.exists(), "{what}: the lock file was written");
}

/// The lock entry for the fixture's two packages, sorted.
fn expected_hashes() -> Vec<String> {
    let fx = fixture();
    let mut v = vec![
        fx.h1.clone(),
        fx.h1_other.clone(),
        format!("zh:{}", fx.zip_sha),
        format!("zh:{}", sha256_hex(&fx.other_zip)),
    ];
    v.sort();
    v
}

fn lock_text(header: &str, addr: &str, constraints: Option<&str>, hashes: &[String]) -> String {
    let mut s = format!(
        "# This file is maintained automatically by \"{header}\".\n# Manual edits may be lost in future updates.\n\nprovider \"{addr}\" {{\n"
    );
    match constraints {
        Some(c) => s.push_str(&format!(
            "  version     = \"{VERSION}\"\n  constraints = \"{c}\"\n"
        )),
        None => s.push_str(&format!("  version = \"{VERSION}\"\n")),
    }
    s.push_str("  hashes = [\n");
    for h in hashes {
        s.push_str(&format!("    \"{h}\",\n"));
    }
    s.push_str("  ]\n}\n");
    s
}

/// The name of test `name` in this test binary (`registry::name` inside tests/tests.rs).
fn test_path(name: &str) -> String {
    match module_path!().split_once("::") {
        Some((_, rest)) => format!("{rest}::{name}"),
        None => name.to_string(),
    }
}

fn is_child(name: &str) -> bool {
    std::env::var(CHILD_ENV).as_deref() == Ok(name)
}

/// Starts this test binary on the one child test `name`.
fn child(name: &str, envs: &[(&str, String)]) -> Command {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args([
        test_path(name).as_str(),
        "--exact",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(CHILD_ENV, name)
    .env("NIVIS_REAL_NULL", &fixture().binary);
    for (k, v) in envs {
        c.env(k, v);
    }
    c
}

fn assert_child_ok(name: &str, out: &Output) {
    let (so, se) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "child {name} failed:\n{so}\n{se}");
    assert!(
        so.contains("1 passed"),
        "child {name} ran no test:\n{so}\n{se}"
    );
}

fn env_path(k: &str) -> PathBuf {
    PathBuf::from(std::env::var_os(k).unwrap_or_else(|| panic!("{k} not set")))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.permissions().mode() & 0o111 == 0o111)
}

// ---------------------------------------------------------------------------------------------
// The registry path.

#[test]
fn registry_install_verifies_locks_and_caches() {
    let fx = fixture();
    let server = start_registry(Tamper::None);
    let d = tempfile::tempdir().unwrap();
    let o = opts(d.path());
    let addr = format!("{}/nivis/null", server.host);

    let inst = registry::install(&addr, Some(">= 2.0"), &o).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(inst.from, Origin::Registry(server.host.clone()));
    assert_eq!(
        inst.version.to_string(),
        VERSION,
        "2.1.2: 3.0.0 speaks protocol 4, 2.2.0-beta1 is a prerelease"
    );
    assert_eq!(inst.address.to_string(), addr);
    assert!(
        inst.executable.starts_with(&o.cache_dir),
        "{}",
        inst.executable.display()
    );
    assert_eq!(inst.executable.file_name().unwrap(), BINARY_NAME);
    assert_eq!(
        inst.package_dir,
        o.cache_dir
            .join(&server.host)
            .join("nivis/null")
            .join(VERSION)
            .join(Platform::current().to_string())
    );
    assert_eq!(file_sha(&inst.executable), fx.binary_sha);
    assert!(is_executable(&inst.executable));

    // The lock records this platform's h1, the other platform's registry-reported h1, and every
    // zh: of the signed SHA256SUMS.
    let want = expected_hashes();
    assert_eq!(inst.hashes, want);
    let text = std::fs::read_to_string(&o.lock_file).unwrap();
    assert_eq!(
        text,
        lock_text("nivis providers lock", &addr, Some(">= 2.0"), &want)
    );

    // Again: from the cache, verified against the lock, with no request at all.
    let hits = server.hits();
    let again = registry::install(&addr, Some(">= 2.0"), &o).unwrap();
    assert_eq!(again.from, Origin::Cache);
    assert_eq!(again.executable, inst.executable);
    assert_eq!(
        server.hits(),
        hits,
        "a verified cache entry needs no network"
    );
    assert_eq!(
        std::fs::read_to_string(&o.lock_file).unwrap(),
        text,
        "lock file unchanged"
    );
    let offline = InstallOptions {
        offline: true,
        ..o.clone()
    };
    assert_eq!(
        registry::install(&addr, Some(">= 2.0"), &offline)
            .unwrap()
            .from,
        Origin::Cache
    );

    // A damaged cache entry is not used: the package is fetched and verified again.
    std::fs::OpenOptions::new()
        .append(true)
        .open(&inst.executable)
        .unwrap()
        .write_all(b"x")
        .unwrap();
    let repaired = registry::install(&addr, Some(">= 2.0"), &o).unwrap();
    assert_eq!(repaired.from, Origin::Registry(server.host.clone()));
    assert_eq!(file_sha(&repaired.executable), fx.binary_sha);
    let err = registry::install(
        &addr,
        Some(">= 2.0"),
        &InstallOptions {
            offline: true,
            ..o.clone()
        },
    );
    assert!(err.is_ok(), "repaired entry is usable offline: {err:?}");

    // A constraint the locked version no longer meets is an error, not a silent upgrade.
    let err = registry::install(&addr, Some(">= 2.2"), &o).unwrap_err();
    assert!(
        matches!(err, InstallError::LockedVersionRejected { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("2.1.2"), "{err}");
}

#[test]
fn registry_tampered_packages_are_refused() {
    let fx = fixture();
    let cur = Platform::current().to_string();
    for (tamper, check, needle) in [
        (Tamper::Size, Check::PackageSize, "package size"),
        (Tamper::Sha256, Check::Sha256, "sha256 of the package"),
        (Tamper::NotListed, Check::Checksums, "does not list"),
        (Tamper::BadSignature, Check::Signature, "signature"),
    ] {
        let server = start_registry(tamper);
        let d = tempfile::tempdir().unwrap();
        let o = opts(d.path());
        let addr = format!("{}/nivis/null", server.host);
        let err = registry::install(&addr, None, &o).unwrap_err();
        let msg = err.to_string();
        assert_eq!(err.failed_check(), Some(check), "{tamper:?}: {msg}");
        for part in [
            needle,
            addr.as_str(),
            VERSION,
            cur.as_str(),
            "Nothing was installed",
        ] {
            assert!(
                msg.contains(part),
                "{tamper:?}: {part:?} missing from: {msg}"
            );
        }
        assert_nothing_installed(&o, &format!("{tamper:?}"));
    }

    // A package whose hashes the lock file does not record: refused, both sides shown.
    let server = start_registry(Tamper::None);
    let d = tempfile::tempdir().unwrap();
    let o = opts(d.path());
    let addr = format!("{}/nivis/null", server.host);
    let fake_h1 = "h1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";
    let fake_zh = format!("zh:{}", "0".repeat(64));
    let locked = lock_text(
        "tofu init",
        &addr,
        None,
        &[fake_h1.to_string(), fake_zh.clone()],
    );
    std::fs::write(&o.lock_file, &locked).unwrap();
    let err = registry::install(&addr, None, &o).unwrap_err();
    assert!(matches!(err, InstallError::LockMismatch { .. }), "{err}");
    let msg = err.to_string();
    for part in [
        fake_h1,
        fake_zh.as_str(),
        fx.h1.as_str(),
        "Nothing was installed",
    ] {
        assert!(msg.contains(part), "{part:?} missing from: {msg}");
    }
    assert_eq!(
        std::fs::read_to_string(&o.lock_file).unwrap(),
        locked,
        "lock file untouched"
    );
    std::fs::remove_file(&o.lock_file).unwrap();
    assert_nothing_installed(&o, "lock mismatch");

    // `lock` for a provider re-released with other bytes (validly signed): a changed hash is
    // an error showing both; re-recording it is an explicit upgrade.
    let server = start_registry(Tamper::Rereleased);
    let d = tempfile::tempdir().unwrap();
    let o = opts(d.path());
    let addr = format!("{}/nivis/null", server.host);
    let before = lock_text("tofu init", &addr, None, &expected_hashes());
    std::fs::write(&o.lock_file, &before).unwrap();
    let both = [Platform::current(), other_platform()];
    let err = registry::lock(&[(addr.clone(), None)], &both, &o).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, InstallError::LockMismatch { .. }), "{msg}");
    assert!(
        msg.contains(&fx.h1_other) && msg.contains(&other_platform().to_string()),
        "{msg}"
    );
    assert_eq!(std::fs::read_to_string(&o.lock_file).unwrap(), before);
    let upgrade = InstallOptions {
        update_lock: true,
        ..o.clone()
    };
    registry::lock(&[(addr.clone(), None)], &both, &upgrade).unwrap();
    let after = LockFile::read(&o.lock_file).unwrap();
    let entry = &after.providers[&addr.parse::<registry::ProviderAddr>().unwrap()];
    assert!(
        !entry.hashes.iter().any(|h| h.as_str() == fx.h1_other),
        "old hash dropped on upgrade"
    );
    assert!(
        entry.hashes.iter().any(|h| h.as_str() == fx.h1),
        "current platform still recorded"
    );
}

// ---------------------------------------------------------------------------------------------
// Mirrors.

#[test]
fn registry_mirror_only_with_every_network_route_broken() {
    let fx = fixture();
    // Any request reaching this server would show offline mode touched the network.
    let server = start_registry(Tamper::None);
    let work = tempfile::tempdir().unwrap();
    let zip = work.path().join("null.zip");
    std::fs::write(&zip, &fx.zip).unwrap();
    let closed = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let proxy = format!("http://127.0.0.1:{closed}");
    let name = "registry_child_mirror_only";
    let mut cmd = child(
        name,
        &[
            ("NIVIS_TEST_WORK", work.path().display().to_string()),
            ("NIVIS_TEST_ZIP", zip.display().to_string()),
            ("NIVIS_TEST_BINARY_SHA", fx.binary_sha.clone()),
            ("NIVIS_TEST_OFFLINE_HOST", server.host.clone()),
        ],
    );
    for var in [
        "HTTPS_PROXY",
        "HTTP_PROXY",
        "ALL_PROXY",
        "https_proxy",
        "http_proxy",
        "all_proxy",
    ] {
        cmd.env(var, &proxy);
    }
    cmd.env_remove("NO_PROXY").env_remove("no_proxy");
    assert_child_ok(name, &cmd.output().unwrap());
    assert_eq!(
        server.hits(),
        0,
        "offline mode sent requests: {:?}",
        server.requests.lock().unwrap()
    );
}

#[test]
fn registry_child_mirror_only() {
    if !is_child("registry_child_mirror_only") {
        return;
    }
    let work = env_path("NIVIS_TEST_WORK");
    let binary_sha = std::env::var("NIVIS_TEST_BINARY_SHA").unwrap();
    let cur = Platform::current();
    let addr = "registry.opentofu.org/hashicorp/null";

    // Packed layout, found without the offline flag: the broken network is never needed.
    let packed = work.join("packed");
    let pdir = packed.join(addr);
    std::fs::create_dir_all(&pdir).unwrap();
    std::fs::copy(env_path("NIVIS_TEST_ZIP"), pdir.join(zip_name(&cur))).unwrap();
    let mut o = InstallOptions::new(work.join("cache1"), work.join("lock1.hcl"));
    o.fs_mirrors = vec![work.join("nonexistent"), packed.clone()];
    let inst =
        registry::install("hashicorp/null", Some("~> 2.1"), &o).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(inst.from, Origin::FsMirror(packed.clone()));
    assert_eq!(file_sha(&inst.executable), binary_sha);
    let lock1 = LockFile::read(&o.lock_file).unwrap();
    let entry = &lock1.providers[&addr.parse::<registry::ProviderAddr>().unwrap()];
    assert_eq!(entry.constraints.as_deref(), Some("~> 2.1"));
    assert_eq!(
        entry.hashes.len(),
        2,
        "h1 and zh of the mirrored zip: {:?}",
        entry.hashes
    );
    assert_eq!(
        registry::install("hashicorp/null", Some("~> 2.1"), &o)
            .unwrap()
            .from,
        Origin::FsMirror(packed.clone())
    );

    // Unpacked layout: used in place, verified against the lock written from the packed zip.
    let unpacked = work.join("unpacked");
    let udir = unpacked.join(addr).join(VERSION).join(cur.to_string());
    std::fs::create_dir_all(&udir).unwrap();
    std::fs::copy(env_path("NIVIS_REAL_NULL"), udir.join(BINARY_NAME)).unwrap();
    let mut u = InstallOptions::new(work.join("cache2"), work.join("lock2.hcl"));
    std::fs::copy(&o.lock_file, &u.lock_file).unwrap();
    u.fs_mirrors = vec![unpacked.clone()];
    let inst = registry::install("hashicorp/null", None, &u).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(inst.from, Origin::FsMirror(unpacked.clone()));
    assert_eq!(inst.executable, udir.join(BINARY_NAME));

    // Proof that the network is broken: a provider the mirror lacks cannot be fetched.
    let err = registry::install("hashicorp/random", None, &o).unwrap_err();
    assert!(matches!(err, InstallError::Network { .. }), "{err}");
    assert!(err.to_string().contains("registry.opentofu.org"), "{err}");

    // Offline: never touches the network, and names what it could not find.
    let offline = InstallOptions {
        offline: true,
        ..o.clone()
    };
    let host = std::env::var("NIVIS_TEST_OFFLINE_HOST").unwrap();
    let missing = format!("{host}/nivis/null");
    let err = registry::install(&missing, Some(">= 2"), &offline).unwrap_err();
    assert!(matches!(err, InstallError::NotFoundOffline { .. }), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains(&missing)
            && msg.contains("offline")
            && msg.contains(&packed.display().to_string()),
        "{msg}"
    );
    // A locked version the mirror does not have.
    let pinned = InstallOptions {
        lock_file: work.join("lock3.hcl"),
        ..offline.clone()
    };
    std::fs::write(
        &pinned.lock_file,
        lock_text("tofu init", addr, None, &[H1_EMPTY.to_string()]).replace(VERSION, "9.9.9"),
    )
    .unwrap();
    let err = registry::install("hashicorp/null", None, &pinned).unwrap_err();
    assert!(
        err.to_string().contains("locked version 9.9.9") && err.to_string().contains(addr),
        "{err}"
    );
}

#[test]
fn registry_mirror_writer_output_feeds_a_fresh_machine() {
    let fx = fixture();
    let server = start_registry(Tamper::None);
    let addr = format!("{}/nivis/null", server.host);
    let (cur, other) = (Platform::current(), other_platform());
    let both = [cur.clone(), other.clone()];

    // The connected machine: lock both platforms, then write the mirror.
    let a = tempfile::tempdir().unwrap();
    let oa = opts(a.path());
    let sources = [(addr.clone(), Some(">= 2.0".to_string()))];
    registry::lock(&sources, &both, &oa).unwrap_or_else(|e| panic!("{e}"));
    let want = expected_hashes();
    assert_eq!(
        std::fs::read_to_string(&oa.lock_file).unwrap(),
        lock_text("nivis providers lock", &addr, Some(">= 2.0"), &want)
    );
    let mirror = a.path().join("mirror");
    registry::mirror(&sources, &both, &mirror, &oa).unwrap_or_else(|e| panic!("{e}"));
    let pdir = mirror.join(&server.host).join("nivis/null");
    assert_eq!(std::fs::read(pdir.join(zip_name(&cur))).unwrap(), fx.zip);
    assert_eq!(
        std::fs::read(pdir.join(zip_name(&other))).unwrap(),
        fx.other_zip
    );
    assert_eq!(
        std::fs::read_to_string(pdir.join("index.json")).unwrap(),
        format!("{{\n  \"versions\": {{\n    \"{VERSION}\": {{}}\n  }}\n}}")
    );
    let mut archives: Vec<(String, String)> = vec![
        (cur.to_string(), fx.h1.clone()),
        (other.to_string(), fx.h1_other.clone()),
    ];
    archives.sort();
    let entries: Vec<String> = archives
        .iter()
        .map(|(p, h)| format!("    \"{p}\": {{\n      \"hashes\": [\n        \"{h}\"\n      ],\n      \"url\": \"terraform-provider-null_{VERSION}_{p}.zip\"\n    }}"))
        .collect();
    assert_eq!(
        std::fs::read_to_string(pdir.join(format!("{VERSION}.json"))).unwrap(),
        format!("{{\n  \"archives\": {{\n{}\n  }}\n}}", entries.join(",\n"))
    );
    let hits = server.hits();

    // A fresh machine with only the mirror and the lock file, offline.
    let b = tempfile::tempdir().unwrap();
    let mut ob = opts(b.path());
    std::fs::copy(&oa.lock_file, &ob.lock_file).unwrap();
    ob.fs_mirrors = vec![mirror.clone()];
    ob.offline = true;
    let inst = registry::install(&addr, Some(">= 2.0"), &ob).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(inst.from, Origin::FsMirror(mirror.clone()));
    assert!(inst.executable.starts_with(&ob.cache_dir));
    assert_eq!(file_sha(&inst.executable), fx.binary_sha);
    assert_eq!(
        std::fs::read_to_string(&ob.lock_file).unwrap(),
        std::fs::read_to_string(&oa.lock_file).unwrap()
    );

    // The same directory published as a network mirror.
    let mut routes = Routes::new();
    for f in files_under(&mirror) {
        let rel = f
            .strip_prefix(&mirror)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        routes.insert(format!("/mirror/{rel}"), std::fs::read(&f).unwrap());
    }
    let (l, h) = Server::bind();
    let net = Server::serve(l, h, routes.clone());
    let c = tempfile::tempdir().unwrap();
    let mut oc = opts(c.path());
    std::fs::copy(&oa.lock_file, &oc.lock_file).unwrap();
    oc.net_mirrors = vec![net.url("/mirror")];
    let inst = registry::install(&addr, Some(">= 2.0"), &oc).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(inst.from, Origin::NetMirror(net.url("/mirror/")));
    assert_eq!(file_sha(&inst.executable), fx.binary_sha);
    assert_eq!(server.hits(), hits, "the registry was not asked");

    // A network mirror that lists no hashes vouches for nothing: refused without a lock entry,
    // accepted when the lock file verifies the package.
    let version_json = format!("/mirror/{}/nivis/null/{VERSION}.json", server.host);
    let mut bare = routes;
    let doc = serde_json::json!({"archives": {cur.to_string(): {"url": zip_name(&cur)}}});
    bare.insert(version_json, serde_json::to_vec(&doc).unwrap());
    let (l, h) = Server::bind();
    let net = Server::serve(l, h, bare);
    let e = tempfile::tempdir().unwrap();
    let mut oe = opts(e.path());
    oe.net_mirrors = vec![net.url("/mirror/")];
    let err = registry::install(&addr, None, &oe).unwrap_err();
    assert_eq!(err.failed_check(), Some(Check::Unverified), "{err}");
    assert_nothing_installed(&oe, "hash-less mirror");
    std::fs::copy(&oa.lock_file, &oe.lock_file).unwrap();
    assert_eq!(
        registry::install(&addr, None, &oe).unwrap().from,
        Origin::NetMirror(net.url("/mirror/"))
    );
}

// ---------------------------------------------------------------------------------------------
// Concurrency.

#[test]
fn registry_concurrent_installs_share_one_cache() {
    let fx = fixture();
    let server = start_registry(Tamper::None);
    let d = tempfile::tempdir().unwrap();
    let o = opts(d.path());
    let addr = format!("{}/nivis/null", server.host);
    // A damaged entry is already there: it must be replaced whole, once.
    let entry = o
        .cache_dir
        .join(&server.host)
        .join("nivis/null")
        .join(VERSION)
        .join(Platform::current().to_string());
    std::fs::create_dir_all(&entry).unwrap();
    std::fs::write(entry.join(BINARY_NAME), b"#!/bin/sh\nexit 3\n").unwrap();

    let name = "registry_child_concurrent_install";
    let envs = [
        ("NIVIS_TEST_ADDR", addr.clone()),
        ("NIVIS_TEST_CACHE", o.cache_dir.display().to_string()),
        ("NIVIS_TEST_LOCK", o.lock_file.display().to_string()),
        ("NIVIS_TEST_BINARY_SHA", fx.binary_sha.clone()),
    ];
    let children: Vec<_> = (0..3)
        .map(|_| {
            child(name, &envs)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let (o, addr) = (o.clone(), addr.clone());
            std::thread::spawn(move || {
                let inst =
                    registry::install(&addr, Some(">= 2"), &o).unwrap_or_else(|e| panic!("{e}"));
                // Running it right away works: nothing is ever written into an installed file.
                let ran = Command::new(&inst.executable).output();
                assert!(
                    ran.is_ok(),
                    "cannot start {}: {ran:?}",
                    inst.executable.display()
                );
                inst.executable
            })
        })
        .collect();
    for t in threads {
        let exe = t.join().expect("install thread");
        assert_eq!(exe, entry.join(BINARY_NAME));
    }
    for c in children {
        assert_child_ok(name, &c.wait_with_output().unwrap());
    }
    assert_eq!(file_sha(&entry.join(BINARY_NAME)), fx.binary_sha);
    assert_eq!(registry::h1_of_dir(&entry).unwrap().as_str(), fx.h1);
    let tmp: Vec<PathBuf> = files_under(&o.cache_dir.join(".nivis").join("tmp"));
    assert!(tmp.is_empty(), "temporary files left: {tmp:?}");
    let want = expected_hashes();
    assert_eq!(
        std::fs::read_to_string(&o.lock_file).unwrap(),
        lock_text("nivis providers lock", &addr, Some(">= 2"), &want)
    );
}

#[test]
fn registry_child_concurrent_install() {
    if !is_child("registry_child_concurrent_install") {
        return;
    }
    let addr = std::env::var("NIVIS_TEST_ADDR").unwrap();
    let mut o = InstallOptions::new(env_path("NIVIS_TEST_CACHE"), env_path("NIVIS_TEST_LOCK"));
    o.insecure_loopback_http = true;
    let inst = registry::install(&addr, Some(">= 2"), &o).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        file_sha(&inst.executable),
        std::env::var("NIVIS_TEST_BINARY_SHA").unwrap()
    );
    assert!(Command::new(&inst.executable).output().is_ok());
}

#[test]
fn registry_concurrent_lock_file_updates_lose_nothing() {
    // Many providers recorded into one lock file at once, from small packages in an unpacked
    // mirror: every entry survives.
    let d = tempfile::tempdir().unwrap();
    let mirror = d.path().join("mirror");
    let cur = Platform::current().to_string();
    let names: Vec<String> = (0..12).map(|i| format!("p{i}")).collect();
    for n in &names {
        let dir = mirror
            .join("example.com/acme")
            .join(n)
            .join("1.0.0")
            .join(&cur);
        std::fs::create_dir_all(&dir).unwrap();
        let exe = dir.join(format!("terraform-provider-{n}_v1.0.0"));
        std::fs::write(&exe, format!("#!/bin/sh\necho {n}\n")).unwrap();
    }
    let mut o = opts(d.path());
    o.fs_mirrors = vec![mirror];
    o.offline = true;
    for round in 0..3 {
        let lock = d.path().join(format!("round{round}.hcl"));
        let o = InstallOptions {
            lock_file: lock.clone(),
            ..o.clone()
        };
        let barrier = Arc::new(std::sync::Barrier::new(names.len()));
        let threads: Vec<_> = names
            .iter()
            .map(|n| {
                let (o, b, addr) = (o.clone(), barrier.clone(), format!("example.com/acme/{n}"));
                std::thread::spawn(move || {
                    b.wait();
                    registry::install(&addr, None, &o).unwrap_or_else(|e| panic!("{e}"))
                })
            })
            .collect();
        for t in threads {
            assert!(matches!(t.join().unwrap().from, Origin::FsMirror(_)));
        }
        let recorded = LockFile::read(&lock).unwrap();
        assert_eq!(
            recorded.providers.len(),
            names.len(),
            "round {round}: {}",
            std::fs::read_to_string(&lock).unwrap()
        );
    }
}

#[test]
fn registry_private_registry_gets_its_token_and_only_from_credentials() {
    let (listener, host) = Server::bind();
    let mut routes = registry_routes(&host, Tamper::None);
    routes.insert("__bearer".into(), b"s3cret-token".to_vec());
    let server = Server::serve(listener, host, routes);
    let addr = format!("{}/nivis/null", server.host);
    let home = tempfile::tempdir().unwrap();

    // Without credentials: refused, and the error says which variable to set.
    let d = tempfile::tempdir().unwrap();
    let o = opts(d.path());
    let err = registry::install(&addr, Some(">= 2"), &o)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("401") && err.contains("TF_TOKEN_127_0_0_1"),
        "{err}"
    );
    assert_nothing_installed(&o, "no token");

    // TF_TOKEN_<host> (a child process: the environment is read when installation starts).
    let d = tempfile::tempdir().unwrap();
    let envs = |token: &str| {
        vec![
            ("HOME", home.path().display().to_string()),
            ("TF_TOKEN_127_0_0_1", token.to_string()),
            ("NIVIS_TEST_ADDR", addr.clone()),
            (
                "NIVIS_TEST_CACHE",
                d.path().join("cache").display().to_string(),
            ),
            (
                "NIVIS_TEST_LOCK",
                d.path().join("lock.hcl").display().to_string(),
            ),
            ("NIVIS_TEST_BINARY_SHA", fixture().binary_sha.clone()),
        ]
    };
    let name = "registry_child_concurrent_install";
    let out = child(name, &envs("s3cret-token")).output().unwrap();
    assert_child_ok(name, &out);

    // A wrong token is refused and said to be refused.
    let d2 = tempfile::tempdir().unwrap();
    let mut wrong = envs("wrong");
    for (k, v) in wrong.iter_mut() {
        if *k == "NIVIS_TEST_CACHE" {
            *v = d2.path().join("cache").display().to_string();
        }
    }
    let out = child(name, &wrong).output().unwrap();
    assert!(!out.status.success());
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("refused the token"), "{text}");

    // The credentials file `tofu login` writes works too.
    std::fs::create_dir_all(home.path().join(".terraform.d")).unwrap();
    std::fs::write(
        home.path().join(".terraform.d/credentials.tfrc.json"),
        format!(
            r#"{{"credentials": {{"{}": {{"token": "s3cret-token"}}}}}}"#,
            server.host
        ),
    )
    .unwrap();
    let d3 = tempfile::tempdir().unwrap();
    let mut from_file: Vec<(&str, String)> = envs("")
        .into_iter()
        .filter(|(k, _)| *k != "TF_TOKEN_127_0_0_1")
        .collect();
    for (k, v) in from_file.iter_mut() {
        if *k == "NIVIS_TEST_CACHE" {
            *v = d3.path().join("cache").display().to_string();
        }
    }
    let out = child(name, &from_file).output().unwrap();
    assert_child_ok(name, &out);
}

#[path = "registry_bombs.rs"]
mod bombs;
