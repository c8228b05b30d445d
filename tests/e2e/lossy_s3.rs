//! Lost acknowledgements between Nivis and a real SeaweedFS server: a proxy that forwards every
//! request but drops the answers of chosen ones (the server did the work; the client never
//! hears of it), for the lock's create and delete.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use super::remote::{tokens, Machine};
use super::weed::Weed;
use crate::util::*;

/// Forwards to `upstream`; the answers of the first `drops` requests whose method is `method`
/// and whose path ends with `suffix` are dropped (the connection closed instead).
struct LossyProxy {
    port: u16,
    dropped: Arc<AtomicUsize>,
}

impl LossyProxy {
    fn start(upstream: u16, method: &'static str, suffix: &'static str, drops: usize) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let dropped = Arc::new(AtomicUsize::new(0));
        let count = Arc::clone(&dropped);
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let count = Arc::clone(&count);
                std::thread::spawn(move || {
                    let rule = |m: &str, p: &str| {
                        m == method
                            && p.split('?').next().unwrap_or("").ends_with(suffix)
                            && count.fetch_add(1, Ordering::SeqCst) < drops
                    };
                    let _ = forward_one(conn, upstream, rule);
                });
            }
        });
        LossyProxy { port, dropped }
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Answers dropped so far (capped at the number asked for).
    fn dropped(&self, asked: usize) -> usize {
        self.dropped.load(Ordering::SeqCst).min(asked)
    }
}

/// One request on `client`, sent upstream on a connection of its own (closed after the
/// answer); the answer goes back unless `drop(method, path)`.
fn forward_one(
    client: TcpStream,
    upstream: u16,
    drop: impl FnOnce(&str, &str) -> bool,
) -> std::io::Result<()> {
    let mut reader = BufReader::new(client.try_clone()?);
    let mut head = Vec::new();
    let mut length = 0usize;
    let mut first = String::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        if first.is_empty() {
            first = line.clone();
        }
        let lower = line.to_ascii_lowercase();
        if let Some(v) = lower.strip_prefix("content-length:") {
            length = v.trim().parse().unwrap_or(0);
        }
        if lower.starts_with("connection:") {
            continue;
        }
        if line == "\r\n" {
            head.extend_from_slice(b"Connection: close\r\n\r\n");
            break;
        }
        head.extend_from_slice(line.as_bytes());
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    let mut up = TcpStream::connect(("127.0.0.1", upstream))?;
    up.write_all(&head)?;
    up.write_all(&body)?;
    let mut answer = Vec::new();
    up.read_to_end(&mut answer)?;
    let mut parts = first.split_whitespace();
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    if drop(method, path) {
        // The server did it; the client hears nothing.
        return client.shutdown(std::net::Shutdown::Both);
    }
    let mut client = client;
    client.write_all(&answer)?;
    client.shutdown(std::net::Shutdown::Both)
}

/// `--backend-config` flags for `key` through `proxy`, with `extra` fields.
fn flags_via(weed: &Weed, proxy: &LossyProxy, key: &str, extra: &[&str]) -> Vec<String> {
    let mut flags: Vec<String> = weed
        .flags(key)
        .into_iter()
        .map(|f| f.replace(&weed.endpoint(), &proxy.endpoint()))
        .collect();
    for e in extra {
        flags.extend(["--backend-config".to_string(), e.to_string()]);
    }
    flags
}

fn run_via(m: &Machine, flags: &[String], verb: &[&str], extra: &[&str]) -> std::process::Output {
    let mut args: Vec<&str> = flags.iter().map(String::as_str).collect();
    args.extend(extra);
    m.project.run(verb, &args)
}

#[test]
fn a_lock_create_whose_acknowledgements_were_all_lost_is_ours() {
    let weed = Weed::start();
    let upstream = weed.info["port"].as_u64().unwrap() as u16;
    // Both attempts' answers lost: the first created the lock, the second met it.
    let proxy = LossyProxy::start(upstream, "PUT", ".lock", 2);
    let key = "lossy/create.state";
    let flags = flags_via(&weed, &proxy, key, &["maxAttempts=2"]);
    let m = Machine::new(&weed, key, &tokens(3, "c"));
    let out = run_via(&m, &flags, &["apply"], &["--auto-approve"]);
    assert_success(&out);
    assert_eq!(proxy.dropped(2), 2, "both answers were dropped");
    assert_eq!(m.ids().len(), 3);
    assert!(weed.client().get(&format!("{key}.lock")).unwrap().is_none());
}

#[test]
fn a_lock_release_whose_acknowledgement_was_lost_is_released_without_a_warning() {
    let weed = Weed::start();
    let upstream = weed.info["port"].as_u64().unwrap() as u16;
    let proxy = LossyProxy::start(upstream, "DELETE", ".lock", 1);
    let key = "lossy/release.state";
    let flags = flags_via(&weed, &proxy, key, &[]);
    let m = Machine::new(&weed, key, &tokens(3, "r"));
    let out = run_via(&m, &flags, &["apply"], &["--auto-approve"]);
    assert_success(&out);
    assert_eq!(proxy.dropped(1), 1, "the answer was dropped");
    let err = stderr(&out);
    assert!(!err.contains("changed by someone else"), "{err}");
    assert!(!err.contains("could not release"), "{err}");
    assert!(weed.client().get(&format!("{key}.lock")).unwrap().is_none());
}
