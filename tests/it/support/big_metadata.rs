//! A fake broker whose Metadata answer is one topic of very many partitions, and the peak-RSS
//! measurement of a client handling that answer in a process of its own (a 68 MB
//! answer once peaked at over 6× its size). Shared by `memory_tests` and
//! `bench/metadata_memory.rs`, which includes this file by path: it uses only `std` and the
//! crate.
//!
//! Peak memory is a property of a whole process, so the client runs in a child process (the
//! caller's own executable, re-run in a mode it recognises) while the fake broker, which holds
//! the encoded answer, stays in the parent and does not count.

// Each user takes the parts it needs.
#![allow(dead_code)]

use kafka_group::unstable::protocol::messages::api_versions_response::ApiVersion;
use kafka_group::unstable::protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_group::unstable::protocol::messages::produce_response::{
    PartitionProduceResponse, TopicProduceResponse,
};
use kafka_group::unstable::protocol::messages::{
    ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse, ProduceRequest,
    ProduceResponse, RequestHeader, ResponseHeader,
};
use kafka_group::unstable::protocol::{ApiKey, Decoder, Message, Request, Uuid};
use kafka_group::unstable::RawClient;
use kafka_group::{Client, Producer, ProducerRecord};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The one topic of the answer.
pub const TOPIC: &str = "big-metadata";

/// What the child process does while its peak RSS is measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// `Client::refresh_metadata` for the topic.
    Refresh,
    /// A producer's first send to the topic (which fetches its metadata), and a flush.
    Produce,
    /// `Client::refresh_metadata` again, the same answer, while the first one's is cached.
    Again,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::Refresh => "refresh",
            Phase::Produce => "produce",
            Phase::Again => "again",
        }
    }

    pub fn parse(s: &str) -> Option<Phase> {
        [Phase::Refresh, Phase::Produce, Phase::Again]
            .into_iter()
            .find(|p| p.name() == s)
    }
}

/// The fake broker: answers ApiVersions, Metadata (the big answer, at whatever version is
/// asked) and Produce (every partition written at offset 0), on as many connections as the
/// client opens; anything else closes the connection.
pub struct BigMetadata {
    pub addr: SocketAddr,
    partitions: i32,
    /// The encoded Metadata answer per version, made on first use.
    encoded: Arc<Mutex<HashMap<i16, Arc<Vec<u8>>>>>,
    stop: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl BigMetadata {
    /// Starts a broker whose topic has `partitions` partitions, each with replicas and ISR
    /// `[1, 2]` and leader 1 or 2 in turn (both brokers are this one's address). Two replicas
    /// make the v12 answer 34 bytes a partition, as in the report (68 MB for 2 M partitions).
    pub fn start(partitions: i32) -> BigMetadata {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let encoded: Arc<Mutex<HashMap<i16, Arc<Vec<u8>>>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let (encoded2, stop2) = (encoded.clone(), stop.clone());
        let handle = std::thread::spawn(move || {
            for s in listener.incoming() {
                if stop2.load(Ordering::Relaxed) {
                    return;
                }
                let Ok(s) = s else { continue };
                let encoded = encoded2.clone();
                std::thread::spawn(move || serve(s, addr, partitions, &encoded));
            }
        });
        BigMetadata {
            addr,
            partitions,
            encoded,
            stop,
            handle: Some(handle),
        }
    }

    /// The size of the Metadata answer's frame at `version` (the length prefix's value).
    pub fn frame_len(&self, version: i16) -> usize {
        let header = header_len(MetadataRequest::response_header_version(version));
        header + encoded(&self.encoded, version, self.addr, self.partitions).len()
    }
}

impl Drop for BigMetadata {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Unblocks the accept so that the thread sees `stop`.
        let _ = TcpStream::connect(self.addr);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

fn header_len(version: i16) -> usize {
    let mut out = Vec::new();
    ResponseHeader::default().encode(version, &mut out).unwrap();
    out.len()
}

fn encoded(
    cache: &Mutex<HashMap<i16, Arc<Vec<u8>>>>,
    version: i16,
    addr: SocketAddr,
    partitions: i32,
) -> Arc<Vec<u8>> {
    let mut cache = cache.lock().unwrap();
    cache
        .entry(version)
        .or_insert_with(|| {
            let mut out = Vec::new();
            response(addr, partitions).encode(version, &mut out).unwrap();
            Arc::new(out)
        })
        .clone()
}

fn response(addr: SocketAddr, partitions: i32) -> MetadataResponse {
    let broker = |id: i32| MetadataResponseBroker {
        node_id: id,
        host: addr.ip().to_string().as_str().into(),
        port: addr.port().into(),
        ..Default::default()
    };
    MetadataResponse {
        brokers: vec![broker(1), broker(2)],
        cluster_id: Some("big-metadata-cluster".into()),
        controller_id: 1,
        topics: vec![MetadataResponseTopic {
            name: Some(TOPIC.into()),
            topic_id: Uuid([7; 16]),
            partitions: (0..partitions)
                .map(|i| MetadataResponsePartition {
                    partition_index: i,
                    leader_id: 1 + i % 2,
                    leader_epoch: 0,
                    replica_nodes: [1, 2].into(),
                    isr_nodes: [1, 2].into(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn serve(mut s: TcpStream, addr: SocketAddr, partitions: i32, cache: &Mutex<HashMap<i16, Arc<Vec<u8>>>>) {
    loop {
        let mut size = [0u8; 4];
        if s.read_exact(&mut size).is_err() {
            return;
        }
        let mut body = vec![0u8; i32::from_be_bytes(size).max(0) as usize];
        if s.read_exact(&mut body).is_err() || body.len() < 4 {
            return;
        }
        let key = i16::from_be_bytes([body[0], body[1]]);
        let version = i16::from_be_bytes([body[2], body[3]]);
        let frame = bytes::Bytes::from(body);
        let mut d = Decoder::new(&frame);
        let answer: Option<(i32, i16, Arc<Vec<u8>>)> = match ApiKey::from_key(key) {
            Some(ApiKey::ApiVersions) => {
                let Ok(h) = RequestHeader::decode(&mut d, ApiVersionsRequest::header_version(version)) else {
                    return;
                };
                // Answered at v0 when the version is one this client does not know (KIP-511).
                let v = if ApiKey::ApiVersions.versions().contains(version) {
                    version
                } else {
                    0
                };
                let resp = ApiVersionsResponse {
                    api_keys: ApiKey::ALL
                        .iter()
                        .map(|a| ApiVersion {
                            api_key: a.key(),
                            min_version: a.versions().min,
                            max_version: a.versions().max,
                            ..Default::default()
                        })
                        .collect(),
                    ..Default::default()
                };
                let mut out = Vec::new();
                resp.encode(v, &mut out).unwrap();
                Some((h.correlation_id, 0, Arc::new(out)))
            }
            Some(ApiKey::Metadata) => {
                let Ok(h) = RequestHeader::decode(&mut d, MetadataRequest::header_version(version)) else {
                    return;
                };
                Some((
                    h.correlation_id,
                    MetadataRequest::response_header_version(version),
                    encoded(cache, version, addr, partitions),
                ))
            }
            Some(ApiKey::Produce) => {
                let Ok(h) = RequestHeader::decode(&mut d, ProduceRequest::header_version(version)) else {
                    return;
                };
                let Ok(req) = ProduceRequest::decode(&mut d, version) else {
                    return;
                };
                let resp = ProduceResponse {
                    responses: req
                        .topic_data
                        .iter()
                        .map(|t| TopicProduceResponse {
                            name: t.name.clone(),
                            partition_responses: t
                                .partition_data
                                .iter()
                                .map(|p| PartitionProduceResponse {
                                    index: p.index,
                                    base_offset: 0,
                                    ..Default::default()
                                })
                                .collect(),
                            ..Default::default()
                        })
                        .collect(),
                    ..Default::default()
                };
                let mut out = Vec::new();
                resp.encode(version, &mut out).unwrap();
                Some((
                    h.correlation_id,
                    ProduceRequest::response_header_version(version),
                    Arc::new(out),
                ))
            }
            _ => None,
        };
        let Some((correlation_id, header_version, body)) = answer else {
            return;
        };
        let mut header = Vec::new();
        ResponseHeader {
            correlation_id,
            ..Default::default()
        }
        .encode(header_version, &mut header)
        .unwrap();
        let size = (header.len() + body.len()) as i32;
        let ok = s.write_all(&size.to_be_bytes()).is_ok()
            && s.write_all(&header).is_ok()
            && s.write_all(&body).is_ok();
        if !ok {
            return;
        }
    }
}

/// This process's peak RSS (`VmHWM`) in KiB.
pub fn peak_rss_kib() -> u64 {
    status_kib("VmHWM:")
}

/// This process's current RSS (`VmRSS`) in KiB.
pub fn rss_kib() -> u64 {
    status_kib("VmRSS:")
}

fn status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

/// Resets `VmHWM` to the current RSS (Linux 4.0+); false if the kernel refused.
pub fn reset_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// What the child measured.
#[derive(Debug, Clone, Copy)]
pub struct Measured {
    /// RSS when the phase started, KiB.
    pub before_kib: u64,
    /// Peak RSS during the phase, KiB.
    pub peak_kib: u64,
    /// Partitions the client saw.
    pub partitions: usize,
}

impl Measured {
    /// How far the peak rose above the start, KiB.
    pub fn growth_kib(&self) -> u64 {
        self.peak_kib.saturating_sub(self.before_kib)
    }

    /// The line the child prints for its parent.
    pub fn line(&self) -> String {
        format!(
            "big-metadata: before_kib={} peak_kib={} partitions={}",
            self.before_kib, self.peak_kib, self.partitions
        )
    }

    /// Reads [`line`](Self::line) back out of the child's output.
    pub fn parse(output: &str) -> Option<Measured> {
        // The test harness may print its own words before it on the same line.
        const TAG: &str = "big-metadata: ";
        let line = output
            .lines()
            .find_map(|l| Some(&l[l.find(TAG)? + TAG.len()..]))?;
        let field = |name: &str| -> Option<u64> {
            line.split_whitespace()
                .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))?
                .parse()
                .ok()
        };
        Some(Measured {
            before_kib: field("before_kib")?,
            peak_kib: field("peak_kib")?,
            partitions: field("partitions")? as usize,
        })
    }
}

/// The child's work: connects to `addr` (handshake and all, outside the measurement), then
/// runs `phase` with the peak RSS reset just before.
pub fn run_phase(addr: &str, phase: Phase) -> Measured {
    let client = Client::builder()
        .bootstrap_servers(addr)
        .client_id("big-metadata")
        .request_timeout(Duration::from_secs(120))
        .build()
        .unwrap();
    // Opens the bootstrap connection, so that only the Metadata answer's handling is measured.
    client.any_broker_versions().unwrap();
    let first = (phase == Phase::Again).then(|| client.refresh_metadata(Some(&[TOPIC])).unwrap());
    assert!(reset_peak(), "/proc/self/clear_refs is not writable");
    let before_kib = rss_kib();
    let partitions = match phase {
        Phase::Refresh | Phase::Again => {
            let meta = client.refresh_metadata(Some(&[TOPIC])).unwrap();
            meta.topics[TOPIC].partitions.len()
        }
        Phase::Produce => {
            // The fake broker answers Metadata and Produce only: no producer id to hand out.
            let mut producer = Producer::builder(&client)
                .enable_idempotence(false)
                .max_block(Duration::from_secs(120))
                .build()
                .unwrap();
            let handle = producer.send(ProducerRecord::new(TOPIC, "v")).unwrap();
            producer.flush().unwrap();
            let written = handle.try_result().unwrap().unwrap();
            assert!(written.offset.is_some(), "{written:?}");
            client.cached_metadata().topics[TOPIC].partitions.len()
        }
    };
    drop(first);
    Measured {
        before_kib,
        peak_kib: peak_rss_kib(),
        partitions,
    }
}
