//! A bare Kafka connection for tests that need to see exactly what goes over the wire: one
//! request at a time, framed with the crate's own codecs, no negotiation and no retries.

use kafka_group::unstable::protocol::messages::{RequestHeader, ResponseHeader};
use kafka_group::unstable::protocol::{Decoder, Message, Request};
use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// How long a test waits for a response unless it says otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// A blocking connection that sends requests and reads their responses.
pub struct WireClient {
    stream: TcpStream,
    next_correlation_id: i32,
}

fn invalid(e: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e.to_string())
}

impl WireClient {
    /// Connects with a [`DEFAULT_TIMEOUT`] read timeout.
    pub fn connect(addr: impl ToSocketAddrs) -> io::Result<WireClient> {
        let stream = TcpStream::connect(addr)?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(DEFAULT_TIMEOUT))?;
        Ok(WireClient {
            stream,
            next_correlation_id: 1,
        })
    }

    /// Read timeout for the responses that follow (`None`: wait forever).
    pub fn set_timeout(&self, timeout: Option<Duration>) {
        self.stream.set_read_timeout(timeout).expect("set read timeout");
    }

    /// Sends `req` at `version` and returns its correlation id.
    pub fn send<R: Request>(&mut self, req: &R, version: i16) -> io::Result<i32> {
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id += 1;
        let header = RequestHeader {
            request_api_key: R::API_KEY.key(),
            request_api_version: version,
            correlation_id,
            client_id: Some("kafka-group-it".into()),
            ..Default::default()
        };
        let mut buf = vec![0; 4];
        header
            .encode(R::header_version(version), &mut buf)
            .map_err(invalid)?;
        req.encode(version, &mut buf).map_err(invalid)?;
        let len = u32::try_from(buf.len() - 4).map_err(invalid)?;
        buf[..4].copy_from_slice(&len.to_be_bytes());
        self.stream.write_all(&buf)?;
        Ok(correlation_id)
    }

    /// Reads one whole frame (without its size prefix). EOF before the frame is
    /// `UnexpectedEof`; a read timeout is `WouldBlock` or `TimedOut`, depending on the platform.
    pub fn recv_frame(&mut self) -> io::Result<Vec<u8>> {
        let mut size = [0u8; 4];
        self.stream.read_exact(&mut size)?;
        let len = usize::try_from(i32::from_be_bytes(size)).map_err(invalid)?;
        let mut frame = vec![0; len];
        self.stream.read_exact(&mut frame)?;
        Ok(frame)
    }

    /// Reads the response to a request of type `R` sent at `version` with `correlation_id`.
    pub fn recv<R: Request>(&mut self, version: i16, correlation_id: i32) -> io::Result<R::Response> {
        let frame = self.recv_frame()?;
        decode_response::<R>(frame, version, correlation_id)
    }

    /// Sends `req` and waits for its response.
    pub fn call<R: Request>(&mut self, req: &R, version: i16) -> io::Result<R::Response> {
        let correlation_id = self.send(req, version)?;
        self.recv::<R>(version, correlation_id)
    }
}

/// Decodes a response frame, checking the correlation id and that nothing is left over.
pub fn decode_response<R: Request>(
    frame: Vec<u8>,
    version: i16,
    correlation_id: i32,
) -> io::Result<R::Response> {
    let frame_bytes = bytes::Bytes::from(frame);
    let mut d = Decoder::new(&frame_bytes);
    let header = ResponseHeader::decode(&mut d, R::response_header_version(version)).map_err(invalid)?;
    if header.correlation_id != correlation_id {
        return Err(invalid(format!(
            "response has correlation id {}, expected {correlation_id}",
            header.correlation_id
        )));
    }
    let body = <R::Response as Message>::decode(&mut d, version).map_err(invalid)?;
    match d.remaining() {
        0 => Ok(body),
        n => Err(invalid(format!("{n} bytes after the {} response", R::NAME))),
    }
}

/// Whether an error is what a read timeout looks like.
pub fn is_timeout(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut)
}
