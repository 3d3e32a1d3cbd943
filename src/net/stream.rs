//! The byte stream under a connection: plain TCP, or TLS over TCP. Timeouts, `peek` and
//! shutdown always act on the TCP socket underneath.

use super::tls::{server_name, Tls};
use rustls::{ClientConnection, StreamOwned};
use std::io::{self, IoSlice, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Plain TCP or TLS over it.
#[derive(Debug)]
pub(crate) enum Stream {
    Plain(TcpStream),
    Tls(Box<StreamOwned<ClientConnection, TcpStream>>),
}

impl Stream {
    /// Wraps `tcp` in TLS for `host` (the name checked against the broker's certificate and
    /// sent as SNI) and completes the handshake within `timeout`.
    pub(crate) fn tls(tcp: TcpStream, host: &str, tls: &Tls, timeout: Duration) -> io::Result<Stream> {
        let name =
            server_name(host).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        let conn = ClientConnection::new(tls.0.clone(), name).map_err(io::Error::other)?;
        let mut s = StreamOwned::new(conn, tcp);
        let deadline = crate::deadline::after(timeout);
        while s.conn.is_handshaking() {
            let left = crate::deadline::left(deadline);
            if left.is_zero() {
                return Err(io::ErrorKind::TimedOut.into());
            }
            s.sock.set_read_timeout(Some(left))?;
            s.conn.complete_io(&mut s.sock)?;
        }
        Ok(Stream::Tls(Box::new(s)))
    }

    /// The TCP socket underneath.
    pub(crate) fn tcp(&self) -> &TcpStream {
        match self {
            Stream::Plain(s) => s,
            Stream::Tls(s) => &s.sock,
        }
    }

    /// Whether response bytes can be read before `until`, without consuming any. For TLS that
    /// means decrypted bytes: records that carry no data (a TLS 1.3 session ticket) are taken
    /// in and the wait goes on. Looks at least once even when `until` has passed.
    pub(crate) fn wait_readable(&mut self, until: Instant) -> io::Result<bool> {
        loop {
            if let Stream::Tls(s) = self {
                let state = s.conn.process_new_packets().map_err(io::Error::other)?;
                if state.plaintext_bytes_to_read() > 0 {
                    return Ok(true);
                }
            }
            // A zero read timeout would mean "block forever" to the socket.
            let left = crate::deadline::left(until).max(Duration::from_millis(1));
            self.tcp().set_read_timeout(Some(left))?;
            match self.tcp().peek(&mut [0u8; 1]) {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "broker closed the connection",
                    ))
                }
                Ok(_) => match self {
                    Stream::Plain(_) => return Ok(true),
                    Stream::Tls(s) => {
                        // Bytes are there, so this read does not block.
                        let StreamOwned { conn, sock } = &mut **s;
                        if conn.read_tls(sock)? == 0 {
                            return Err(io::Error::new(
                                io::ErrorKind::UnexpectedEof,
                                "broker closed the connection",
                            ));
                        }
                    }
                },
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                    if Instant::now() >= until {
                        return Ok(false);
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.read(buf),
            Stream::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.write(buf),
            Stream::Tls(s) => s.write(buf),
        }
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.write_vectored(bufs),
            // rustls takes as many pieces as its buffer holds into TLS records (the default
            // would take one piece a call); they go to the socket before the next call, so the
            // buffer never stays full.
            Stream::Tls(s) => {
                let n = s.conn.writer().write_vectored(bufs)?;
                while s.conn.wants_write() {
                    s.conn.write_tls(&mut s.sock)?;
                }
                Ok(n)
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Plain(s) => s.flush(),
            Stream::Tls(s) => s.flush(),
        }
    }
}
