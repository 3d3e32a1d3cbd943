//! Version negotiation, as pure functions over ApiVersions tables.
//!
//! Kept apart from sockets so that every rule — the per-request pick, the KIP-511 downgrade,
//! capability checks across several APIs — is unit-tested without a broker.

use crate::error::{Error, MissingApi};
use crate::net::releases;
use crate::protocol::{ApiKey, VersionRange};
use crate::KafkaCode;
use std::collections::BTreeMap;

/// API key → the version range a broker advertises.
pub type BrokerVersions = BTreeMap<i16, VersionRange>;

/// The versions of `api` this client may use: those its codecs have and its logic is written
/// for ([`implemented`]), up to an optional cap.
pub fn ours(api: ApiKey, cap: Option<i16>) -> VersionRange {
    let mut ours = api.versions();
    ours.max = ours.max.min(implemented(api));
    if let Some(cap) = cap {
        ours.max = ours.max.min(cap);
    }
    ours
}

/// The highest version of `api` whose fields the client's request builders fill and whose
/// answers its handlers read. The generated codecs know every version of the Kafka 3.9 and 4.4
/// schemas ([`ApiKey::versions`]); a newer version is taken into use here only together with the
/// code and the tests for what it changes (Produce v13 names topics by id, Metadata v13 adds a
/// top-level error, …). A unit test lists the APIs held back, so that a schema update that adds
/// versions cannot slip into use unreviewed.
pub const fn implemented(api: ApiKey) -> i16 {
    match api {
        ApiKey::ApiVersions => 4,
        ApiKey::DescribeGroups => 5,
        ApiKey::Fetch => 17,
        ApiKey::InitProducerId => 5,
        ApiKey::ListOffsets => 9,
        ApiKey::Metadata => 12,
        ApiKey::OffsetCommit => 9,
        ApiKey::OffsetFetch => 9,
        // v12 is v11 on the wire; inside a transaction it means transaction protocol v2
        // (partitions added by the Produce itself), so a producer on protocol v1 caps it at 11.
        ApiKey::Produce => 12,
        // Clients speak AddPartitionsToTxn up to v3 (v4+ are between brokers). EndTxn v5 and
        // TxnOffsetCommit v5 are transaction protocol v2 (KIP-890), capped at 4 on v1;
        // TxnOffsetCommit v6 names topics by id.
        ApiKey::AddPartitionsToTxn => 3,
        ApiKey::TxnOffsetCommit => 5,
        _ => api.versions().max,
    }
}

/// The version to use for `api`: the highest one both sides support, below an optional cap.
pub fn pick(api: ApiKey, broker: &BrokerVersions, cap: Option<i16>) -> Result<i16, Error> {
    let ours = ours(api, cap);
    let theirs = broker.get(&api.key()).copied();
    match theirs.map(|b| b.intersect(&ours)) {
        Some(common) if !common.is_empty() => Ok(common.max),
        _ => Err(Error::UnsupportedVersion {
            api,
            ours,
            broker: theirs,
        }),
    }
}

/// A feature that needs minimum versions of several APIs at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capability {
    /// How errors name it.
    pub name: &'static str,
    /// `(api, lowest version)` pairs it needs.
    pub needs: &'static [(ApiKey, i16)],
}

/// KIP-345 static membership: `group.instance.id` on every group request.
pub const STATIC_MEMBERSHIP: Capability = Capability {
    name: "static membership (group.instance.id)",
    needs: &[
        (ApiKey::JoinGroup, 5),
        (ApiKey::SyncGroup, 3),
        (ApiKey::Heartbeat, 3),
        (ApiKey::OffsetCommit, 7),
    ],
};

/// KIP-848's consumer group protocol, with commits carrying the member epoch.
pub const CONSUMER_GROUP_PROTOCOL: Capability = Capability {
    name: "the consumer group protocol (KIP-848, group.protocol=consumer)",
    needs: &[
        // v1 (KIP-1082: the member picks its id) is Kafka 4.0, where the protocol is GA;
        // 3.7 to 3.9 served an early-access version, off by default.
        (ApiKey::ConsumerGroupHeartbeat, 1),
        (ApiKey::OffsetCommit, 9),
        (ApiKey::OffsetFetch, 9),
    ],
};

/// Share groups (KIP-932): membership by ShareGroupHeartbeat, records by ShareFetch and
/// acknowledgements by ShareAcknowledge. Version 1 of each is Kafka 4.1, where share groups
/// were a preview the cluster enables with `kafka-features.sh upgrade --feature share.version=1`;
/// 4.2 made them production-ready (4.0's early-access version 0 is not spoken).
pub const SHARE_GROUPS: Capability = Capability {
    name: "share groups (KIP-932; Kafka 4.2+, or 4.1 with the share.version=1 feature enabled)",
    needs: &[
        (ApiKey::ShareGroupHeartbeat, 1),
        (ApiKey::ShareFetch, 1),
        (ApiKey::ShareAcknowledge, 1),
    ],
};

/// KIP-345 batch LeaveGroup: removing static members by `group.instance.id`.
pub const REMOVE_MEMBERS_BY_INSTANCE_ID: Capability = Capability {
    name: "removing members by group.instance.id (LeaveGroup v3)",
    needs: &[(ApiKey::LeaveGroup, 3)],
};

/// Record headers exist from the record batch format (magic 2), which Produce v3 brings.
pub const RECORD_HEADERS: Capability = Capability {
    name: "record headers",
    needs: &[(ApiKey::Produce, 3)],
};

/// The idempotent producer (KIP-98, Kafka 0.11+): a producer id from InitProducerId, and record
/// batches (Produce v3+) to carry it with the epoch and sequence numbers.
pub const IDEMPOTENT_PRODUCER: Capability = Capability {
    name: "the idempotent producer (enable.idempotence)",
    needs: &[(ApiKey::InitProducerId, 0), (ApiKey::Produce, 3)],
};

/// zstd compression (KIP-110) needs Produce v7.
pub const ZSTD_COMPRESSION: Capability = Capability {
    name: "zstd compression",
    needs: &[(ApiKey::Produce, 7)],
};

/// Checks that the broker has every API version `cap` needs; one error lists all that are
/// missing, the oldest Kafka release that has them, and the release the broker looks like.
pub fn check(cap: &Capability, broker: &BrokerVersions) -> Result<(), Error> {
    let missing: Vec<MissingApi> = cap
        .needs
        .iter()
        .filter_map(|&(api, needed)| {
            let b = broker.get(&api.key()).copied();
            match b {
                Some(r) if r.max >= needed => None,
                _ => Some(MissingApi {
                    api,
                    needed,
                    broker: b,
                }),
            }
        })
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let reqs: Vec<(i16, i16)> = cap.needs.iter().map(|(a, v)| (a.key(), *v)).collect();
    Err(Error::MissingCapability {
        capability: cap.name,
        missing,
        since_release: releases::oldest_with(&reqs).map(|r| r.name),
        // The closest release the broker's own versions allow (never an older one because some
        // optional API is missing); none for a table like no Kafka release's, or newer than all.
        broker_release: match releases::identify(broker) {
            releases::ReleaseMatch::Exact(r) | releases::ReleaseMatch::Closest { release: r, .. } => {
                Some(r.name)
            }
            releases::ReleaseMatch::Newer { .. } | releases::ReleaseMatch::Unknown => None,
        },
    })
}

/// What to do after one ApiVersions attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Handshake {
    /// The broker answered; this is its table.
    Done(BrokerVersions),
    /// The broker rejected the version; try this strictly lower one.
    Retry(i16),
}

/// The KIP-511 rule. A broker that does not know the ApiVersions version we sent answers
/// `UNSUPPORTED_VERSION` in the v0 shape, listing (from 2.4 on) the ApiVersions range it does
/// support. We move only to a strictly lower version — the advertised max, or v0 when nothing
/// is advertised — so a broker that keeps rejecting cannot make us loop.
pub fn after_attempt(sent: i16, code: KafkaCode, advertised: BrokerVersions) -> Result<Handshake, String> {
    match code {
        KafkaCode::None => Ok(Handshake::Done(advertised)),
        KafkaCode::UnsupportedVersion => {
            let next = match advertised.get(&ApiKey::ApiVersions.key()) {
                Some(r) => r.max.min(implemented(ApiKey::ApiVersions)),
                None => 0,
            };
            if next < sent && next >= 0 {
                Ok(Handshake::Retry(next))
            } else {
                Err(format!(
                    "broker rejected ApiVersions v{sent} and offers no lower version"
                ))
            }
        }
        other => Err(format!("broker answered ApiVersions v{sent} with {other}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(rows: &[(i16, i16, i16)]) -> BrokerVersions {
        rows.iter()
            .map(|&(k, a, b)| (k, VersionRange::new(a, b)))
            .collect()
    }

    /// The APIs whose newest codec versions (from the 4.4 schemas) the client does not use yet,
    /// with the version it stops at. A schema update that adds versions fails here until the
    /// new version is either taken into use or held back on purpose.
    #[test]
    fn versions_held_back_from_the_codecs_are_the_reviewed_ones() {
        let held: Vec<(&str, i16, i16)> = ApiKey::ALL
            .iter()
            .filter(|api| implemented(**api) < api.versions().max)
            .map(|api| (api.name(), implemented(*api), api.versions().max))
            .collect();
        assert_eq!(
            held,
            [
                ("Produce", 12, 13),
                ("Fetch", 17, 18),
                ("ListOffsets", 9, 11),
                ("Metadata", 12, 13),
                ("OffsetCommit", 9, 10),
                ("OffsetFetch", 9, 10),
                ("DescribeGroups", 5, 6),
                ("ApiVersions", 4, 5),
                ("InitProducerId", 5, 6),
                ("AddPartitionsToTxn", 3, 5),
                ("TxnOffsetCommit", 5, 6),
            ]
        );
        for api in ApiKey::ALL {
            assert!(implemented(*api) >= api.versions().min, "{}", api.name());
            let b = table(&[(api.key(), 0, i16::MAX)]);
            assert_eq!(pick(*api, &b, None).unwrap(), implemented(*api), "{}", api.name());
        }
    }

    #[test]
    fn picks_the_highest_common_version() {
        let b = table(&[(11, 0, 4), (12, 0, 99)]);
        assert_eq!(pick(ApiKey::JoinGroup, &b, None).unwrap(), 4);
        assert_eq!(
            pick(ApiKey::Heartbeat, &b, None).unwrap(),
            ApiKey::Heartbeat.versions().max
        );
        assert_eq!(pick(ApiKey::Heartbeat, &b, Some(2)).unwrap(), 2);
    }

    #[test]
    fn no_overlap_is_an_error_naming_both_ranges() {
        let b = table(&[(11, 20, 30)]);
        let e = pick(ApiKey::JoinGroup, &b, None).unwrap_err();
        assert!(matches!(
            e,
            Error::UnsupportedVersion {
                api: ApiKey::JoinGroup,
                broker: Some(_),
                ..
            }
        ));
        assert!(e.to_string().contains("broker supports 20..=30"), "{e}");
        let e = pick(ApiKey::Heartbeat, &b, None).unwrap_err();
        assert!(e.to_string().contains("does not support this API"), "{e}");
    }

    #[test]
    fn static_membership_on_2_2_is_one_clear_error() {
        let b = releases::by_name("zk-2.2").unwrap().apis.clone();
        let e = check(&STATIC_MEMBERSHIP, &b).unwrap_err();
        let Error::MissingCapability {
            missing,
            since_release,
            broker_release,
            ..
        } = &e
        else {
            panic!("{e}")
        };
        assert_eq!(missing.len(), 4);
        assert_eq!(*since_release, Some("zk-2.3"));
        assert_eq!(*broker_release, Some("zk-2.2"));
        let text = e.to_string();
        for part in [
            "JoinGroup needs v5+",
            "broker supports 0..=4",
            "SyncGroup needs v3+",
            "Kafka 2.3 or newer",
        ] {
            assert!(text.contains(part), "{text}");
        }
        let ok = releases::by_name("zk-2.3").unwrap().apis.clone();
        assert!(check(&STATIC_MEMBERSHIP, &ok).is_ok());
        assert!(check(&REMOVE_MEMBERS_BY_INSTANCE_ID, &ok).is_err());
    }

    #[test]
    fn the_consumer_protocol_needs_kafka_4_0() {
        let e = check(
            &CONSUMER_GROUP_PROTOCOL,
            &releases::by_name("kraft-3.9").unwrap().apis,
        )
        .unwrap_err();
        let Error::MissingCapability { since_release, .. } = &e else {
            panic!("{e}")
        };
        assert_eq!(*since_release, Some("kraft-4.0"));
        assert!(e.to_string().contains("group.protocol=consumer"), "{e}");
        assert!(check(
            &CONSUMER_GROUP_PROTOCOL,
            &releases::by_name("kraft-4.0").unwrap().apis
        )
        .is_ok());
    }

    #[test]
    fn share_groups_need_kafka_4_1_and_name_the_feature() {
        let e = check(&SHARE_GROUPS, &releases::by_name("kraft-4.0").unwrap().apis).unwrap_err();
        let Error::MissingCapability { since_release, .. } = &e else {
            panic!("{e}")
        };
        assert_eq!(*since_release, Some("kraft-4.1"));
        assert!(e.to_string().contains("share.version=1"), "{e}");
        assert!(check(&SHARE_GROUPS, &releases::by_name("kraft-4.2").unwrap().apis).is_ok());
    }

    #[test]
    fn idempotence_needs_kafka_0_11() {
        let old = releases::by_name("zk-0.10.2").unwrap().apis.clone();
        let e = check(&IDEMPOTENT_PRODUCER, &old).unwrap_err();
        let Error::MissingCapability {
            missing,
            since_release,
            ..
        } = &e
        else {
            panic!("{e}")
        };
        assert_eq!(missing.len(), 2, "{e}");
        assert_eq!(*since_release, Some("zk-0.11.0"));
        assert!(e.to_string().contains("InitProducerId"), "{e}");
        let ok = releases::by_name("zk-0.11.0").unwrap().apis.clone();
        assert!(check(&IDEMPOTENT_PRODUCER, &ok).is_ok());
    }

    #[test]
    fn kip_511_downgrade_only_moves_down() {
        let adv = table(&[(18, 0, 2)]);
        assert_eq!(
            after_attempt(3, KafkaCode::UnsupportedVersion, adv.clone()),
            Ok(Handshake::Retry(2))
        );
        assert_eq!(
            after_attempt(3, KafkaCode::UnsupportedVersion, BrokerVersions::new()),
            Ok(Handshake::Retry(0))
        );
        // A broker that rejects v2 while advertising v2, or rejects v0, ends the handshake.
        assert!(after_attempt(2, KafkaCode::UnsupportedVersion, adv).is_err());
        assert!(after_attempt(0, KafkaCode::UnsupportedVersion, BrokerVersions::new()).is_err());
        let ok = table(&[(18, 0, 3), (11, 0, 9)]);
        assert_eq!(
            after_attempt(3, KafkaCode::None, ok.clone()),
            Ok(Handshake::Done(ok))
        );
        assert!(after_attempt(3, KafkaCode::InvalidRequest, BrokerVersions::new()).is_err());
    }
}
