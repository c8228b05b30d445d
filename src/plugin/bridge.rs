//! The local end of a provider's TLS session: gRPC (built without TLS) talks plaintext to a
//! unix socket in the provider's private directory, and a thread per connection carries the
//! bytes through a TLS session with the provider.
//!
//! Owns: the listening socket, accepting gRPC's connections (only our uid can reach them: the
//! socket is inside the 0700 directory; and of our uid's processes only this one: a connection
//! whose peer (`SO_PEERCRED`) is another process is closed unanswered, DESIGN §93), one TLS
//! session per connection, copying bytes both
//! ways until either side closes, and stopping the listener when dropped. Not: the TLS
//! configuration (`tls`), the directory (`socket_dir`).
//!
//! One thread per connection, polling both sockets: a read is made only when `poll` says the
//! socket has data, and writes block (both peers read and write concurrently, so a blocked
//! write always drains). gRPC opens one connection per channel, so a provider has one such
//! thread, plus the accept thread.

use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use rustls::{ClientConnection, Connection};

use super::tls::{TlsClient, TlsError};

/// The name of the listening socket in the provider's private directory.
const SOCKET_NAME: &str = "nivis-tls-bridge.sock";

/// Bytes moved per read.
const CHUNK: usize = 64 * 1024;

/// A listening bridge to one provider; dropping it stops accepting (open connections end when
/// either side closes).
pub(crate) struct Bridge {
    path: PathBuf,
    stop: Arc<AtomicBool>,
}

impl Bridge {
    /// Connects once to `provider_socket` (so a provider that refuses us fails the launch, with
    /// the reason), then listens in `dir` for gRPC's connections.
    pub(crate) fn start(
        name: &str,
        dir: &Path,
        provider_socket: &Path,
        tls: TlsClient,
    ) -> Result<Bridge, TlsError> {
        let first = tls.connect(provider_socket)?;
        let path = dir.join(SOCKET_NAME);
        let listener = UnixListener::bind(&path).map_err(TlsError::Handshake)?;
        let stop = Arc::new(AtomicBool::new(false));
        let state = Accepting {
            name: name.to_string(),
            provider_socket: provider_socket.to_path_buf(),
            tls,
            first: Mutex::new(Some(first)),
            stop: Arc::clone(&stop),
        };
        std::thread::Builder::new()
            .name(format!("{name}-tls"))
            .spawn(move || state.accept(listener))
            .map_err(TlsError::Handshake)?;
        Ok(Bridge { path, stop })
    }

    /// The gRPC target that reaches the provider through the bridge.
    pub(crate) fn target(&self) -> String {
        format!("unix:{}", self.path.display())
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the blocked accept, which then sees the flag.
        let _ = UnixStream::connect(&self.path);
    }
}

/// What the accept thread holds.
struct Accepting {
    name: String,
    provider_socket: PathBuf,
    tls: TlsClient,
    /// The session opened at start, used by the first connection.
    first: Mutex<Option<(UnixStream, ClientConnection)>>,
    stop: Arc<AtomicBool>,
}

impl Accepting {
    fn accept(self, listener: UnixListener) {
        for plain in listener.incoming() {
            if self.stop.load(Ordering::SeqCst) {
                return;
            }
            let Ok(plain) = plain else { continue };
            // Another process of our user (the socket's directory keeps out everyone else)
            // would reach the provider without the client certificate.
            if peer_pid(&plain) != Some(std::process::id()) {
                log::debug!(target: "provider", "{}: refused a connection from another process", self.name);
                continue;
            }
            let first = self.first.lock().ok().and_then(|mut f| f.take());
            let session = match first {
                Some(session) => session,
                None => match self.tls.connect(&self.provider_socket) {
                    Ok(session) => session,
                    Err(e) => {
                        log::debug!(target: "provider", "{}: {e}", self.name);
                        continue;
                    }
                },
            };
            let name = self.name.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("{name}-tls-conn"))
                .spawn(move || {
                    let (tls_sock, conn) = session;
                    if let Err(e) = pump(&plain, tls_sock, conn.into()) {
                        log::debug!(target: "provider", "{name}: TLS connection ended: {e}");
                    }
                });
            if let Err(e) = spawned {
                log::debug!(target: "provider", "{}: {e}", self.name);
            }
        }
    }
}

/// The process at the other end of `stream`, as the kernel recorded it when it connected
/// (`SO_PEERCRED`).
fn peer_pid(stream: &UnixStream) -> Option<u32> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` and `len` are valid for writes of the sizes given, for the call only.
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    (rc == 0 && cred.pid > 0).then_some(cred.pid as u32)
}

/// Copies bytes between gRPC's plaintext connection and the TLS session on `tls_sock` until
/// either side closes. Either end: Nivis's (a client session with the provider), or a fake
/// provider's (a server session, `tls::provider_end`).
pub(super) fn pump(
    plain: &UnixStream,
    tls_sock: UnixStream,
    mut conn: Connection,
) -> io::Result<()> {
    let mut buf = vec![0u8; CHUNK];
    let mut tls_sock = tls_sock;
    // The handshake's last read may have brought the peer's first data too (a client's first
    // bytes often travel with its Finished): the socket will not signal it again.
    if deliver(&mut conn, plain, &mut buf)? {
        return Ok(());
    }
    loop {
        flush(&mut conn, &mut tls_sock)?;
        let mut fds = [
            libc::pollfd {
                fd: plain.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: tls_sock.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: `fds` is a valid array of two pollfd for the duration of the call.
        if unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) } < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        let ready =
            |fd: &libc::pollfd| fd.revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0;
        if ready(&fds[0]) {
            let n = (&*plain).read(&mut buf)?;
            if n == 0 {
                conn.send_close_notify();
                return flush(&mut conn, &mut tls_sock);
            }
            let mut data = &buf[..n];
            while !data.is_empty() {
                let taken = conn.writer().write(data)?;
                data = &data[taken..];
                flush(&mut conn, &mut tls_sock)?;
            }
        }
        if ready(&fds[1])
            && (conn.read_tls(&mut tls_sock)? == 0 || deliver(&mut conn, plain, &mut buf)?)
        {
            return Ok(());
        }
    }
}

/// Processes the TLS records read so far and writes their plaintext to `plain`; returns
/// whether the peer has closed the session.
fn deliver(conn: &mut Connection, plain: &UnixStream, buf: &mut [u8]) -> io::Result<bool> {
    let state = conn
        .process_new_packets()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    let mut pending = state.plaintext_bytes_to_read();
    while pending > 0 {
        let n = conn.reader().read(buf)?;
        (&*plain).write_all(&buf[..n])?;
        pending = pending.saturating_sub(n.max(1));
    }
    Ok(state.peer_has_closed())
}

/// Writes every TLS record rustls has queued.
fn flush(conn: &mut Connection, tls_sock: &mut UnixStream) -> io::Result<()> {
    while conn.wants_write() {
        conn.write_tls(tls_sock)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_peer_of_a_connection_is_the_process_that_made_it() {
        let (a, _b) = UnixStream::pair().unwrap();
        assert_eq!(peer_pid(&a), Some(std::process::id()));
        // Another process connecting to a listener: its pid, not ours.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let listener = UnixListener::bind(&path).unwrap();
        let mut other = crate::child::command("python3")
            .args([
                "-c",
                "import socket,sys,time; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); time.sleep(2)",
            ])
            .arg(&path)
            .spawn()
            .expect("python3");
        let (theirs, _) = listener.accept().unwrap();
        assert_eq!(peer_pid(&theirs), Some(other.id()));
        let _ = other.kill();
        let _ = other.wait();
    }
}
