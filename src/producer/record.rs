//! What an application hands the producer: [`ProducerRecord`] and the [`Acks`] it is written with.

use bytes::Bytes;
use std::fmt;

/// Bytes a record adds to a batch beyond its key, value and headers: in a record batch the
/// length, attributes, timestamp and offset deltas, key and value lengths and header count are
/// varints, at most about 21 bytes together for records below 2 MiB.
pub(super) const RECORD_OVERHEAD: usize = 21;
/// Per header, its key and value length varints.
pub(super) const HEADER_OVERHEAD: usize = 6;

/// `acks`: how many replicas must have a batch before the broker acknowledges it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Acks {
    /// `acks=all` (-1): every in-sync replica. The default.
    #[default]
    All,
    /// `acks=1`: the leader only; records are lost if it fails before followers copy them.
    Leader,
    /// `acks=0`: no acknowledgement at all; the broker sends no response, so no offsets are
    /// reported and broker-side errors go unnoticed: records a broker refuses (e.g. for a
    /// partition it does not lead, as right after a topic is created) are dropped, and the
    /// broker only closes the connection.
    None,
}

impl std::str::FromStr for Acks {
    type Err = crate::Error;

    /// Parses Kafka's values: `all` or `-1`, `1`, `0`.
    fn from_str(s: &str) -> crate::Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "all" | "-1" => Ok(Acks::All),
            "1" => Ok(Acks::Leader),
            "0" => Ok(Acks::None),
            _ => Err(crate::Error::Config {
                property: "acks",
                problem: format!("{s:?} is not one of all, -1, 1, 0"),
            }),
        }
    }
}

impl Acks {
    /// The value sent in ProduceRequest's `acks`.
    pub fn code(self) -> i16 {
        match self {
            Acks::All => -1,
            Acks::Leader => 1,
            Acks::None => 0,
        }
    }
}

impl fmt::Display for Acks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Acks::All => "all",
            Acks::Leader => "1",
            Acks::None => "0",
        })
    }
}

/// A record to send.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProducerRecord {
    /// Topic.
    pub topic: String,
    /// Partition; `None` lets the partitioner choose from the key.
    pub partition: Option<i32>,
    /// Key, if any (decides the partition when `partition` is `None`).
    pub key: Option<Bytes>,
    /// Value; `None` is a tombstone.
    pub value: Option<Bytes>,
    /// Headers, in order (brokers from 0.11).
    pub headers: Vec<(String, Option<Bytes>)>,
    /// Create time in milliseconds since the epoch; `None` takes the time of `send`.
    pub timestamp: Option<i64>,
}

impl ProducerRecord {
    /// A record with a value and no key.
    pub fn new(topic: impl Into<String>, value: impl Into<Bytes>) -> Self {
        ProducerRecord {
            topic: topic.into(),
            value: Some(value.into()),
            ..Default::default()
        }
    }

    /// Sets the key.
    pub fn key(mut self, key: impl Into<Bytes>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// Sends to this partition, whatever the key.
    pub fn partition(mut self, partition: i32) -> Self {
        self.partition = Some(partition);
        self
    }

    /// Adds a header.
    pub fn header(mut self, key: impl Into<String>, value: impl Into<Bytes>) -> Self {
        self.headers.push((key.into(), Some(value.into())));
        self
    }

    /// Sets the create time (milliseconds since the epoch).
    pub fn timestamp(mut self, ms: i64) -> Self {
        self.timestamp = Some(ms);
        self
    }

    /// An estimate of the record's size in a record batch, for `batch.size` and
    /// `max.request.size`.
    pub(super) fn size(&self) -> usize {
        estimated_size(&self.key, &self.value, &self.headers)
    }
}

/// [`ProducerRecord::size`] of a record already in a batch (splitting a batch needs it).
pub(super) fn queued_size(r: &crate::records::NewRecord) -> usize {
    estimated_size(&r.key, &r.value, &r.headers)
}

fn estimated_size(key: &Option<Bytes>, value: &Option<Bytes>, headers: &[(String, Option<Bytes>)]) -> usize {
    let len = |b: &Option<Bytes>| b.as_ref().map_or(0, Bytes::len);
    RECORD_OVERHEAD
        + len(key)
        + len(value)
        + headers
            .iter()
            .map(|(k, v)| HEADER_OVERHEAD + k.len() + len(v))
            .sum::<usize>()
}
