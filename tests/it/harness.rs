//! Tests of the test harness itself: what `scripts/kafka` starts is real Kafka that answers on
//! every version the suite covers, and a private cluster keeps answering while a node is down.
//!
//! The requests are hand-encoded bytes on purpose: these tests must not depend on the codecs the
//! rest of the suite exists to test.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use crate::support::broker::{self, Cluster, VERSIONS};

const API_VERSIONS: i16 = 18;
const JOIN_GROUP: i16 = 11;
const HEARTBEAT: i16 = 12;
/// KIP-848's heartbeat: 4.x brokers enable the consumer group protocol by default.
const CONSUMER_GROUP_HEARTBEAT: i16 = 68;

const IO_TIMEOUT: Duration = Duration::from_secs(10);
/// An ApiVersions response is a few hundred bytes; anything near this is not one.
const MAX_RESPONSE: usize = 1 << 20;

/// One entry of an ApiVersions response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ApiRange {
    key: i16,
    min: i16,
    max: i16,
}

/// Sends ApiVersions v0 (the one version every broker answers, whatever it supports) to `addr`
/// and returns its table.
fn api_versions(addr: SocketAddr) -> io::Result<Vec<ApiRange>> {
    const CORRELATION_ID: i32 = 0x4b47_0001;
    let client_id = b"kafka-group-it";

    // Request header v1 (api key, version, correlation id, nullable client id); the v0 body is
    // empty.
    let mut frame = Vec::new();
    frame.extend_from_slice(&API_VERSIONS.to_be_bytes());
    frame.extend_from_slice(&0i16.to_be_bytes());
    frame.extend_from_slice(&CORRELATION_ID.to_be_bytes());
    frame.extend_from_slice(&(client_id.len() as i16).to_be_bytes());
    frame.extend_from_slice(client_id);

    let mut stream = TcpStream::connect_timeout(&addr, IO_TIMEOUT)?;
    stream.set_read_timeout(Some(IO_TIMEOUT))?;
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    stream.write_all(&(frame.len() as i32).to_be_bytes())?;
    stream.write_all(&frame)?;

    let mut size = [0; 4];
    stream.read_exact(&mut size)?;
    let size = usize::try_from(i32::from_be_bytes(size))
        .ok()
        .filter(|&size| size <= MAX_RESPONSE)
        .ok_or_else(|| invalid("response size out of range"))?;
    let mut body = vec![0; size];
    stream.read_exact(&mut body)?;

    let mut r = Reader(&body);
    if r.i32()? != CORRELATION_ID {
        return Err(invalid("correlation id does not match"));
    }
    let error_code = r.i16()?;
    if error_code != 0 {
        return Err(invalid(&format!("error code {error_code}")));
    }
    let count = usize::try_from(r.i32()?).map_err(|_| invalid("negative array length"))?;
    // Checked against what arrived before anything is sized by it.
    if count * 6 > r.0.len() {
        return Err(invalid("array longer than the response"));
    }
    (0..count)
        .map(|_| {
            Ok(ApiRange {
                key: r.i16()?,
                min: r.i16()?,
                max: r.i16()?,
            })
        })
        .collect()
}

/// Big-endian reads that fail instead of panicking on a short response.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> io::Result<[u8; N]> {
        let (head, rest) = self
            .0
            .split_first_chunk::<N>()
            .ok_or_else(|| invalid("response ends early"))?;
        self.0 = rest;
        Ok(*head)
    }

    fn i16(&mut self) -> io::Result<i16> {
        self.take().map(i16::from_be_bytes)
    }

    fn i32(&mut self) -> io::Result<i32> {
        self.take().map(i32::from_be_bytes)
    }
}

fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("ApiVersions: {what}"))
}

/// Asserts that `addr` answers ApiVersions with the group APIs a classic consumer group needs.
fn assert_answers(addr: SocketAddr, version: &str) -> Vec<ApiRange> {
    let apis = api_versions(addr)
        .unwrap_or_else(|e| panic!("Kafka {version} at {addr} did not answer ApiVersions: {e}"));
    assert!(
        !apis.is_empty(),
        "Kafka {version} at {addr}: empty ApiVersions table"
    );
    for key in [JOIN_GROUP, HEARTBEAT] {
        let api = apis.iter().find(|api| api.key == key);
        assert!(
            api.is_some_and(|api| api.min <= api.max && api.max >= 4),
            "Kafka {version} at {addr}: API {key} missing or below v4: {api:?}"
        );
    }
    apis
}

#[test]
fn shared_broker_answers_api_versions() {
    let broker = broker::shared();
    for addr in broker.addrs() {
        let apis = assert_answers(addr, broker.version());
        if broker.version().starts_with("4.") {
            assert!(
                apis.iter().any(|api| api.key == CONSUMER_GROUP_HEARTBEAT),
                "Kafka {} at {addr} does not offer the consumer group protocol",
                broker.version()
            );
        }
    }
}

/// Every node answers; after one is killed the others still do and it refuses connections;
/// once restarted it answers again.
fn cluster_survives_losing_a_node(version: &str) {
    let cluster = Cluster::start(3, version);
    let version = cluster.version().to_owned();
    for node in cluster.nodes() {
        assert_answers(cluster.addr(node), &version);
    }

    let victim = 2;
    cluster.kill(victim);
    let victim_addr = cluster.addr(victim);
    assert!(
        TcpStream::connect_timeout(&victim_addr, IO_TIMEOUT).is_err(),
        "Kafka {version}: node {victim} still accepts connections after kill"
    );
    for node in cluster.nodes().filter(|&node| node != victim) {
        assert_answers(cluster.addr(node), &version);
    }

    cluster.restart(victim);
    assert_answers(victim_addr, &version);
}

#[test]
fn three_nodes_survive_losing_one_on_4x() {
    cluster_survives_losing_a_node(VERSIONS[0]);
}

#[test]
fn three_nodes_survive_losing_one_on_3_9() {
    cluster_survives_losing_a_node(VERSIONS[1]);
}
