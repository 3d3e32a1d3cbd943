//! Authorization errors: which resource an `*_AUTHORIZATION_FAILED` code is about, and which
//! ACL operation the request needed on it.
//!
//! A broker with an authorizer answers a request the principal has no ACL for with
//! `TOPIC_AUTHORIZATION_FAILED`, `GROUP_AUTHORIZATION_FAILED` or `CLUSTER_AUTHORIZATION_FAILED`,
//! often per topic or per partition, and never with the operation it checked. The call site
//! knows the topic or group it asked about; this module turns that into a [`Resource`] and
//! looks the operation up in the table of Kafka's authorization documentation ("Operations and
//! Resources on Protocols"). Pure, so the mapping is tested without a broker.

use crate::protocol::ApiKey;
use crate::KafkaCode;
use std::fmt;

/// A resource an ACL protects, as an authorization error names it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Resource {
    /// A topic (`TOPIC_AUTHORIZATION_FAILED`).
    Topic(String),
    /// A consumer group (`GROUP_AUTHORIZATION_FAILED`).
    Group(String),
    /// The cluster itself (`CLUSTER_AUTHORIZATION_FAILED`).
    Cluster,
    /// A transactional producer's `transactional.id` (`TRANSACTIONAL_ID_AUTHORIZATION_FAILED`).
    TransactionalId(String),
}

impl fmt::Display for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Resource::Topic(t) => write!(f, "topic `{t}`"),
            Resource::Group(g) => write!(f, "group `{g}`"),
            Resource::Cluster => f.write_str("the cluster"),
            Resource::TransactionalId(t) => write!(f, "transactional id `{t}`"),
        }
    }
}

/// What a call site knows a broker code may be about: the topic and the group of the request
/// (or of the failing entry in a per-topic or per-partition answer).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Scope<'a> {
    pub(crate) topic: Option<&'a str>,
    pub(crate) group: Option<&'a str>,
    pub(crate) transactional_id: Option<&'a str>,
}

impl<'a> Scope<'a> {
    /// About a topic.
    pub(crate) fn topic(topic: &'a str) -> Self {
        Scope {
            topic: Some(topic),
            ..Scope::default()
        }
    }

    /// About a group.
    pub(crate) fn group(group: &'a str) -> Self {
        Scope {
            group: Some(group),
            ..Scope::default()
        }
    }

    /// About a transactional producer (and, for TxnOffsetCommit, its consumer group).
    pub(crate) fn transaction(transactional_id: &'a str, group: Option<&'a str>) -> Self {
        Scope {
            transactional_id: Some(transactional_id),
            group,
            ..Scope::default()
        }
    }
}

/// The resource an authorization code is about, when `code` is one and the scope names it.
/// `None` for every other code, and for a topic or group code the call site cannot name (the
/// caller keeps it as a plain broker error then, rather than invent a name).
pub(crate) fn resource_for(code: KafkaCode, scope: Scope<'_>) -> Option<Resource> {
    match code {
        KafkaCode::TopicAuthorizationFailed => scope.topic.map(|t| Resource::Topic(t.to_string())),
        KafkaCode::GroupAuthorizationFailed => scope.group.map(|g| Resource::Group(g.to_string())),
        KafkaCode::ClusterAuthorizationFailed => Some(Resource::Cluster),
        KafkaCode::TransactionalIdAuthorizationFailed => scope
            .transactional_id
            .map(|t| Resource::TransactionalId(t.to_string())),
        _ => None,
    }
}

/// The ACL operation `api` needs on `resource`, as Kafka's authorization documentation lists
/// it; `None` where the table does not say, or names more than one (the error then does not
/// guess).
pub(crate) fn needed_operation(api: ApiKey, resource: &Resource) -> Option<&'static str> {
    use ApiKey as A;
    match (api, resource) {
        (A::Fetch | A::OffsetCommit, Resource::Topic(_)) => Some("READ"),
        (A::Produce, Resource::Topic(_)) => Some("WRITE"),
        (A::Metadata | A::ListOffsets | A::OffsetFetch, Resource::Topic(_)) => Some("DESCRIBE"),
        (A::CreateTopics, Resource::Topic(_)) => Some("CREATE"),
        (A::DeleteTopics, Resource::Topic(_)) => Some("DELETE"),
        (A::CreatePartitions, Resource::Topic(_)) => Some("ALTER"),
        (
            A::JoinGroup | A::SyncGroup | A::Heartbeat | A::LeaveGroup | A::OffsetCommit,
            Resource::Group(_),
        ) => Some("READ"),
        (A::FindCoordinator | A::DescribeGroups | A::OffsetFetch, Resource::Group(_)) => Some("DESCRIBE"),
        // The idempotent producer: InitProducerId, and Produce with a producer id on brokers
        // before 2.8.
        (A::InitProducerId | A::Produce, Resource::Cluster) => Some("IDEMPOTENT_WRITE"),
        // Every call of a transactional producer writes under its transactional id.
        (
            A::InitProducerId
            | A::Produce
            | A::AddPartitionsToTxn
            | A::AddOffsetsToTxn
            | A::TxnOffsetCommit
            | A::EndTxn
            | A::FindCoordinator,
            Resource::TransactionalId(_),
        ) => Some(if matches!(api, A::FindCoordinator) {
            "DESCRIBE"
        } else {
            "WRITE"
        }),
        (A::TxnOffsetCommit | A::AddOffsetsToTxn, Resource::Group(_)) => Some("READ"),
        _ => None,
    }
}

/// The operator's reading of an authorization error (the `Display` of
/// [`Error::Authorization`](crate::Error::Authorization)).
pub(crate) fn explain(
    f: &mut fmt::Formatter<'_>,
    api: ApiKey,
    code: KafkaCode,
    resource: &Resource,
    message: Option<&str>,
) -> fmt::Result {
    let (name, op) = (api.name(), needed_operation(api, resource));
    match op {
        Some(op) => write!(
            f,
            "not authorized to {op} {resource} ({} from {name}): the principal needs an ACL \
             allowing {op} on {resource}",
            code.name()
        )?,
        None => write!(
            f,
            "not authorized for {resource} ({} from {name}): the principal lacks an ACL on \
             {resource} that {name} needs",
            code.name()
        )?,
    }
    if api == ApiKey::CreateTopics && matches!(resource, Resource::Topic(_)) {
        // Kafka checks CREATE on the cluster first, then on each topic.
        f.write_str(" (or CREATE on the cluster)")?;
    }
    if op == Some("IDEMPOTENT_WRITE") {
        // KIP-679: from 2.8 a broker also lets any principal with WRITE on some topic have a
        // producer id.
        f.write_str(" (Kafka 2.8+ also accepts WRITE on any topic; or set enable.idempotence=false)")?;
    }
    if let Some(m) = message.filter(|m| !m.is_empty()) {
        write!(f, "; the broker said: {m}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_code_names_the_resource_of_its_kind() {
        let scope = Scope {
            topic: Some("orders"),
            group: Some("billing"),
            ..Scope::default()
        };
        assert_eq!(
            resource_for(KafkaCode::TopicAuthorizationFailed, scope),
            Some(Resource::Topic("orders".into()))
        );
        assert_eq!(
            resource_for(KafkaCode::GroupAuthorizationFailed, scope),
            Some(Resource::Group("billing".into()))
        );
        assert_eq!(
            resource_for(KafkaCode::ClusterAuthorizationFailed, Scope::default()),
            Some(Resource::Cluster)
        );
        // A code the scope cannot name stays a plain broker error.
        assert_eq!(
            resource_for(KafkaCode::TopicAuthorizationFailed, Scope::group("g")),
            None
        );
        assert_eq!(
            resource_for(KafkaCode::GroupAuthorizationFailed, Scope::topic("t")),
            None
        );
        for code in [
            KafkaCode::None,
            KafkaCode::UnknownTopicOrPartition,
            KafkaCode::SaslAuthenticationFailed,
            KafkaCode::TransactionalIdAuthorizationFailed,
        ] {
            assert_eq!(resource_for(code, scope), None, "{code}");
        }
    }

    #[test]
    fn an_authorization_error_is_final_and_keeps_its_code() {
        use crate::Error;
        let e = Error::from_code(
            ApiKey::JoinGroup,
            KafkaCode::GroupAuthorizationFailed,
            Scope::group("g"),
            Some("denied".into()),
        );
        assert!(
            matches!(&e, Error::Authorization { resource: Resource::Group(g), message: Some(m), .. } if g == "g" && m == "denied"),
            "{e:?}"
        );
        assert_eq!(e.kafka_code(), Some(KafkaCode::GroupAuthorizationFailed));
        // Nothing retries it: not transient, not a coordinator move, the connection is fine.
        assert!(!e.is_transient());
        assert!(!e.is_coordinator_transient());
        assert!(!e.breaks_connection());
        // Our own context goes to a plain broker error only; an authorization error names
        // its resource itself and keeps `message` for the broker's words.
        let e = Error::from_code_in(
            ApiKey::OffsetCommit,
            KafkaCode::TopicAuthorizationFailed,
            Scope::topic("t"),
            "commit of t-0 rejected".into(),
        );
        assert!(matches!(e, Error::Authorization { message: None, .. }), "{e:?}");
        let e = Error::from_code_in(
            ApiKey::OffsetCommit,
            KafkaCode::OffsetMetadataTooLarge,
            Scope::topic("t"),
            "commit of t-0 rejected".into(),
        );
        assert!(
            matches!(e, Error::Kafka { message: Some(ref m), .. } if m == "commit of t-0 rejected"),
            "{e:?}"
        );
        // Without the name, a topic code stays a plain broker error (never an invented name).
        let e = Error::from_code(
            ApiKey::Fetch,
            KafkaCode::TopicAuthorizationFailed,
            Scope::default(),
            None,
        );
        assert!(matches!(e, Error::Kafka { .. }), "{e:?}");
    }

    #[test]
    fn operations_follow_kafkas_table() {
        let t = Resource::Topic("t".into());
        let g = Resource::Group("g".into());
        let cases = [
            (ApiKey::Fetch, &t, Some("READ")),
            (ApiKey::Produce, &t, Some("WRITE")),
            (ApiKey::Metadata, &t, Some("DESCRIBE")),
            (ApiKey::ListOffsets, &t, Some("DESCRIBE")),
            (ApiKey::OffsetCommit, &t, Some("READ")),
            (ApiKey::OffsetCommit, &g, Some("READ")),
            (ApiKey::OffsetFetch, &t, Some("DESCRIBE")),
            (ApiKey::OffsetFetch, &g, Some("DESCRIBE")),
            (ApiKey::FindCoordinator, &g, Some("DESCRIBE")),
            (ApiKey::JoinGroup, &g, Some("READ")),
            (ApiKey::SyncGroup, &g, Some("READ")),
            (ApiKey::Heartbeat, &g, Some("READ")),
            (ApiKey::LeaveGroup, &g, Some("READ")),
            (ApiKey::DescribeGroups, &g, Some("DESCRIBE")),
            (ApiKey::CreateTopics, &t, Some("CREATE")),
            (ApiKey::DeleteTopics, &t, Some("DELETE")),
            (ApiKey::CreatePartitions, &t, Some("ALTER")),
            // Not in the table: no guess.
            (ApiKey::ListGroups, &Resource::Cluster, None),
            (ApiKey::Fetch, &g, None),
        ];
        for (api, resource, want) in cases {
            assert_eq!(needed_operation(api, resource), want, "{} {resource}", api.name());
        }
    }

    struct Shown(ApiKey, KafkaCode, Resource, Option<&'static str>);

    impl fmt::Display for Shown {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            explain(f, self.0, self.1, &self.2, self.3)
        }
    }

    #[test]
    fn the_message_names_resource_operation_code_and_api() {
        let s = Shown(
            ApiKey::Fetch,
            KafkaCode::TopicAuthorizationFailed,
            Resource::Topic("orders".into()),
            None,
        )
        .to_string();
        assert_eq!(
            s,
            "not authorized to READ topic `orders` (TOPIC_AUTHORIZATION_FAILED from Fetch): the \
             principal needs an ACL allowing READ on topic `orders`"
        );
        let s = Shown(
            ApiKey::ListGroups,
            KafkaCode::ClusterAuthorizationFailed,
            Resource::Cluster,
            Some("denied"),
        )
        .to_string();
        assert_eq!(
            s,
            "not authorized for the cluster (CLUSTER_AUTHORIZATION_FAILED from ListGroups): the \
             principal lacks an ACL on the cluster that ListGroups needs; the broker said: denied"
        );
        let s = Shown(
            ApiKey::CreateTopics,
            KafkaCode::TopicAuthorizationFailed,
            Resource::Topic("x".into()),
            Some(""),
        )
        .to_string();
        assert!(
            s.ends_with("allowing CREATE on topic `x` (or CREATE on the cluster)"),
            "{s}"
        );
    }
}
