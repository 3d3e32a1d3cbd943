//! A scripted fake broker for exact error paths a real broker never takes (hostile frames,
//! KIP-511 edge cases). It never stands in for a real broker in a feature test.

use kafka_group::unstable::protocol::messages::api_versions_response::ApiVersion;
use kafka_group::unstable::protocol::messages::{ApiVersionsResponse, RequestHeader};
use kafka_group::unstable::protocol::{Decoder, Message};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// A request as the fake broker saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub api_key: i16,
    pub api_version: i16,
    pub correlation_id: i32,
}

/// What to do with one request.
pub enum Reply {
    /// Send this frame body (after the size prefix, which is added).
    Frame(Vec<u8>),
    /// Write these raw bytes (no size prefix added), then keep the connection open.
    Raw(Vec<u8>),
    /// Write these raw bytes, then close.
    RawThenClose(Vec<u8>),
    /// Close without answering.
    Close,
}

/// A fake broker on loopback that answers each request through a script.
pub struct Scripted {
    pub addr: SocketAddr,
    pub seen: Arc<Mutex<Vec<Seen>>>,
    handle: Option<JoinHandle<()>>,
    /// Set for [`Scripted::start_many`]'s accept loop, which runs until told to stop.
    stop: Option<Arc<std::sync::atomic::AtomicBool>>,
}

impl Scripted {
    /// Serves connections one after the other until the script returns `Close` on the last.
    pub fn start(script: impl FnMut(&Seen) -> Reply + Send + 'static) -> Scripted {
        Self::start_with(|s| Some(Box::new(s) as Box<dyn ReadWrite>), script)
    }

    /// [`Scripted::start`] over TLS with `tls` as the server's configuration: the handshake is
    /// done before the first request is read; a failed handshake ends the connection.
    pub fn start_tls(
        tls: Arc<rustls::ServerConfig>,
        script: impl FnMut(&Seen) -> Reply + Send + 'static,
    ) -> Scripted {
        Self::start_with(
            move |s| {
                let conn = rustls::ServerConnection::new(tls.clone()).ok()?;
                let mut t = rustls::StreamOwned::new(conn, s);
                while t.conn.is_handshaking() {
                    t.conn.complete_io(&mut t.sock).ok()?;
                }
                Some(Box::new(t) as Box<dyn ReadWrite>)
            },
            script,
        )
    }

    fn start_with(
        wrap: impl FnOnce(TcpStream) -> Option<Box<dyn ReadWrite>> + Send + 'static,
        mut script: impl FnMut(&Seen) -> Reply + Send + 'static,
    ) -> Scripted {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let seen2 = seen.clone();
        let handle = std::thread::spawn(move || {
            // One connection is all these tests use.
            let Ok((s, _)) = listener.accept() else { return };
            let Some(mut s) = wrap(s) else { return };
            loop {
                let Some(req) = read_request(&mut s) else { return };
                seen2.lock().unwrap().push(req.clone());
                match script(&req) {
                    Reply::Frame(body) => {
                        let mut out = (body.len() as i32).to_be_bytes().to_vec();
                        out.extend(body);
                        if s.write_all(&out).and_then(|()| s.flush()).is_err() {
                            return;
                        }
                    }
                    Reply::Raw(bytes) => {
                        let _ = s.write_all(&bytes).and_then(|()| s.flush());
                    }
                    Reply::RawThenClose(bytes) => {
                        let _ = s.write_all(&bytes).and_then(|()| s.flush());
                        return;
                    }
                    Reply::Close => return,
                }
            }
        });
        Scripted {
            addr,
            seen,
            handle: Some(handle),
            stop: None,
        }
    }

    /// Serves every connection, each on a thread of its own, through one script that is also
    /// given the fake broker's address (to advertise itself in Metadata): for clients that
    /// open a connection per broker besides the bootstrap one.
    pub fn start_many(script: impl FnMut(&Seen, SocketAddr) -> Reply + Send + 'static) -> Scripted {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let seen2 = seen.clone();
        let script = Arc::new(Mutex::new(script));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stop2 = stop.clone();
        let handle = std::thread::spawn(move || {
            for s in listener.incoming() {
                if stop2.load(std::sync::atomic::Ordering::Relaxed) {
                    return;
                }
                let Ok(mut s) = s else { return };
                let (seen, script) = (seen2.clone(), script.clone());
                // Ends with its connection; not joined (a client may keep it open).
                std::thread::spawn(move || loop {
                    let Some(req) = read_request(&mut s) else { return };
                    seen.lock().unwrap().push(req.clone());
                    let reply = (script.lock().unwrap())(&req, addr);
                    match reply {
                        Reply::Frame(body) => {
                            let mut out = (body.len() as i32).to_be_bytes().to_vec();
                            out.extend(body);
                            if s.write_all(&out).and_then(|()| s.flush()).is_err() {
                                return;
                            }
                        }
                        Reply::Raw(bytes) => {
                            let _ = s.write_all(&bytes).and_then(|()| s.flush());
                        }
                        Reply::RawThenClose(bytes) => {
                            let _ = s.write_all(&bytes).and_then(|()| s.flush());
                            return;
                        }
                        Reply::Close => return,
                    }
                });
            }
        });
        Scripted {
            addr,
            seen,
            handle: Some(handle),
            stop: Some(stop),
        }
    }

    pub fn versions_seen(&self, api_key: i16) -> Vec<i16> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|s| s.api_key == api_key)
            .map(|s| s.api_version)
            .collect()
    }
}

impl Drop for Scripted {
    fn drop(&mut self) {
        if let Some(stop) = &self.stop {
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        // Unblock a pending accept so the thread ends.
        let _ = TcpStream::connect(self.addr);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// The fake broker's side of a connection: TCP, or TLS over it.
pub trait ReadWrite: Read + Write + Send {}
impl<T: Read + Write + Send> ReadWrite for T {}

fn read_request(s: &mut dyn ReadWrite) -> Option<Seen> {
    let mut size = [0u8; 4];
    s.read_exact(&mut size).ok()?;
    let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
    s.read_exact(&mut body).ok()?;
    let frame_bytes = bytes::Bytes::from(body);
    let mut d = Decoder::new(&frame_bytes);
    // Header v1 is a prefix of v2, and all we need is in the prefix.
    let h = RequestHeader::decode(&mut d, 1).ok()?;
    Some(Seen {
        api_key: h.request_api_key,
        api_version: h.request_api_version,
        correlation_id: h.correlation_id,
    })
}

/// An ApiVersions response body (correlation id + response) at `version`.
pub fn api_versions_frame(
    correlation_id: i32,
    version: i16,
    error: i16,
    apis: &[(i16, i16, i16)],
) -> Vec<u8> {
    let mut out = correlation_id.to_be_bytes().to_vec();
    let resp = ApiVersionsResponse {
        error_code: error,
        api_keys: apis
            .iter()
            .map(|&(k, a, b)| ApiVersion {
                api_key: k,
                min_version: a,
                max_version: b,
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    };
    resp.encode(version, &mut out).unwrap();
    out
}

/// A table that supports everything the client has (for tests past the handshake).
pub fn full_table() -> Vec<(i16, i16, i16)> {
    kafka_group::ApiKey::ALL
        .iter()
        .map(|a| (a.key(), a.versions().min, a.versions().max))
        .collect()
}
