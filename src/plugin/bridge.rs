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
//! One thread per connection, polling both non-blocking sockets: nothing blocks but `poll`,
//! so two pumps facing each other (Nivis and a fake provider) cannot each wait for the other's
//! read. gRPC opens one connection per channel, so a provider has one such thread, plus the
//! accept thread.

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
///
/// Both sockets are non-blocking and nothing is written until `poll` says it fits: when both
/// ends of a session are this pump (Nivis and a fake), a write that blocked would wait for a
/// peer blocked the same way (seen: two large exchanges at once hung both processes). Reading
/// stops while what was read cannot be passed on (TLS records queued for the peer, plaintext
/// queued for gRPC), so neither queue grows without bound.
pub(super) fn pump(plain: &UnixStream, tls_sock: UnixStream, conn: Connection) -> io::Result<()> {
    plain.set_nonblocking(true)?;
    tls_sock.set_nonblocking(true)?;
    let mut session = Session {
        conn,
        tls_sock,
        to_plain: Vec::new(),
        plain_closed: false,
        peer_closed: false,
    };
    // The handshake's last read may have brought the peer's first data too (a client's first
    // bytes often travel with its Finished): the socket will not signal it again.
    session.take_plaintext()?;
    let mut buf = vec![0u8; CHUNK];
    loop {
        session.write_tls()?;
        session.write_plain(plain)?;
        if session.done() {
            return Ok(());
        }
        let (plain_events, tls_events) = session.interest();
        let mut fds = [
            libc::pollfd {
                fd: plain.as_raw_fd(),
                events: plain_events,
                revents: 0,
            },
            libc::pollfd {
                fd: session.tls_sock.as_raw_fd(),
                events: tls_events,
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
        let readable = |fd: &libc::pollfd, asked: i16| {
            asked & libc::POLLIN != 0
                && fd.revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0
        };
        if readable(&fds[0], plain_events) {
            session.read_plain(plain, &mut buf)?;
        }
        if readable(&fds[1], tls_events) {
            session.read_tls()?;
        }
    }
}

/// One bridged connection's TLS side and what waits to be passed on.
struct Session {
    conn: Connection,
    tls_sock: UnixStream,
    /// Plaintext from the peer not yet taken by gRPC.
    to_plain: Vec<u8>,
    /// gRPC closed its side: close_notify is queued, and the session ends once it is sent.
    plain_closed: bool,
    /// The peer closed the session (or its socket): it ends once `to_plain` is passed on.
    peer_closed: bool,
}

impl Session {
    /// What to wait for on the plaintext and the TLS socket (`poll` events).
    fn interest(&self) -> (i16, i16) {
        let mut plain = 0;
        let mut tls = 0;
        if !self.to_plain.is_empty() {
            plain |= libc::POLLOUT;
        } else if !self.peer_closed {
            tls |= libc::POLLIN;
        }
        if self.conn.wants_write() {
            tls |= libc::POLLOUT;
        } else if !self.plain_closed {
            plain |= libc::POLLIN;
        }
        (plain, tls)
    }

    /// Whether the session is over: either side closed and what it left is passed on.
    fn done(&self) -> bool {
        (self.plain_closed && !self.conn.wants_write())
            || (self.peer_closed && self.to_plain.is_empty())
    }

    /// Reads what gRPC sent and queues it as TLS records.
    fn read_plain(&mut self, plain: &UnixStream, buf: &mut [u8]) -> io::Result<()> {
        match would_block((&*plain).read(buf))? {
            None => Ok(()),
            Some(0) => {
                self.conn.send_close_notify();
                self.plain_closed = true;
                Ok(())
            }
            Some(n) => {
                let mut data = &buf[..n];
                while !data.is_empty() {
                    let taken = self.conn.writer().write(data)?;
                    data = &data[taken..];
                }
                Ok(())
            }
        }
    }

    /// Reads TLS records from the peer and queues their plaintext for gRPC.
    fn read_tls(&mut self) -> io::Result<()> {
        match would_block(self.conn.read_tls(&mut self.tls_sock))? {
            None => Ok(()),
            Some(0) => {
                self.peer_closed = true;
                Ok(())
            }
            Some(_) => self.take_plaintext(),
        }
    }

    /// Processes the records read so far into `to_plain`.
    fn take_plaintext(&mut self) -> io::Result<()> {
        let state = (self.conn)
            .process_new_packets()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        if state.plaintext_bytes_to_read() > 0 {
            self.conn
                .reader()
                .read_to_end(&mut self.to_plain)
                .or_else(|e| {
                    // The reader says WouldBlock once what was decrypted is taken.
                    (e.kind() == io::ErrorKind::WouldBlock)
                        .then_some(0)
                        .ok_or(e)
                })?;
        }
        self.peer_closed |= state.peer_has_closed();
        Ok(())
    }

    /// Writes as many queued TLS records as the socket takes now.
    fn write_tls(&mut self) -> io::Result<()> {
        while self.conn.wants_write() {
            if would_block(self.conn.write_tls(&mut self.tls_sock))?.is_none() {
                break;
            }
        }
        Ok(())
    }

    /// Passes on as much of `to_plain` as gRPC takes now.
    fn write_plain(&mut self, plain: &UnixStream) -> io::Result<()> {
        while !self.to_plain.is_empty() {
            match would_block((&*plain).write(&self.to_plain))? {
                None => break,
                Some(n) => {
                    self.to_plain.drain(..n);
                }
            }
        }
        Ok(())
    }
}

/// `Ok(None)` for a non-blocking call that would have blocked.
fn would_block(result: io::Result<usize>) -> io::Result<Option<usize>> {
    match result {
        Ok(n) => Ok(Some(n)),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
        Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(None),
        Err(e) => Err(e),
    }
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
