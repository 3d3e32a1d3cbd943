//! The payload a consumer embeds in the classic group protocol (Kafka's `ConsumerProtocol`,
//! protocol type `consumer`; not KIP-848's `group.protocol=consumer`, which is `kip848`): what
//! a member subscribes to (sent in JoinGroup) and what it is assigned (received in SyncGroup),
//! each a 2-byte version, then the struct at that version.

use crate::protocol::messages::consumer_protocol_assignment::TopicPartition as AssignedTp;
use crate::protocol::messages::consumer_protocol_subscription::TopicPartition as OwnedTp;
use crate::protocol::messages::{ConsumerProtocolAssignment, ConsumerProtocolSubscription};
use crate::protocol::{DecodeError, Decoder, KafkaStr, Message};
use bytes::Bytes;
use std::collections::BTreeMap;
use std::fmt;

/// One partition of one topic.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicPartition {
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: i32,
}

impl TopicPartition {
    /// `topic`-`partition`.
    pub fn new(topic: impl Into<String>, partition: i32) -> Self {
        TopicPartition {
            topic: topic.into(),
            partition,
        }
    }
}

impl fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

/// A member's partitions: topic → sorted partition indexes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Assignment {
    /// Topic → partitions.
    pub partitions: BTreeMap<String, Vec<i32>>,
    /// Assignor-specific bytes.
    pub user_data: Option<Bytes>,
}

impl Assignment {
    /// Every partition, sorted by topic then index.
    pub fn topic_partitions(&self) -> Vec<TopicPartition> {
        self.partitions
            .iter()
            .flat_map(|(t, ps)| ps.iter().map(move |p| TopicPartition::new(t.clone(), *p)))
            .collect()
    }

    /// Number of partitions.
    pub fn len(&self) -> usize {
        self.partitions.values().map(Vec::len).sum()
    }

    /// Whether no partition is assigned.
    pub fn is_empty(&self) -> bool {
        self.partitions.values().all(Vec::is_empty)
    }
}

/// What a new assignment changes for a member that owned `old` (the cooperative protocol's
/// view: partitions kept are neither).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Change {
    /// In `new`, not in `old`.
    pub(crate) added: Vec<TopicPartition>,
    /// In `old`, not in `new`.
    pub(crate) revoked: Vec<TopicPartition>,
}

impl Change {
    pub(crate) fn between(old: &Assignment, new: &Assignment) -> Change {
        let (old, new) = (old.topic_partitions(), new.topic_partitions());
        Change {
            added: new.iter().filter(|tp| !old.contains(tp)).cloned().collect(),
            revoked: old.iter().filter(|tp| !new.contains(tp)).cloned().collect(),
        }
    }
}

impl fmt::Display for Assignment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self
            .partitions
            .iter()
            .map(|(t, ps)| format!("{t}{ps:?}"))
            .collect();
        write!(f, "{}", parts.join(" "))
    }
}

/// A member's subscription as the group leader sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Subscription {
    /// Subscribed topics.
    pub topics: Vec<String>,
    /// Assignor-specific bytes.
    pub user_data: Option<Bytes>,
    /// Partitions the member owns (cooperative protocols; empty for eager ones).
    pub owned: Vec<TopicPartition>,
    /// `client.rack`, from subscription v3.
    pub rack_id: Option<String>,
    /// The generation of the assignment that `owned` comes from (ConsumerProtocol v2+,
    /// cooperative assignors); `None` when unknown.
    pub generation: Option<i32>,
}

/// The newest ConsumerProtocol version we write and fully read.
pub const CONSUMER_PROTOCOL_VERSION: i16 = 3;

fn framed<M: Message>(m: &M, version: i16) -> Bytes {
    let mut buf = version.to_be_bytes().to_vec();
    // These structs only have fields that every version accepts at their defaults, and we fill
    // exactly the fields of CONSUMER_PROTOCOL_VERSION, so encoding cannot fail; an empty
    // payload would be rejected by the decoder on the other side rather than lost silently.
    if m.encode(version, &mut buf).is_err() {
        buf.truncate(2);
    }
    Bytes::from(buf)
}

/// Reads the version prefix; a newer version than ours is read as ours, ignoring what
/// follows, as Kafka's ConsumerProtocol does for forward compatibility.
fn unframe(bytes: &Bytes) -> Result<(Decoder<'_>, i16), DecodeError> {
    let mut d = Decoder::new(bytes);
    let version = d.get_i16()?;
    if version < 0 {
        return Err(DecodeError::UnsupportedVersion {
            message: "ConsumerProtocol",
            version,
        });
    }
    Ok((d, version.min(CONSUMER_PROTOCOL_VERSION)))
}

impl Subscription {
    /// The bytes for JoinGroup's protocol metadata.
    pub fn encode(&self) -> Bytes {
        let mut owned: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
        for tp in &self.owned {
            owned.entry(&tp.topic).or_default().push(tp.partition);
        }
        let m = ConsumerProtocolSubscription {
            topics: self.topics.iter().map(KafkaStr::from).collect(),
            user_data: self.user_data.clone(),
            owned_partitions: owned
                .into_iter()
                .map(|(t, p)| OwnedTp {
                    topic: t.into(),
                    partitions: p.into(),
                    ..Default::default()
                })
                .collect(),
            generation_id: self.generation.unwrap_or(-1),
            rack_id: self.rack_id.clone().map(Into::into),
            ..Default::default()
        };
        framed(&m, CONSUMER_PROTOCOL_VERSION)
    }

    /// Parses another member's metadata.
    pub fn decode(bytes: &Bytes) -> Result<Subscription, DecodeError> {
        let (mut d, version) = unframe(bytes)?;
        let m = ConsumerProtocolSubscription::decode(&mut d, version)?;
        Ok(Subscription {
            topics: m.topics.into_iter().map(String::from).collect(),
            user_data: m.user_data,
            owned: m
                .owned_partitions
                .into_iter()
                .flat_map(|tp| {
                    tp.partitions
                        .into_iter()
                        .map(move |p| TopicPartition::new(tp.topic.clone(), p))
                })
                .collect(),
            rack_id: m.rack_id.map(Into::into),
            generation: (m.generation_id >= 0).then_some(m.generation_id),
        })
    }
}

impl Assignment {
    /// The bytes for SyncGroup's assignment of one member.
    pub fn encode(&self) -> Bytes {
        let m = ConsumerProtocolAssignment {
            assigned_partitions: self
                .partitions
                .iter()
                .map(|(t, ps)| AssignedTp {
                    topic: t.clone().into(),
                    partitions: ps.clone().into(),
                    ..Default::default()
                })
                .collect(),
            user_data: self.user_data.clone(),
            ..Default::default()
        };
        framed(&m, CONSUMER_PROTOCOL_VERSION)
    }

    /// Parses our assignment from SyncGroup. An empty buffer is an empty assignment (a leader
    /// sends nothing to members it gives no partitions, and librdkafka does the same).
    pub fn decode(bytes: &Bytes) -> Result<Assignment, DecodeError> {
        if bytes.is_empty() {
            return Ok(Assignment::default());
        }
        let (mut d, version) = unframe(bytes)?;
        let m = ConsumerProtocolAssignment::decode(&mut d, version)?;
        let mut partitions: BTreeMap<String, Vec<i32>> = BTreeMap::new();
        for tp in m.assigned_partitions {
            partitions
                .entry(tp.topic.into())
                .or_default()
                .extend(tp.partitions);
        }
        for ps in partitions.values_mut() {
            ps.sort_unstable();
            ps.dedup();
        }
        Ok(Assignment {
            partitions,
            user_data: m.user_data,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_names_what_was_added_and_what_was_revoked() {
        let a = |ps: &[(&str, i32)]| {
            let mut x = Assignment::default();
            for (t, p) in ps {
                x.partitions.entry(t.to_string()).or_default().push(*p);
            }
            x
        };
        let c = Change::between(&a(&[("t", 0), ("t", 1), ("u", 0)]), &a(&[("t", 1), ("t", 2)]));
        assert_eq!(c.added, vec![TopicPartition::new("t", 2)]);
        assert_eq!(
            c.revoked,
            vec![TopicPartition::new("t", 0), TopicPartition::new("u", 0)]
        );
        assert_eq!(
            Change::between(&a(&[("t", 0)]), &a(&[("t", 0)])),
            Change::default()
        );
    }

    #[test]
    fn subscription_round_trip() {
        let s = Subscription {
            topics: vec!["a".into(), "b".into()],
            user_data: Some(Bytes::from_static(b"x")),
            owned: vec![TopicPartition::new("a", 1), TopicPartition::new("a", 0)],
            rack_id: Some("r1".into()),
            generation: Some(9),
        };
        let back = Subscription::decode(&s.encode()).unwrap();
        assert_eq!(back.generation, Some(9));
        assert_eq!(back.topics, s.topics);
        assert_eq!(back.user_data, s.user_data);
        assert_eq!(back.rack_id, s.rack_id);
        assert_eq!(back.owned.len(), 2);
    }

    #[test]
    fn reads_older_and_newer_versions() {
        // v0 as an old Java client writes it: version, topics, user data.
        let v0 = ConsumerProtocolSubscription {
            topics: vec!["t".into()],
            user_data: None,
            ..Default::default()
        };
        let mut b = 0i16.to_be_bytes().to_vec();
        v0.encode(0, &mut b).unwrap();
        assert_eq!(
            Subscription::decode(&Bytes::from(b.clone())).unwrap().topics,
            vec!["t".to_string()]
        );
        // A future v9 with extra bytes we do not know is read as v3.
        let mut future = 9i16.to_be_bytes().to_vec();
        ConsumerProtocolSubscription {
            topics: vec!["t".into()],
            ..Default::default()
        }
        .encode(3, &mut future)
        .unwrap();
        future.extend([1, 2, 3, 4]);
        assert_eq!(
            Subscription::decode(&Bytes::from(future)).unwrap().topics,
            vec!["t".to_string()]
        );
        assert!(Subscription::decode(&Bytes::from_static(&[0xff, 0xff])).is_err());
        assert!(Subscription::decode(&Bytes::from_static(&[0])).is_err());
    }

    #[test]
    fn assignments_read_in_every_version_and_newer() {
        let m = ConsumerProtocolAssignment {
            assigned_partitions: vec![
                AssignedTp {
                    topic: "a".into(),
                    partitions: vec![2, 0].into(),
                    ..Default::default()
                },
                AssignedTp {
                    topic: "b".into(),
                    partitions: vec![1].into(),
                    ..Default::default()
                },
            ],
            user_data: Some(Bytes::from_static(b"u")),
            ..Default::default()
        };
        for version in 0..=CONSUMER_PROTOCOL_VERSION {
            let mut b = version.to_be_bytes().to_vec();
            m.encode(version, &mut b).unwrap();
            let a = Assignment::decode(&Bytes::from(b)).unwrap();
            assert_eq!(a.partitions["a"], vec![0, 2], "v{version}");
            assert_eq!(a.partitions["b"], vec![1]);
            assert_eq!(a.user_data.as_deref(), Some(&b"u"[..]));
        }
        // A future version with fields we do not know is read as ours.
        let mut future = 9i16.to_be_bytes().to_vec();
        m.encode(CONSUMER_PROTOCOL_VERSION, &mut future).unwrap();
        future.extend([1, 2, 3]);
        assert_eq!(Assignment::decode(&Bytes::from(future)).unwrap().len(), 3);
        assert!(Assignment::decode(&Bytes::from_static(&[0xff, 0xff])).is_err());
        assert!(Assignment::decode(&Bytes::from_static(&[0])).is_err());
    }

    #[test]
    fn assignment_round_trip_and_empty() {
        let mut a = Assignment::default();
        a.partitions.insert("t".into(), vec![0, 2, 4]);
        assert_eq!(Assignment::decode(&a.encode()).unwrap(), a);
        assert_eq!(Assignment::decode(&Bytes::new()).unwrap(), Assignment::default());
        assert_eq!(a.topic_partitions()[1], TopicPartition::new("t", 2));
        assert_eq!(a.len(), 3);
    }
}
