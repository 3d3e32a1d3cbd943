//! The classic group protocol's requests (JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
//! DescribeGroups), built from plain inputs. Pure: sending them is the caller's job, so each is
//! unit-tested at every version the crate implements.
//!
//! A field the chosen version lacks is left to the codec: it drops the ignorable ones (a
//! LeaveGroup reason below v5) and refuses to encode the rest (`group_instance_id` on JoinGroup
//! below v5), so a static member on a broker too old for it fails loudly instead of joining as
//! a dynamic one.

use super::state::Generation;
use crate::protocol::messages::join_group_request::JoinGroupRequestProtocol;
use crate::protocol::messages::leave_group_request::MemberIdentity;
use crate::protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use crate::protocol::messages::{
    DescribeGroupsRequest, HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, SyncGroupRequest,
};
use bytes::Bytes;
use std::time::Duration;

/// The protocol type of every consumer group (as opposed to Connect's `connect`).
const CONSUMER: &str = "consumer";

/// What a member puts in its JoinGroup.
#[derive(Debug, Clone, Copy)]
pub(crate) struct JoinGroup<'a> {
    /// `group.id`.
    pub group: &'a str,
    /// Empty on a first join (and after the coordinator forgot us).
    pub member_id: &'a str,
    /// `group.instance.id`, for a static member.
    pub instance_id: Option<&'a str>,
    /// `session.timeout.ms`.
    pub session_timeout: Duration,
    /// `max.poll.interval.ms`, which Kafka sends as the rebalance timeout (v1+).
    pub rebalance_timeout: Duration,
    /// The assignors' names, in preference order, each with the member's subscription for
    /// it (which differs by assignor only in its user data).
    pub protocols: &'a [(&'a str, Bytes)],
}

/// JoinGroup. The same at every version: v0 has no rebalance timeout (the codec drops it, and
/// the coordinator uses the session timeout), and an instance id below v5 fails to encode.
pub(crate) fn join_group(j: &JoinGroup<'_>) -> JoinGroupRequest {
    JoinGroupRequest {
        group_id: j.group.into(),
        session_timeout_ms: millis(j.session_timeout),
        rebalance_timeout_ms: millis(j.rebalance_timeout),
        member_id: j.member_id.into(),
        group_instance_id: j.instance_id.map(Into::into),
        protocol_type: CONSUMER.into(),
        protocols: j
            .protocols
            .iter()
            .map(|(name, metadata)| JoinGroupRequestProtocol {
                name: (*name).into(),
                metadata: metadata.clone(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

/// SyncGroup for generation `g`: the leader's `assignments`, none from a follower. Protocol
/// type and name exist from v5 on (the codec drops them below).
pub(crate) fn sync_group(
    group: &str,
    g: &Generation,
    instance_id: Option<&str>,
    assignments: Vec<SyncGroupRequestAssignment>,
) -> SyncGroupRequest {
    SyncGroupRequest {
        group_id: group.into(),
        generation_id: g.id,
        member_id: (&g.member_id).into(),
        group_instance_id: instance_id.map(Into::into),
        protocol_type: Some(CONSUMER.into()),
        protocol_name: g.protocol.as_deref().map(Into::into),
        assignments,
        ..Default::default()
    }
}

/// Heartbeat for generation `g` (the instance id exists from v3 on).
pub(crate) fn heartbeat(group: &str, g: &Generation, instance_id: Option<&str>) -> HeartbeatRequest {
    HeartbeatRequest {
        group_id: group.into(),
        generation_id: g.id,
        member_id: (&g.member_id).into(),
        group_instance_id: instance_id.map(Into::into),
        ..Default::default()
    }
}

/// One member a LeaveGroup names: by member id, by instance id (an empty member id then means
/// "whichever member holds it"), or both. `reason` is logged by v5+ brokers (KIP-800).
pub(crate) fn member_identity(member_id: &str, instance_id: Option<&str>, reason: &str) -> MemberIdentity {
    MemberIdentity {
        member_id: member_id.into(),
        group_instance_id: instance_id.map(Into::into),
        // Ignorable: v3 and v4 drop it.
        reason: Some(reason.into()),
        ..Default::default()
    }
}

/// LeaveGroup for `members` at `version`: v3+ lists them (a member leaving, or an admin
/// removing static members); below v3 the request names exactly one member by member id. What
/// v0-2 cannot say — several members, an instance id — stays in the `members` list those
/// versions lack, so the codec refuses to encode it rather than send a LeaveGroup that
/// removes the wrong member, or nobody.
pub(crate) fn leave_group(group: &str, members: &[MemberIdentity], version: i16) -> LeaveGroupRequest {
    match members {
        [only] if version < 3 && only.group_instance_id.is_none() => LeaveGroupRequest {
            group_id: group.into(),
            member_id: only.member_id.clone(),
            ..Default::default()
        },
        _ => LeaveGroupRequest {
            group_id: group.into(),
            members: members.to_vec(),
            ..Default::default()
        },
    }
}

/// DescribeGroups for one group, without authorized operations (v3+ would compute them for
/// nothing).
pub(crate) fn describe_group(group: &str) -> DescribeGroupsRequest {
    DescribeGroupsRequest {
        groups: vec![group.into()],
        ..Default::default()
    }
}

/// A timeout in milliseconds as the protocol's `i32`; configurations are validated to fit, and
/// anything longer is capped rather than wrapped.
pub(crate) fn millis(d: Duration) -> i32 {
    d.as_millis().min(i32::MAX as u128) as i32
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{ApiKey, EncodeError, Message};
    use std::fmt::Debug;

    fn versions(api: ApiKey) -> std::ops::RangeInclusive<i16> {
        api.versions().min..=api.versions().max
    }

    /// Encodes `m` at `v`, decodes it with the generated decoder, and checks that the decoded
    /// message encodes to the same bytes: nothing the version has is lost or changed.
    fn round_trip<M: Message + Debug>(m: &M, v: i16) -> M {
        let bytes = m.to_bytes(v).unwrap_or_else(|e| panic!("{} v{v}: {e}", M::NAME));
        let back = M::from_bytes(bytes.clone(), v).unwrap_or_else(|e| panic!("{} v{v}: {e}", M::NAME));
        assert_eq!(back.to_bytes(v).unwrap(), bytes, "{} v{v}: {back:?}", M::NAME);
        back
    }

    fn generation() -> Generation {
        Generation {
            id: 12,
            member_id: "m-1".into(),
            protocol: Some("range".into()),
        }
    }

    fn join(instance_id: Option<&'static str>) -> JoinGroupRequest {
        let metadata = Bytes::from_static(b"\x00\x01subscription");
        let protocols = [("range", metadata.clone()), ("roundrobin", metadata)];
        join_group(&JoinGroup {
            group: "g",
            member_id: "m-1",
            instance_id,
            session_timeout: Duration::from_secs(45),
            rebalance_timeout: Duration::from_secs(300),
            protocols: &protocols,
        })
    }

    #[test]
    fn join_group_at_every_version() {
        for v in versions(ApiKey::JoinGroup) {
            let back = round_trip(&join(None), v);
            assert_eq!(back.group_id, "g");
            assert_eq!(back.member_id, "m-1");
            assert_eq!(back.session_timeout_ms, 45_000);
            // v0 has no rebalance timeout; the decoder fills in the schema's default.
            let rebalance = if v >= 1 { 300_000 } else { -1 };
            assert_eq!(back.rebalance_timeout_ms, rebalance, "v{v}");
            assert_eq!(back.protocol_type, "consumer");
            let names: Vec<&str> = back.protocols.iter().map(|p| p.name.as_str()).collect();
            assert_eq!(names, ["range", "roundrobin"]);
            assert!(back
                .protocols
                .iter()
                .all(|p| p.metadata[..] == b"\x00\x01subscription"[..]));
            assert_eq!(back.group_instance_id, None);
        }
    }

    #[test]
    fn a_static_join_needs_v5() {
        for v in versions(ApiKey::JoinGroup) {
            let req = join(Some("worker-1"));
            if v >= 5 {
                assert_eq!(round_trip(&req, v).group_instance_id.as_deref(), Some("worker-1"));
            } else {
                // As the codec has always done: fail loudly, never join as a dynamic member.
                assert!(
                    matches!(
                        req.to_bytes(v),
                        Err(EncodeError::UnsupportedField {
                            field: "group_instance_id",
                            ..
                        })
                    ),
                    "v{v}"
                );
            }
        }
    }

    #[test]
    fn sync_group_at_every_version() {
        let assignments = vec![SyncGroupRequestAssignment {
            member_id: "m-2".into(),
            assignment: Bytes::from_static(b"assigned"),
            ..Default::default()
        }];
        for v in versions(ApiKey::SyncGroup) {
            for instance_id in [None, Some("worker-1")] {
                let req = sync_group("g", &generation(), instance_id, assignments.clone());
                if instance_id.is_some() && v < 3 {
                    assert!(req.to_bytes(v).is_err(), "v{v}: an instance id needs v3");
                    continue;
                }
                let back = round_trip(&req, v);
                assert_eq!(back.group_id, "g");
                assert_eq!(back.generation_id, 12);
                assert_eq!(back.member_id, "m-1");
                assert_eq!(back.group_instance_id.as_deref(), instance_id);
                assert_eq!(back.assignments, assignments);
                // Protocol type and name are v5+ (and ignorable below).
                let (protocol_type, protocol_name) = if v >= 5 {
                    (Some("consumer"), Some("range"))
                } else {
                    (None, None)
                };
                assert_eq!(back.protocol_type.as_deref(), protocol_type, "v{v}");
                assert_eq!(back.protocol_name.as_deref(), protocol_name, "v{v}");
            }
        }
        // A generation without a protocol (the coordinator sent none) sends none.
        let g = Generation {
            protocol: None,
            ..generation()
        };
        assert_eq!(sync_group("g", &g, None, Vec::new()).protocol_name, None);
    }

    #[test]
    fn heartbeat_at_every_version() {
        for v in versions(ApiKey::Heartbeat) {
            for instance_id in [None, Some("worker-1")] {
                let req = heartbeat("g", &generation(), instance_id);
                if instance_id.is_some() && v < 3 {
                    assert!(req.to_bytes(v).is_err(), "v{v}: an instance id needs v3");
                    continue;
                }
                let back = round_trip(&req, v);
                assert_eq!(
                    (
                        back.group_id.as_str(),
                        back.generation_id,
                        back.member_id.as_str()
                    ),
                    ("g", 12, "m-1")
                );
                assert_eq!(back.group_instance_id.as_deref(), instance_id);
            }
        }
    }

    #[test]
    fn a_member_leaving_at_every_version() {
        let me = [member_identity("m-1", None, "the member is leaving the group")];
        for v in versions(ApiKey::LeaveGroup) {
            let back = round_trip(&leave_group("g", &me, v), v);
            assert_eq!(back.group_id, "g");
            if v < 3 {
                assert_eq!(back.member_id, "m-1", "v{v}");
                assert!(back.members.is_empty());
            } else {
                assert_eq!(back.member_id, "", "v{v}");
                assert_eq!(back.members.len(), 1);
                assert_eq!(back.members[0].member_id, "m-1");
                assert_eq!(back.members[0].group_instance_id, None);
                // The reason is v5+ and ignorable: dropped below.
                let reason = (v >= 5).then_some("the member is leaving the group");
                assert_eq!(back.members[0].reason.as_deref(), reason, "v{v}");
            }
        }
    }

    #[test]
    fn a_static_member_leaving_needs_v3() {
        let me = [member_identity("m-1", Some("worker-1"), "leaving")];
        for v in versions(ApiKey::LeaveGroup) {
            let req = leave_group("g", &me, v);
            if v >= 3 {
                let back = round_trip(&req, v);
                assert_eq!(back.members[0].member_id, "m-1");
                assert_eq!(back.members[0].group_instance_id.as_deref(), Some("worker-1"));
            } else {
                assert!(
                    matches!(
                        req.to_bytes(v),
                        Err(EncodeError::UnsupportedField { field: "members", .. })
                    ),
                    "v{v}"
                );
            }
        }
    }

    /// What admin's removal of static members sends: several members by instance id.
    #[test]
    fn removing_members_by_instance_id_at_every_version() {
        let members = [
            member_identity("", Some("i-1"), "member was removed by an admin"),
            member_identity("", Some("i-2"), "member was removed by an admin"),
        ];
        for v in versions(ApiKey::LeaveGroup) {
            let req = leave_group("g", &members, v);
            if v >= 3 {
                let back = round_trip(&req, v);
                let ids: Vec<_> = back
                    .members
                    .iter()
                    .map(|m| (m.member_id.as_str(), m.group_instance_id.as_deref()))
                    .collect();
                assert_eq!(ids, [("", Some("i-1")), ("", Some("i-2"))], "v{v}");
            } else {
                assert!(
                    matches!(
                        req.to_bytes(v),
                        Err(EncodeError::UnsupportedField { field: "members", .. })
                    ),
                    "v{v}"
                );
            }
        }
        // Several dynamic members cannot be said below v3 either.
        let two = [
            member_identity("m-1", None, "x"),
            member_identity("m-2", None, "x"),
        ];
        assert!(leave_group("g", &two, 2).to_bytes(2).is_err());
    }

    #[test]
    fn describe_group_at_every_version() {
        for v in versions(ApiKey::DescribeGroups) {
            let back = round_trip(&describe_group("g"), v);
            assert_eq!(back.groups, ["g"]);
            assert!(!back.include_authorized_operations);
        }
    }

    #[test]
    fn timeouts_in_milliseconds_are_capped_not_wrapped() {
        assert_eq!(millis(Duration::from_millis(45_000)), 45_000);
        assert_eq!(millis(Duration::from_secs(u64::MAX)), i32::MAX);
    }
}
