//! Describing a KIP-848 `consumer`-protocol group (ConsumerGroupDescribe, Kafka 4.0+): its
//! epochs and assignor, and each member's epoch, assignment and target assignment. The
//! classic DescribeGroups does not know such groups (Kafka 4.x answers GROUP_ID_NOT_FOUND), and
//! ConsumerGroupDescribe does not know classic ones, so [`Admin::describe_group`](super::Admin)
//! asks this first where the coordinator has it and falls back to DescribeGroups, as Java's
//! admin client does.

use super::groups::{GroupDescription, MemberDescription};
use super::kafka_error;
use crate::authorization::Scope;
use crate::error::{Error, Result};
use crate::group::{Assignment, GroupProtocol};
use crate::protocol::messages::consumer_group_describe_response::Assignment as WireAssignment;
use crate::protocol::messages::{ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse};
use crate::protocol::ApiKey;
use crate::KafkaCode;
use bytes::Bytes;

/// ConsumerGroupDescribe for one group.
pub(super) fn request(group: &str) -> ConsumerGroupDescribeRequest {
    ConsumerGroupDescribeRequest {
        group_ids: vec![group.into()],
        ..Default::default()
    }
}

/// The group as ConsumerGroupDescribe reports it, or `None` when it is not a `consumer`-protocol
/// group (GROUP_ID_NOT_FOUND: a classic group, or none at all; UNSUPPORTED_VERSION: a
/// coordinator with the new protocol turned off): DescribeGroups is then the one to ask.
pub(super) fn description(
    group: &str,
    resp: ConsumerGroupDescribeResponse,
) -> Result<Option<GroupDescription>> {
    let Some(g) = resp.groups.into_iter().find(|g| g.group_id == group) else {
        return Err(Error::Kafka {
            api: ApiKey::ConsumerGroupDescribe,
            code: KafkaCode::UnknownServerError,
            message: Some(format!("group {group}: missing from the response")),
        });
    };
    let code = KafkaCode::from_code(g.error_code);
    if matches!(code, KafkaCode::GroupIdNotFound | KafkaCode::UnsupportedVersion) {
        return Ok(None);
    }
    if code.is_error() {
        return Err(kafka_error(
            ApiKey::ConsumerGroupDescribe,
            code,
            Scope::group(group),
            &format!("group {group}"),
            g.error_message.map(Into::into),
        ));
    }
    let members = g
        .members
        .into_iter()
        .map(|m| MemberDescription {
            member_id: m.member_id.into(),
            group_instance_id: m.instance_id.map(Into::into),
            client_id: m.client_id.into(),
            client_host: m.client_host.into(),
            metadata: Bytes::new(),
            assignment: Bytes::new(),
            decoded_assignment: Some(assignment(&m.assignment)),
            member_epoch: Some(m.member_epoch),
            target_assignment: Some(assignment(&m.target_assignment)),
            // v1+ (KIP-1099): a member of a group migrating online may still speak classic.
            member_protocol: match m.member_type {
                0 => Some(GroupProtocol::Classic),
                1 => Some(GroupProtocol::Consumer),
                _ => None,
            },
        })
        .collect();
    Ok(Some(GroupDescription {
        group_id: g.group_id.into(),
        state: g.group_state.into(),
        protocol_type: "consumer".into(),
        protocol: g.assignor_name.into(),
        members,
        instance_ids_reported: true,
        group_protocol: GroupProtocol::Consumer,
        group_epoch: Some(g.group_epoch),
        assignment_epoch: Some(g.assignment_epoch),
    }))
}

/// An assignment by topic name (the response has both names and ids; a name left empty, for
/// a topic deleted meanwhile, is replaced by the id).
fn assignment(a: &WireAssignment) -> Assignment {
    let mut out = Assignment::default();
    for tp in &a.topic_partitions {
        let name = match tp.topic_name.is_empty() {
            true => tp.topic_id.to_string(),
            false => tp.topic_name.to_string(),
        };
        let ps = out.partitions.entry(name).or_default();
        ps.extend(tp.partitions.iter().copied());
        ps.sort_unstable();
        ps.dedup();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::messages::consumer_group_describe_response::{
        DescribedGroup, Member, TopicPartitions,
    };
    use crate::protocol::Uuid;

    fn tps(name: &str, partitions: &[i32]) -> TopicPartitions {
        TopicPartitions {
            topic_id: Uuid([7; 16]),
            topic_name: name.into(),
            partitions: partitions.to_vec().into(),
            ..Default::default()
        }
    }

    fn response(code: KafkaCode) -> ConsumerGroupDescribeResponse {
        ConsumerGroupDescribeResponse {
            groups: vec![DescribedGroup {
                error_code: code.code(),
                group_id: "g".into(),
                group_state: "Reconciling".into(),
                group_epoch: 5,
                assignment_epoch: 4,
                assignor_name: "uniform".into(),
                members: vec![Member {
                    member_id: "m1".into(),
                    instance_id: Some("worker-1".into()),
                    member_epoch: 4,
                    client_id: "c".into(),
                    assignment: WireAssignment {
                        topic_partitions: vec![tps("t", &[2, 0])],
                        ..Default::default()
                    },
                    target_assignment: WireAssignment {
                        topic_partitions: vec![tps("t", &[0]), tps("", &[1])],
                        ..Default::default()
                    },
                    member_type: 0,
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    #[test]
    fn a_consumer_group_is_described_with_its_epochs_and_both_assignments() {
        let d = description("g", response(KafkaCode::None)).unwrap().unwrap();
        assert_eq!(d.group_protocol, GroupProtocol::Consumer);
        assert_eq!((d.group_epoch, d.assignment_epoch), (Some(5), Some(4)));
        assert_eq!(
            (d.state.as_str(), d.protocol.as_str()),
            ("Reconciling", "uniform")
        );
        let m = &d.members[0];
        assert_eq!(m.group_instance_id.as_deref(), Some("worker-1"));
        assert_eq!(m.member_epoch, Some(4));
        assert_eq!(
            m.member_protocol,
            Some(GroupProtocol::Classic),
            "a classic member mid-migration"
        );
        assert_eq!(m.decoded_assignment.as_ref().unwrap().partitions["t"], vec![0, 2]);
        let target = m.target_assignment.as_ref().unwrap();
        assert_eq!(target.partitions["t"], vec![0]);
        // A topic without a name (deleted meanwhile) is shown by its id.
        assert_eq!(target.partitions.len(), 2);
    }

    #[test]
    fn a_group_that_is_not_a_consumer_group_falls_back_to_describe_groups() {
        assert!(description("g", response(KafkaCode::GroupIdNotFound))
            .unwrap()
            .is_none());
        assert!(description("g", response(KafkaCode::UnsupportedVersion))
            .unwrap()
            .is_none());
        let denied = description("g", response(KafkaCode::GroupAuthorizationFailed)).unwrap_err();
        assert!(matches!(denied, Error::Authorization { .. }), "{denied:?}");
        assert!(description("other", response(KafkaCode::None)).is_err());
    }
}
