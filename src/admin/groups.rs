//! Consumer groups: list, describe, remove static members (ListGroups, DescribeGroups,
//! LeaveGroup; `consumer_group.rs` for KIP-848 groups' ConsumerGroupDescribe).

use super::{kafka_error, Admin};
use crate::authorization::Scope;
use crate::error::{Error, Result};
use crate::group::requests;
use crate::group::{Assignment, GroupProtocol};
use crate::net::versions::{self, REMOVE_MEMBERS_BY_INSTANCE_ID};
use crate::protocol::messages::{DescribeGroupsResponse, LeaveGroupResponse, ListGroupsRequest};
use crate::protocol::ApiKey;
use crate::KafkaCode;
use bytes::Bytes;
use std::collections::BTreeMap;

/// What brokers log as the reason for an admin removal (LeaveGroup v5+, KIP-800); the same
/// text as the Java admin client, so operators recognise it.
const REMOVE_REASON: &str = "member was removed by an admin";

/// One group as [`Admin::list_groups`] (ListGroups) reports it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ListedGroup {
    /// `group.id`.
    pub group_id: String,
    /// Protocol type, `consumer` for consumer groups (empty for KIP-848 groups on some brokers).
    pub protocol_type: String,
    /// Group state such as `Stable` or `Empty`; `None` from brokers before Kafka 2.6
    /// (ListGroups v4).
    pub state: Option<String>,
    /// Group type (ListGroups v5, Kafka 3.8+, KIP-848): `classic`, `consumer` (the KIP-848
    /// protocol), `share` or `streams`; `None` from older brokers.
    pub group_type: Option<String>,
}

/// One member of a group, from DescribeGroups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberDescription {
    /// Member id the coordinator assigned.
    pub member_id: String,
    /// `group.instance.id` for static members (DescribeGroups v4+, Kafka 2.4+).
    pub group_instance_id: Option<String>,
    /// `client.id` of the member's last JoinGroup.
    pub client_id: String,
    /// Host the member connected from.
    pub client_host: String,
    /// The member's protocol metadata (for consumers, its `ConsumerProtocolSubscription`).
    pub metadata: Bytes,
    /// The assignment the leader gave the member, as sent.
    pub assignment: Bytes,
    /// `assignment` decoded, for groups of protocol type `consumer` that have one (`None`
    /// during a rebalance, for other protocol types, or if the bytes do not parse). For a
    /// `consumer`-protocol group, what the member owns (by topic name).
    pub decoded_assignment: Option<Assignment>,
    /// The member's epoch (`consumer`-protocol groups; `None` for classic ones).
    pub member_epoch: Option<i32>,
    /// What the coordinator wants the member to own once it has reconciled
    /// (`consumer`-protocol groups; `None` for classic ones).
    pub target_assignment: Option<Assignment>,
    /// The protocol the member speaks, in a `consumer`-protocol group on Kafka 4.0+
    /// (ConsumerGroupDescribe v1): `Classic` for a member not yet migrated; `None` otherwise.
    pub member_protocol: Option<GroupProtocol>,
}

/// A group as [`Admin::describe_group`] (DescribeGroups) reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupDescription {
    /// `group.id`.
    pub group_id: String,
    /// State: `Stable`, `Empty`, `PreparingRebalance`, `CompletingRebalance`, or `Dead` for a
    /// group the coordinator does not know.
    pub state: String,
    /// Protocol type, `consumer` for consumer groups.
    pub protocol_type: String,
    /// The chosen protocol (for consumers, the assignor name, e.g. `range`).
    pub protocol: String,
    /// Current members.
    pub members: Vec<MemberDescription>,
    /// Whether the answer could carry `group.instance.id` (DescribeGroups v4+, Kafka 2.4+).
    /// When false the coordinator cannot tell static members from dynamic ones: on Kafka 2.3
    /// a static member shows with `group_instance_id: None`.
    pub instance_ids_reported: bool,
    /// The group's protocol: `Consumer` for a KIP-848 group (described by
    /// ConsumerGroupDescribe; `protocol` is then the coordinator's assignor, e.g. `uniform`),
    /// `Classic` otherwise.
    pub group_protocol: GroupProtocol,
    /// The group epoch (`consumer`-protocol groups; `None` for classic ones).
    pub group_epoch: Option<i32>,
    /// The epoch of the group's target assignment (`consumer`-protocol groups).
    pub assignment_epoch: Option<i32>,
}

impl Admin {
    /// Lists the groups of every broker in the cluster (ListGroups to each, merged, sorted by
    /// group id).
    pub fn list_groups(&self) -> Result<Vec<ListedGroup>> {
        let deadline = crate::deadline::after(self.api_timeout);
        let meta = self.client.refresh_metadata_by(Some(&[]), deadline)?;
        let mut groups = BTreeMap::new();
        for &id in meta.brokers.keys() {
            let listed = self.client.retry_coordinator_errors(
                deadline,
                &format!("ListGroups on broker {id}"),
                || {
                    let resp = self
                        .client
                        .send_to_by(id, deadline, |_| ListGroupsRequest::default())?;
                    let code = KafkaCode::from_code(resp.error_code);
                    if code.is_error() {
                        return Err(kafka_error(
                            ApiKey::ListGroups,
                            code,
                            Scope::default(),
                            &format!("broker {id}"),
                            None,
                        ));
                    }
                    Ok(resp.groups)
                },
            )?;
            for g in listed {
                // Only v4+ carries the state; below it the field decodes to its empty default.
                let state = Some(g.group_state).filter(|s| !s.is_empty());
                // Likewise the type, from v5.
                let group_type = Some(g.group_type).filter(|t| !t.is_empty());
                groups.insert(
                    g.group_id.clone(),
                    ListedGroup {
                        group_id: g.group_id.into(),
                        protocol_type: g.protocol_type.into(),
                        state: state.map(Into::into),
                        group_type: group_type.map(Into::into),
                    },
                );
            }
        }
        Ok(groups.into_values().collect())
    }

    /// Describes `group` at its coordinator (found with FindCoordinator): a KIP-848
    /// `consumer`-protocol group by ConsumerGroupDescribe (Kafka 4.0+, where the coordinator
    /// has it), with its epochs and each member's epoch and target assignment; a classic group
    /// by DescribeGroups. [`GroupDescription::group_protocol`] says which. A group the
    /// coordinator does not know comes back in state `Dead` with no members.
    pub fn describe_group(&self, group: &str) -> Result<GroupDescription> {
        self.with_coordinator(group, |coordinator, deadline| {
            let asked = self.client.send_to_by(coordinator.id, deadline, |_| {
                super::consumer_group::request(group)
            });
            match asked {
                Ok(resp) => {
                    if let Some(d) = super::consumer_group::description(group, resp)? {
                        return Ok(d);
                    }
                }
                // A coordinator without ConsumerGroupDescribe (before 4.0, or the new protocol
                // off): only classic groups there.
                Err(Error::UnsupportedVersion { .. }) => {}
                Err(e) => return Err(e),
            }
            let mut version = 0;
            let resp = self.client.send_to_by(coordinator.id, deadline, |v| {
                version = v;
                requests::describe_group(group)
            })?;
            let mut description = group_description(group, resp)?;
            description.instance_ids_reported = version >= 4;
            Ok(description)
        })
    }

    /// Removes static members of `group` by their `group.instance.id` (LeaveGroup v3+, sent to
    /// the coordinator), as `kafka-consumer-groups --delete` of a static member would. Returns
    /// each id with its own outcome, in the order given: `UNKNOWN_MEMBER_ID` if no member has
    /// that id, `FENCED_INSTANCE_ID` if it has a different member id.
    ///
    /// Fails with [`Error::MissingCapability`] on coordinators before Kafka 2.4, which cannot
    /// remove members by instance id, and with [`Error::Kafka`] for group-level errors.
    pub fn remove_members(
        &self,
        group: &str,
        instance_ids: &[&str],
    ) -> Result<Vec<(String, Result<(), KafkaCode>)>> {
        if instance_ids.is_empty() {
            return Ok(Vec::new());
        }
        self.with_coordinator(group, |coordinator, deadline| {
            let broker_versions = self.client.broker_versions(coordinator.id)?;
            versions::check(&REMOVE_MEMBERS_BY_INSTANCE_ID, &broker_versions)?;
            // The broker could do it, but a configured version cap may keep us below v3.
            let config = self.client.connection_config();
            if config.pick_version(ApiKey::LeaveGroup, &broker_versions)? < 3 {
                return Err(Error::Config {
                    property: "max_api_version",
                    problem: format!(
                        "LeaveGroup is capped below v3, which {} needs",
                        REMOVE_MEMBERS_BY_INSTANCE_ID.name
                    ),
                });
            }
            // An empty member id with an instance id means "whichever member holds it".
            let members: Vec<_> = instance_ids
                .iter()
                .map(|id| requests::member_identity("", Some(id), REMOVE_REASON))
                .collect();
            let resp = self.client.send_to_by(coordinator.id, deadline, |v| {
                requests::leave_group(group, &members, v)
            })?;
            member_outcomes(group, instance_ids, resp)
        })
    }
}

pub(crate) fn group_description(group: &str, resp: DescribeGroupsResponse) -> Result<GroupDescription> {
    let Some(g) = resp.groups.into_iter().find(|g| g.group_id == group) else {
        let message = Some(format!("group {group}: missing from the response"));
        return Err(Error::Kafka {
            api: ApiKey::DescribeGroups,
            code: KafkaCode::UnknownServerError,
            message,
        });
    };
    let code = KafkaCode::from_code(g.error_code);
    if code == KafkaCode::GroupIdNotFound {
        // Kafka 4.0+ may say so outright (KIP-1043) where older coordinators describe an
        // unknown group as `Dead`; callers get the same answer from both.
        return Ok(GroupDescription {
            group_id: g.group_id.into(),
            state: "Dead".into(),
            protocol_type: String::new(),
            protocol: String::new(),
            members: Vec::new(),
            instance_ids_reported: true,
            group_protocol: GroupProtocol::Classic,
            group_epoch: None,
            assignment_epoch: None,
        });
    }
    if code.is_error() {
        return Err(kafka_error(
            ApiKey::DescribeGroups,
            code,
            Scope::group(group),
            &format!("group {group}"),
            None,
        ));
    }
    let consumer = g.protocol_type == "consumer";
    let members = g
        .members
        .into_iter()
        .map(|m| {
            let decoded_assignment = if consumer && !m.member_assignment.is_empty() {
                Assignment::decode(&m.member_assignment)
                    .map_err(|e| {
                        log::debug!(
                            "group {group}: member {}: undecodable assignment: {e}",
                            m.member_id
                        )
                    })
                    .ok()
            } else {
                None
            };
            MemberDescription {
                member_id: m.member_id.into(),
                group_instance_id: m.group_instance_id.map(Into::into),
                client_id: m.client_id.into(),
                client_host: m.client_host.into(),
                metadata: m.member_metadata,
                assignment: m.member_assignment,
                decoded_assignment,
                member_epoch: None,
                target_assignment: None,
                member_protocol: None,
            }
        })
        .collect();
    Ok(GroupDescription {
        group_id: g.group_id.into(),
        state: g.group_state.into(),
        protocol_type: g.protocol_type.into(),
        protocol: g.protocol_data.into(),
        members,
        // The response does not say which version it is; describe_group knows and corrects it.
        instance_ids_reported: true,
        group_protocol: GroupProtocol::Classic,
        group_epoch: None,
        assignment_epoch: None,
    })
}

/// Each instance id's outcome from a LeaveGroup answer, in the order asked; an id the answer
/// leaves out counts as `UNKNOWN_SERVER_ERROR`. A group-level error fails the whole call.
fn member_outcomes(
    group: &str,
    instance_ids: &[&str],
    resp: LeaveGroupResponse,
) -> Result<Vec<(String, Result<(), KafkaCode>)>> {
    let code = KafkaCode::from_code(resp.error_code);
    if code.is_error() {
        return Err(kafka_error(
            ApiKey::LeaveGroup,
            code,
            Scope::group(group),
            &format!("group {group}"),
            None,
        ));
    }
    Ok(instance_ids
        .iter()
        .map(|&id| {
            let found = resp
                .members
                .iter()
                .find(|m| m.group_instance_id.as_deref() == Some(id));
            let outcome = match found.map(|m| KafkaCode::from_code(m.error_code)) {
                Some(KafkaCode::None) => Ok(()),
                Some(c) => Err(c),
                None => {
                    log::warn!("group {group}: LeaveGroup response has no entry for instance {id}");
                    Err(KafkaCode::UnknownServerError)
                }
            };
            (id.to_string(), outcome)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::messages::consumer_protocol_assignment;
    use crate::protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
    use crate::protocol::messages::leave_group_response::MemberResponse;
    use crate::protocol::messages::ConsumerProtocolAssignment;
    use crate::protocol::{EncodeError, Message};

    #[test]
    fn leave_group_by_instance_id_refuses_versions_without_members() {
        for v in 0..3 {
            let members = [requests::member_identity("", Some("i-1"), REMOVE_REASON)];
            let e = requests::leave_group("g", &members, v).to_bytes(v).unwrap_err();
            assert!(
                matches!(e, EncodeError::UnsupportedField { field: "members", .. }),
                "v{v}: {e}"
            );
        }
    }

    fn assignment_bytes(version: i16, a: &ConsumerProtocolAssignment, extra: &[u8]) -> Bytes {
        let mut buf = version.to_be_bytes().to_vec();
        a.encode(version.min(3), &mut buf).unwrap();
        buf.extend_from_slice(extra);
        buf.into()
    }

    #[test]
    fn group_descriptions_decode_consumer_assignments_only() {
        let a = ConsumerProtocolAssignment {
            assigned_partitions: vec![consumer_protocol_assignment::TopicPartition {
                topic: "t".into(),
                partitions: vec![3].into(),
                ..Default::default()
            }],
            ..Default::default()
        };
        let member = DescribedGroupMember {
            member_id: "m".into(),
            group_instance_id: Some("i".into()),
            member_assignment: assignment_bytes(3, &a, &[]),
            ..Default::default()
        };
        let group = |protocol_type: &str| DescribeGroupsResponse {
            groups: vec![DescribedGroup {
                group_id: "g".into(),
                group_state: "Stable".into(),
                protocol_type: protocol_type.into(),
                protocol_data: "range".into(),
                members: vec![member.clone()],
                ..Default::default()
            }],
            ..Default::default()
        };
        let d = group_description("g", group("consumer")).unwrap();
        assert_eq!((d.state.as_str(), d.protocol.as_str()), ("Stable", "range"));
        assert_eq!(d.members[0].group_instance_id.as_deref(), Some("i"));
        assert_eq!(
            d.members[0].decoded_assignment.as_ref().unwrap().partitions["t"],
            vec![3]
        );
        let d = group_description("g", group("connect")).unwrap();
        assert!(d.members[0].decoded_assignment.is_none());
        assert!(!d.members[0].assignment.is_empty());

        let mut unknown = group("");
        unknown.groups[0].error_code = KafkaCode::GroupIdNotFound.code();
        let d = group_description("g", unknown).unwrap();
        assert_eq!(d.state, "Dead");
        assert!(d.members.is_empty());

        let mut failed = group("consumer");
        failed.groups[0].error_code = KafkaCode::GroupAuthorizationFailed.code();
        let e = group_description("g", failed).unwrap_err();
        assert_eq!(e.kafka_code(), Some(KafkaCode::GroupAuthorizationFailed));
        assert!(
            matches!(&e, Error::Authorization { api: ApiKey::DescribeGroups, resource: crate::Resource::Group(g), .. } if g == "g"),
            "{e:?}"
        );
        assert!(e.to_string().contains("group `g`"), "{e}");
    }

    #[test]
    fn leave_group_outcomes_per_instance_in_request_order() {
        let member = |id: &str, code: KafkaCode| MemberResponse {
            group_instance_id: Some(id.into()),
            error_code: code.code(),
            ..Default::default()
        };
        let resp = LeaveGroupResponse {
            members: vec![
                member("b", KafkaCode::UnknownMemberId),
                member("a", KafkaCode::None),
            ],
            ..Default::default()
        };
        let out = member_outcomes("g", &["a", "b", "c"], resp).unwrap();
        assert_eq!(
            out,
            vec![
                ("a".to_string(), Ok(())),
                ("b".to_string(), Err(KafkaCode::UnknownMemberId)),
                ("c".to_string(), Err(KafkaCode::UnknownServerError)),
            ]
        );
        let resp = LeaveGroupResponse {
            error_code: KafkaCode::GroupIdNotFound.code(),
            ..Default::default()
        };
        let e = member_outcomes("g", &["a"], resp).unwrap_err();
        assert!(matches!(
            e,
            Error::Kafka {
                api: ApiKey::LeaveGroup,
                code: KafkaCode::GroupIdNotFound,
                ..
            }
        ));
        assert!(e.to_string().contains("group g"), "{e}");
    }
}
