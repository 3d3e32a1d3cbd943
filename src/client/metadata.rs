//! What the client knows of the cluster: [`Metadata`] and its brokers, topics and partitions,
//! the Metadata request, and the reading of a Metadata answer straight into the cache's form
//! (pure, tested against the generated decoder at every version).

use crate::authorization::Scope;
use crate::error::Error;
use crate::protocol::messages::metadata_request::MetadataRequestTopic;
use crate::protocol::messages::metadata_response::{MetadataResponseBroker, MetadataResponsePartition};
use crate::protocol::messages::{MetadataRequest, MetadataResponse};
use crate::protocol::{ApiKey, DecodeError, Decoder, Message, Uuid};
use crate::KafkaCode;
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

/// A broker as the cluster describes it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Broker {
    /// `node.id`.
    pub id: i32,
    /// Advertised host.
    pub host: String,
    /// Advertised port.
    pub port: u16,
    /// `broker.rack`, if set.
    pub rack: Option<String>,
}

impl Broker {
    /// `host:port`.
    pub fn addr(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }
}

/// One partition's placement.
///
/// A cluster's metadata can hold millions of these, so they are small: the replica and ISR
/// lists are shared slices (`Arc<[i32]>`), one per distinct list in a Metadata answer rather
/// than two allocations per partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionMetadata {
    /// Partition index.
    pub partition: i32,
    /// Leader broker id, -1 when there is none.
    pub leader: i32,
    /// Leader epoch, -1 when unknown (brokers before 2.1).
    pub leader_epoch: i32,
    /// Replica broker ids.
    pub replicas: Arc<[i32]>,
    /// In-sync replica broker ids.
    pub isr: Arc<[i32]>,
    /// Partition-level error.
    pub error: KafkaCode,
}

/// One topic's metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicMetadata {
    /// Topic name.
    pub name: String,
    /// Topic id (nil before Kafka 2.8).
    pub id: Uuid,
    /// Topic-level error (e.g. `UNKNOWN_TOPIC_OR_PARTITION`).
    pub error: KafkaCode,
    /// Whether it is an internal topic such as `__consumer_offsets`.
    pub internal: bool,
    /// Partitions, sorted by index.
    pub partitions: Vec<PartitionMetadata>,
}

/// A snapshot of the cluster's metadata.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Metadata {
    /// Cluster id (from Kafka 0.10.1).
    pub cluster_id: Option<String>,
    /// Controller broker id, -1 if unknown.
    pub controller_id: i32,
    /// Brokers by id.
    pub brokers: BTreeMap<i32, Broker>,
    /// Topics by name (only those asked for, or all). Shared (`Arc`) between snapshots, so
    /// that a refresh of one topic, or a coordinator learnt, does not copy the others.
    pub topics: BTreeMap<String, Arc<TopicMetadata>>,
}

/// A Metadata request for `topics` (all for `None`) at `version`. v0 has no way to say "no
/// topics" and means "all" with an empty list; from v1 null means all.
pub(crate) fn metadata_request(topics: Option<&[&str]>, version: i16) -> MetadataRequest {
    let list = topics.map(|ts| {
        ts.iter()
            .map(|t| MetadataRequestTopic {
                name: Some((*t).into()),
                ..Default::default()
            })
            .collect()
    });
    MetadataRequest {
        topics: if version == 0 {
            Some(list.unwrap_or_default())
        } else {
            list
        },
        // Auto-creation is a broker policy this client never asks for: topics come from admin
        // calls. Only v4+ has the field; below it the broker decides.
        allow_auto_topic_creation: version < 4,
        ..Default::default()
    }
}

/// A broker of a Metadata answer as the cache keeps it. A broker whose port is not a TCP port
/// (0, negative, above 65535) is left out with a warning rather than failing the whole answer:
/// the rest of the cluster stays usable, and that broker's partitions then look leaderless,
/// which every caller already retries after a refresh — as if the broker were unreachable,
/// which it is. Truncating the port instead would send requests to some other service's port.
fn broker_from(b: MetadataResponseBroker) -> Option<Broker> {
    let Some(port) = u16::try_from(b.port).ok().filter(|p| *p > 0) else {
        log::warn!(
            "metadata: broker {} advertises {}:{}, which is not a TCP port; ignoring it",
            b.node_id,
            b.host,
            b.port
        );
        return None;
    };
    Some(Broker {
        id: b.node_id,
        host: b.host.into(),
        port,
        rack: b.rack.map(Into::into),
    })
}

/// Shares equal broker-id lists between the partitions of one Metadata answer. A topic's
/// partitions have few distinct replica sets (their number is bounded by the ways to place
/// them on the brokers, and assignment cycles through far fewer), and an ISR is usually its
/// replica set: so a partition holds two pointers to shared lists instead of two allocations
/// of its own. The table stops growing at [`Self::MAX`] lists, so that an answer of all
/// distinct lists costs no more than unshared ones.
#[derive(Default)]
struct SharedLists(HashSet<Arc<[i32]>>);

impl SharedLists {
    const MAX: usize = 1 << 16;

    fn get(&mut self, ids: &[i32]) -> Arc<[i32]> {
        if let Some(shared) = self.0.get(ids) {
            return shared.clone();
        }
        let list: Arc<[i32]> = ids.into();
        if self.0.len() < Self::MAX {
            self.0.insert(list.clone());
        }
        list
    }
}

fn partition_from(p: MetadataResponsePartition, lists: &mut SharedLists) -> PartitionMetadata {
    let replicas = lists.get(&p.replica_nodes);
    let isr = if p.isr_nodes == p.replica_nodes {
        replicas.clone()
    } else {
        lists.get(&p.isr_nodes)
    };
    PartitionMetadata {
        partition: p.partition_index,
        leader: p.leader_id,
        leader_epoch: p.leader_epoch,
        replicas,
        isr,
        error: KafkaCode::from_code(p.error_code),
    }
}

/// The fewest bytes a partition takes in a Metadata answer (error, index, leader, epoch and
/// three empty lists), which bounds how many a frame can hold whatever count it announces.
const MIN_PARTITION_BYTES: usize = 2 + 4 + 4 + 4 + 3;

/// Reads a Metadata answer straight into the cache's form.
///
/// Decoding the generated [`MetadataResponse`] first would hold every partition whole (about
/// 120 bytes each, 3.5× what one takes on the wire) next to the frame and then next to the
/// converted cache: 6.4× the frame at the peak for one topic of 2 M partitions. Here only the
/// response's and the topics' own fields are read by hand — in the order and at the versions of
/// `schemas/*/MetadataResponse.json`, which a unit test checks against the generated decoder for
/// every version — while brokers and partitions are decoded by the generated code one at a
/// time and converted at once, so the peak is the frame plus the cache.
///
/// A topic whose every partition is as in `cached` (in the same order) is `cached`'s, shared:
/// a periodic refresh of an unchanged cluster then builds nothing, rather than a second copy
/// of the cache while the first is still in place.
pub(super) fn decode_metadata(
    d: &mut Decoder<'_>,
    version: i16,
    cached: &Metadata,
) -> std::result::Result<Metadata, DecodeError> {
    // The versions this reader is written for: v13's top-level error (KIP-1102) is not read.
    if !MetadataResponse::VERSIONS.contains(version)
        || version > crate::net::versions::implemented(ApiKey::Metadata)
    {
        return Err(DecodeError::UnsupportedVersion {
            message: MetadataResponse::NAME,
            version,
        });
    }
    let flexible = MetadataResponse::FLEXIBLE_VERSIONS.contains(version);
    if version >= 3 {
        d.get_i32()?; // throttle_time_ms
    }
    let mut brokers = BTreeMap::new();
    for _ in 0..d.get_array_len(flexible)? {
        if let Some(b) = broker_from(MetadataResponseBroker::decode(d, version)?) {
            brokers.insert(b.id, b);
        }
    }
    let cluster_id = if version >= 2 {
        d.get_nullable_string(flexible)?.map(Into::into)
    } else {
        None
    };
    let controller_id = if version >= 1 { d.get_i32()? } else { -1 };
    let mut lists = SharedLists::default();
    let mut topics = BTreeMap::new();
    for _ in 0..d.get_array_len(flexible)? {
        let error = KafkaCode::from_code(d.get_i16()?);
        let name = if version >= 12 {
            d.get_nullable_string(flexible)?
        } else {
            Some(d.get_string(flexible)?)
        };
        let id = if version >= 10 { d.get_uuid()? } else { Uuid::NIL };
        let internal = version >= 1 && d.get_bool()?;
        let count = d.get_array_len(flexible)?;
        let first = d.clone();
        let mut same = name
            .as_ref()
            .and_then(|n| cached.topics.get(n.as_str()))
            .filter(|t| t.partitions.len() == count);
        if let Some(t) = same {
            for c in &t.partitions {
                if !unchanged(&MetadataResponsePartition::decode(d, version)?, c) {
                    same = None;
                    break;
                }
            }
        }
        let partitions = if same.is_some() {
            None
        } else {
            // From the first partition again, if some matched.
            *d = first;
            // Exact for an honest answer. The decoder has checked the count against the bytes
            // left; a partition takes at least MIN_PARTITION_BYTES of them, which bounds it
            // closer.
            let mut partitions = Vec::with_capacity(count.min(d.remaining() / MIN_PARTITION_BYTES));
            for _ in 0..count {
                partitions.push(partition_from(
                    MetadataResponsePartition::decode(d, version)?,
                    &mut lists,
                ));
            }
            // In place: a stable sort would allocate half the list again. Kafka numbers
            // partitions uniquely, so stability is of no use.
            if partitions.windows(2).any(|w| w[0].partition > w[1].partition) {
                partitions.sort_unstable_by_key(|p| p.partition);
            }
            Some(partitions)
        };
        if version >= 8 {
            d.get_i32()?; // topic_authorized_operations
        }
        skip_tagged_fields(d, flexible)?;
        let Some(name) = name else { continue };
        let topic = match (partitions, same) {
            (None, Some(t)) if (t.id, t.error, t.internal) == (id, error, internal) => t.clone(),
            (partitions, same) => {
                let name = String::from(name.as_str());
                let partitions = partitions
                    .or_else(|| same.map(|t| t.partitions.clone()))
                    .unwrap_or_default();
                Arc::new(TopicMetadata {
                    name,
                    id,
                    error,
                    internal,
                    partitions,
                })
            }
        };
        topics.insert(topic.name.clone(), topic);
    }
    if (8..=10).contains(&version) {
        d.get_i32()?; // cluster_authorized_operations
    }
    skip_tagged_fields(d, flexible)?;
    Ok(Metadata {
        cluster_id,
        controller_id,
        brokers,
        topics,
    })
}

/// Whether `p`, read from the wire, says what the cached `c` says.
fn unchanged(p: &MetadataResponsePartition, c: &PartitionMetadata) -> bool {
    p.partition_index == c.partition
        && p.leader_id == c.leader
        && p.leader_epoch == c.leader_epoch
        && p.error_code == c.error.code()
        && *p.replica_nodes == *c.replicas
        && *p.isr_nodes == *c.isr
}

/// Reads past a flexible structure's tagged fields, none of which the cache keeps.
fn skip_tagged_fields(d: &mut Decoder<'_>, flexible: bool) -> std::result::Result<(), DecodeError> {
    if flexible {
        for _ in 0..d.get_uvarint()? {
            d.get_uvarint()?; // tag
            let size = d.get_uvarint()? as usize;
            d.get_raw(size)?;
        }
    }
    Ok(())
}

/// The authorization error a Metadata answer holds for `topic` (`TOPIC_AUTHORIZATION_FAILED`:
/// the principal may not DESCRIBE it), if any. Such a topic comes back with no partitions, so
/// without this check a caller would wait for leaders that never appear.
pub(crate) fn topic_denied(meta: &Metadata, topic: &str) -> Option<Error> {
    let t = meta.topics.get(topic)?;
    Error::authorization(ApiKey::Metadata, t.error, Scope::topic(topic))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cache's view of `r` as a broker would send it: encoded at `version`, then read by
    /// [`decode_metadata`] into an empty cache.
    fn metadata_at(r: &MetadataResponse, version: i16) -> Metadata {
        metadata_over(r, version, &Metadata::default())
    }

    /// [`metadata_at`] with `cached` in the cache.
    fn metadata_over(r: &MetadataResponse, version: i16, cached: &Metadata) -> Metadata {
        let frame = bytes::Bytes::from(r.to_bytes(version).unwrap());
        let mut d = Decoder::new(&frame);
        let m = decode_metadata(&mut d, version, cached).unwrap();
        assert_eq!(d.remaining(), 0, "v{version}: bytes left over");
        m
    }

    fn metadata_from(r: MetadataResponse) -> Metadata {
        metadata_at(&r, crate::net::versions::implemented(ApiKey::Metadata))
    }

    /// What the cache made of an answer before [`decode_metadata`]: the generated decoder's
    /// whole response, converted field by field. The reference the streaming read must match.
    fn reference(r: MetadataResponse) -> Metadata {
        let mut lists = SharedLists::default();
        Metadata {
            cluster_id: r.cluster_id.map(Into::into),
            controller_id: r.controller_id,
            brokers: r
                .brokers
                .into_iter()
                .filter_map(broker_from)
                .map(|b| (b.id, b))
                .collect(),
            topics: r
                .topics
                .into_iter()
                .filter_map(|t| {
                    let name: String = t.name?.into();
                    let mut partitions: Vec<PartitionMetadata> = t
                        .partitions
                        .into_iter()
                        .map(|p| partition_from(p, &mut lists))
                        .collect();
                    partitions.sort_by_key(|p| p.partition);
                    let topic = TopicMetadata {
                        name: name.clone(),
                        id: t.topic_id,
                        error: KafkaCode::from_code(t.error_code),
                        internal: t.is_internal,
                        partitions,
                    };
                    Some((name, Arc::new(topic)))
                })
                .collect(),
        }
    }

    #[test]
    fn metadata_read_from_the_frame_matches_the_generated_decoder_in_every_version() {
        use crate::protocol::{Sample, SampleGen};
        let mut partitions = 0;
        for version in ApiKey::Metadata.versions().min..=crate::net::versions::implemented(ApiKey::Metadata) {
            for seed in 0..200u64 {
                let mut r =
                    MetadataResponse::sample(&mut SampleGen::new(seed ^ ((version as u64) << 48)), version);
                for t in &mut r.topics {
                    // Unique indexes, in descending order: the sort has work to do, and its
                    // result does not depend on stability.
                    let n = t.partitions.len() as i32;
                    for (i, p) in t.partitions.iter_mut().enumerate() {
                        p.partition_index = n - i as i32;
                    }
                    partitions += t.partitions.len();
                }
                let frame = bytes::Bytes::from(r.to_bytes(version).unwrap());
                let generated = MetadataResponse::decode(&mut Decoder::new(&frame), version).unwrap();
                assert_eq!(
                    metadata_at(&r, version),
                    reference(generated),
                    "v{version} seed {seed}"
                );
            }
        }
        assert!(partitions > 1000, "the samples had only {partitions} partitions");
    }

    #[test]
    fn a_refresh_shares_the_cached_topics_that_have_not_changed() {
        use crate::protocol::messages::metadata_response::MetadataResponseTopic;
        let topic = |name: &str, leaders: &[i32]| MetadataResponseTopic {
            name: Some(name.into()),
            topic_id: Uuid([name.len() as u8; 16]),
            partitions: leaders
                .iter()
                .enumerate()
                .map(|(i, &leader)| MetadataResponsePartition {
                    partition_index: i as i32,
                    leader_id: leader,
                    replica_nodes: [1, 2].into(),
                    isr_nodes: [1, 2].into(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        };
        let answer = |topics: Vec<MetadataResponseTopic>| MetadataResponse {
            topics,
            ..Default::default()
        };
        let v = crate::net::versions::implemented(ApiKey::Metadata);
        let first = metadata_at(&answer(vec![topic("a", &[1, 2, 1]), topic("bb", &[2, 1])]), v);
        let again = answer(vec![topic("a", &[1, 2, 1]), topic("bb", &[2, 2])]);
        let second = metadata_over(&again, v, &first);
        // Each read is what an empty cache would make of it.
        assert_eq!(second, metadata_at(&again, v));
        assert!(Arc::ptr_eq(&first.topics["a"], &second.topics["a"]));
        // One leader moved in "bb" (its last partition): a topic of its own.
        assert!(!Arc::ptr_eq(&first.topics["bb"], &second.topics["bb"]));
        assert_eq!(second.topics["bb"].partitions[1].leader, 2);
        // The same partitions under a topic-level change, in another order, or fewer of them.
        let mut error = topic("a", &[1, 2, 1]);
        error.error_code = KafkaCode::TopicAuthorizationFailed.code();
        let mut reversed = topic("a", &[1, 2, 1]);
        reversed.partitions.reverse();
        let shorter = topic("a", &[1, 2]);
        for t in [error, reversed, shorter] {
            let again = answer(vec![t]);
            let second = metadata_over(&again, v, &first);
            assert_eq!(second, metadata_at(&again, v));
            assert!(!Arc::ptr_eq(&first.topics["a"], &second.topics["a"]));
        }
        // Against every version and random answers, reading over a cache changes nothing.
        use crate::protocol::{Sample, SampleGen};
        for version in ApiKey::Metadata.versions().min..=v {
            for seed in 0..50u64 {
                let r = MetadataResponse::sample(&mut SampleGen::new(seed), version);
                let cached = metadata_at(&r, version);
                assert_eq!(
                    metadata_over(&r, version, &cached),
                    cached,
                    "v{version} seed {seed}"
                );
            }
        }
    }

    #[test]
    fn a_cached_partition_is_small() {
        // Millions of these can be cached; the generated struct it replaces is far larger.
        assert_eq!(std::mem::size_of::<PartitionMetadata>(), 48);
        assert!(std::mem::size_of::<MetadataResponsePartition>() >= 100);
    }

    #[test]
    fn metadata_shares_equal_broker_lists() {
        use crate::protocol::messages::metadata_response::MetadataResponseTopic;
        let partition = |i: i32, replicas: &[i32], isr: &[i32]| MetadataResponsePartition {
            partition_index: i,
            replica_nodes: replicas.into(),
            isr_nodes: isr.into(),
            ..Default::default()
        };
        let m = metadata_from(MetadataResponse {
            topics: vec![MetadataResponseTopic {
                name: Some("t".into()),
                partitions: vec![
                    partition(2, &[1, 2], &[1, 2]),
                    partition(0, &[1, 2], &[1]),
                    partition(1, &[2, 1], &[1]),
                ],
                ..Default::default()
            }],
            ..Default::default()
        });
        let p = &m.topics["t"].partitions;
        assert_eq!(p.iter().map(|p| p.partition).collect::<Vec<_>>(), [0, 1, 2]);
        assert_eq!((&*p[0].replicas, &*p[0].isr), (&[1, 2][..], &[1][..]));
        assert_eq!((&*p[1].replicas, &*p[1].isr), (&[2, 1][..], &[1][..]));
        assert!(Arc::ptr_eq(&p[0].replicas, &p[2].replicas));
        assert!(Arc::ptr_eq(&p[2].replicas, &p[2].isr));
        assert!(Arc::ptr_eq(&p[0].isr, &p[1].isr));
        // Past the table's size, lists are still right, only no longer shared.
        let mut lists = SharedLists::default();
        for i in 0..SharedLists::MAX as i32 {
            lists.get(&[i]);
        }
        let (a, b) = (lists.get(&[-1]), lists.get(&[-1]));
        assert_eq!((&*a, &*b), (&[-1][..], &[-1][..]));
        assert!(!Arc::ptr_eq(&a, &b));
        assert!(Arc::ptr_eq(&lists.get(&[7]), &lists.get(&[7])));
    }

    #[test]
    fn brokers_with_ports_outside_tcp_are_left_out_of_metadata() {
        use crate::protocol::messages::metadata_response::MetadataResponseBroker;
        let broker = |id: i32, port: i32| MetadataResponseBroker {
            node_id: id,
            host: "h".into(),
            port,
            ..Default::default()
        };
        let m = metadata_from(MetadataResponse {
            brokers: vec![
                broker(1, 9092),
                broker(2, 65536 + 9092),
                broker(3, -1),
                broker(4, 0),
            ],
            ..Default::default()
        });
        assert_eq!(m.brokers.keys().copied().collect::<Vec<_>>(), vec![1]);
        assert_eq!(m.brokers[&1].port, 9092);
    }

    #[test]
    fn a_denied_topic_is_an_authorization_error_naming_it() {
        use crate::protocol::messages::metadata_response::MetadataResponseTopic;
        use crate::Resource;
        // Metadata: a topic the principal may not describe comes back with the code and no
        // partitions.
        let mut r = MetadataResponse::default();
        r.topics.push(MetadataResponseTopic {
            name: Some("t".into()),
            error_code: KafkaCode::TopicAuthorizationFailed.code(),
            ..Default::default()
        });
        r.topics.push(MetadataResponseTopic {
            name: Some("gone".into()),
            error_code: KafkaCode::UnknownTopicOrPartition.code(),
            ..Default::default()
        });
        let m = metadata_from(r);
        let e = topic_denied(&m, "t").unwrap();
        assert!(
            matches!(&e, Error::Authorization { api: ApiKey::Metadata, resource: Resource::Topic(t), .. } if t == "t"),
            "{e:?}"
        );
        assert!(topic_denied(&m, "gone").is_none());
        assert!(topic_denied(&m, "unasked").is_none());
    }

    #[test]
    fn metadata_requests_per_version() {
        assert_eq!(metadata_request(None, 0).topics, Some(vec![]));
        assert_eq!(metadata_request(None, 1).topics, None);
        let r = metadata_request(Some(&["a"]), 12);
        assert_eq!(r.topics.unwrap()[0].name.as_deref(), Some("a"));
        assert!(!metadata_request(None, 4).allow_auto_topic_creation);
        // Every version encodes: no field is set that the version lacks.
        for v in 0..=crate::net::versions::implemented(ApiKey::Metadata) {
            use crate::protocol::Message;
            metadata_request(Some(&["a"]), v).to_bytes(v).unwrap();
        }
    }
}
