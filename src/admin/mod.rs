//! [`Admin`]: the few cluster-management calls a batch job and the integration tests need —
//! creating and deleting topics, listing and describing consumer groups, and removing static
//! members by `group.instance.id` (KIP-345).
//!
//! Every call builds its request for the version negotiated with the broker it goes to, setting
//! a field only in the versions that have it, so an old broker gets a request it understands or
//! a clear error, never one with a field silently dropped.
//!
//! One file per resource: [`topics`] (CreateTopics, CreatePartitions, DeleteTopics),
//! [`groups`] (ListGroups, DescribeGroups, LeaveGroup), [`offsets`] (ListOffsets, OffsetFetch,
//! lag), [`transactions`] (ListTransactions, DescribeTransactions, DescribeProducers, finding
//! hanging transactions). This file holds the handle and what they share: finding the coordinator or the
//! controller, per-topic retries, waiting for metadata to settle.

mod consumer_group;
mod groups;
mod offsets;
mod topics;
mod transactions;

pub use groups::{GroupDescription, ListedGroup, MemberDescription};
pub use offsets::{OffsetSpec, PartitionLag};
pub use topics::NewTopic;
pub use transactions::{
    HangingSearch, HangingTransaction, ProducerDescription, TransactionDescription, TransactionFilter,
    TransactionListing, TransactionState, DEFAULT_MAX_TRANSACTION_TIMEOUT,
};
// The member describes its own group the way the admin does.
pub(crate) use groups::group_description;

use crate::authorization::Scope;
use crate::client::{metadata_request, Broker, Client};
use crate::error::{Error, Result};
use crate::protocol::messages::MetadataResponse;
use crate::protocol::{ApiKey, KafkaStr, Request};
use crate::retry::{retry, Backoff, Step};
use crate::KafkaCode;
use std::time::{Duration, Instant};

/// Ceiling for the pause between metadata polls while waiting for topics to settle.
const MAX_POLL_BACKOFF: Duration = Duration::from_secs(1);

/// Cluster administration over a [`Client`]: topics and consumer groups.
///
/// Cheap to clone; it shares the client's connections and metadata cache.
///
/// ```no_run
/// use kafka_group::{Client, NewTopic};
/// use std::time::Duration;
///
/// # fn main() -> kafka_group::Result<()> {
/// let client = Client::builder().bootstrap_servers("localhost:9092").build()?;
/// let admin = client.admin();
/// admin.create_topics_if_missing(&[NewTopic::new("events", 6, 3)], Duration::from_secs(30))?;
/// for group in admin.list_groups()? {
///     println!("{} {:?}", group.group_id, group.state);
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Admin {
    client: Client,
    api_timeout: Duration,
}

impl Client {
    /// An [`Admin`] handle on this client (sharing its connections and metadata cache), beside
    /// [`Client::consumer`] and [`Client::producer`].
    pub fn admin(&self) -> Admin {
        Admin::new(self)
    }
}

impl Admin {
    /// An admin handle using (a clone of) `client`; [`Client::admin`] is the public way.
    fn new(client: &Client) -> Self {
        Admin {
            client: client.clone(),
            api_timeout: client.api_timeout(),
        }
    }

    /// `default.api.timeout.ms`: how long group calls keep retrying while the coordinator
    /// moves or loads. Default: the client's (`ClientBuilder::api_timeout`, 60 s). Any value is
    /// taken: `Duration::MAX` retries without a limit, and a limit shorter than
    /// `request.timeout.ms` also shortens the requests, so a call ends at its limit. Topic calls
    /// take their own timeout, with the same rules.
    pub fn api_timeout(mut self, t: Duration) -> Self {
        self.api_timeout = t;
        self
    }

    /// Runs `call` against the coordinator of `group`, finding it again while the group is
    /// moving or loading, until `default.api.timeout.ms`.
    /// `call` gets the coordinator and that deadline, to bound its own requests by.
    fn with_coordinator<T>(
        &self,
        group: &str,
        mut call: impl FnMut(&Broker, Instant) -> Result<T>,
    ) -> Result<T> {
        let deadline = crate::deadline::after(self.api_timeout);
        self.client
            .retry_coordinator_errors(deadline, &format!("group {group}"), || {
                let coordinator = self.client.find_coordinator_by(group, deadline)?;
                call(&coordinator, deadline)
            })
    }

    /// The controller for ZooKeeper-mode clusters, which only accept topic changes there. KRaft
    /// brokers report a random live broker as `controller_id` and forward to the real
    /// controller, so the same rule serves both.
    fn send_to_controller<R: Request>(
        &self,
        deadline: Instant,
        build: impl Fn(i16) -> R,
    ) -> Result<R::Response> {
        let meta = self.client.refresh_metadata_by(Some(&[]), deadline)?;
        if meta.brokers.contains_key(&meta.controller_id) {
            self.client.send_to_by(meta.controller_id, deadline, build)
        } else {
            self.client.send_any_by(deadline, build)
        }
    }

    /// Sends a per-topic request for `names`, resending the topics answered `NOT_CONTROLLER`
    /// (the controller moved; nothing was done for them) until `deadline`. `send` gets the
    /// topics still pending and the broker-side timeout, and returns `(name, code, message)`
    /// per topic. Codes for which `accept` holds count as success. No broker to connect to is
    /// retried too (nothing was sent), until `deadline` (the caller's `timeout` from its start).
    fn per_topic_to_controller(
        &self,
        api: ApiKey,
        names: &[&str],
        deadline: Instant,
        timeout: Duration,
        accept: impl Fn(KafkaCode) -> bool,
        mut send: impl FnMut(&[&str], i32) -> Result<Vec<TopicOutcome>>,
    ) -> Result<()> {
        let mut pending: Vec<&str> = names.to_vec();
        let backoff = Backoff::fixed(self.client.retry_backoff());
        // The last cause says why: the controller moving, or no broker answering.
        let what = || {
            format!(
                "{}({}) within its timeout of {timeout:?}",
                api.name(),
                names.join(",")
            )
        };
        retry(deadline, backoff, what, || {
            let outcomes = match send(&pending, self.broker_timeout_ms(deadline)) {
                Ok(outcomes) => outcomes,
                Err(e) if e.is_not_connected() => {
                    log::debug!("{}: {e}; retrying", api.name());
                    return Ok(Step::Retry(e));
                }
                Err(e) => return Err(e),
            };
            let mut retry = Vec::new();
            for &name in &pending {
                let found = outcomes.iter().find(|(n, ..)| n.as_deref() == Some(name));
                let Some((_, code, message)) = found else {
                    let message = Some(format!("topic {name}: missing from the response"));
                    return Err(Error::Kafka {
                        api,
                        code: KafkaCode::UnknownServerError,
                        message,
                    });
                };
                match KafkaCode::from_code(*code) {
                    KafkaCode::None => {}
                    c if accept(c) => log::debug!("{}: topic {name}: {c}, accepted", api.name()),
                    KafkaCode::NotController => retry.push(name),
                    c => {
                        let message = message.as_deref().map(String::from);
                        let scope = Scope::topic(name);
                        return Err(kafka_error(api, c, scope, &format!("topic {name}"), message));
                    }
                }
            }
            if retry.is_empty() {
                return Ok(Step::Done(()));
            }
            log::debug!("{}: NOT_CONTROLLER for {retry:?}; resending", api.name());
            let cause = Error::Kafka {
                api,
                code: KafkaCode::NotController,
                message: Some(format!("topics {}", retry.join(","))),
            };
            pending = retry;
            Ok(Step::Retry(cause))
        })
    }

    /// The `timeoutMs` to send: what is left of the caller's timeout, but short enough that the
    /// broker's own timeout answer arrives before `request.timeout.ms` drops the connection.
    fn broker_timeout_ms(&self, deadline: Instant) -> i32 {
        let request_timeout = self.client.connection_config().request_timeout;
        let headroom = request_timeout - request_timeout / 4;
        let t = deadline.saturating_duration_since(Instant::now()).min(headroom);
        i32::try_from(t.as_millis()).unwrap_or(i32::MAX).max(1)
    }

    /// Polls every reachable broker's metadata for `topics` until `ready` holds for all of
    /// them, then refreshes the client's cache so that it shows the settled state.
    fn wait_for_metadata(
        &self,
        topics: &[&str],
        deadline: Instant,
        what: &str,
        ready: impl Fn(&MetadataResponse) -> bool,
    ) -> Result<()> {
        // Polling, not retrying a failure: never slower than MAX_POLL_BACKOFF, whatever
        // retry.backoff.ms says (a huge one would otherwise sleep out the whole timeout).
        let first = self.client.retry_backoff().min(MAX_POLL_BACKOFF);
        let backoff = Backoff::exponential(first, MAX_POLL_BACKOFF);
        let what = || format!("{what} ({})", topics.join(","));
        retry(deadline, backoff, what, || {
            match self.every_broker_shows(topics, &ready, deadline) {
                Ok(true) => Ok(Step::Done(())),
                Ok(false) => Ok(Step::Wait),
                Err(e) if e.is_unreachable() => Ok(Step::Retry(e)),
                Err(e) => Err(e),
            }
        })?;
        self.client.refresh_metadata_by(Some(topics), deadline)?;
        Ok(())
    }

    /// Whether every broker that answers agrees (brokers learn of topic changes one by one, and
    /// a consumer may ask any of them). A broker that cannot be reached is not waited for.
    fn every_broker_shows(
        &self,
        topics: &[&str],
        ready: &impl Fn(&MetadataResponse) -> bool,
        deadline: Instant,
    ) -> Result<bool> {
        let meta = self.client.refresh_metadata_by(Some(&[]), deadline)?;
        let mut answered = 0;
        for &id in meta.brokers.keys() {
            match self
                .client
                .send_to_by(id, deadline, |v| metadata_request(Some(topics), v))
            {
                Ok(resp) if ready(&resp) => answered += 1,
                Ok(_) => return Ok(false),
                Err(e) if e.is_unreachable() => {
                    log::debug!("broker {id} unreachable while polling metadata: {e}");
                }
                Err(e) => return Err(e),
            }
        }
        Ok(answered > 0)
    }
}

/// `(topic name, error code, error message)` as a per-topic response carries them.
type TopicOutcome = (Option<KafkaStr>, i16, Option<KafkaStr>);

/// A broker error for one item, with the item (`topic x`, `group g`) leading the message; an
/// authorization error for the resource of `scope` (which names it itself).
fn kafka_error(api: ApiKey, code: KafkaCode, scope: Scope<'_>, what: &str, message: Option<String>) -> Error {
    Error::from_code_about(api, code, scope, what, message)
}

#[cfg(test)]
mod tests {
    use super::topics::{create_partitions_request, create_topics_request, delete_topics_request, NewTopic};
    use super::*;
    use crate::protocol::messages::ListGroupsRequest;
    use crate::protocol::Message;

    fn versions(api: ApiKey) -> std::ops::RangeInclusive<i16> {
        api.versions().min..=api.versions().max
    }

    #[test]
    fn every_request_encodes_in_every_version() {
        let topic = NewTopic::new("t", 6, 1).config("retention.ms", "1000");
        for v in versions(ApiKey::CreateTopics) {
            create_topics_request(&[&topic], 1000).to_bytes(v).unwrap();
        }
        for v in versions(ApiKey::DeleteTopics) {
            delete_topics_request(&["a", "b"], 1000, v).to_bytes(v).unwrap();
        }
        for v in versions(ApiKey::CreatePartitions) {
            create_partitions_request(&[("t", 12)], 1000).to_bytes(v).unwrap();
        }
        for v in versions(ApiKey::ListGroups) {
            ListGroupsRequest::default().to_bytes(v).unwrap();
        }
        // DescribeGroups and LeaveGroup are built by group::requests, tested there at every
        // version (removing members by instance id included).
    }

    #[test]
    fn item_errors_name_the_item() {
        let e = kafka_error(
            ApiKey::CreateTopics,
            KafkaCode::TopicAlreadyExists,
            Scope::topic("t"),
            "topic t",
            Some("exists".into()),
        );
        assert_eq!(
            e.to_string(),
            "CreateTopics failed: TOPIC_ALREADY_EXISTS (36): topic t: exists"
        );
        let e = kafka_error(
            ApiKey::DeleteTopics,
            KafkaCode::UnknownTopicOrPartition,
            Scope::topic("t"),
            "topic t",
            Some(String::new()),
        );
        assert!(e.to_string().ends_with(": topic t"), "{e}");
        // Authorization: the resource from the scope, the broker's message kept as its own.
        let e = kafka_error(
            ApiKey::CreateTopics,
            KafkaCode::TopicAuthorizationFailed,
            Scope::topic("t"),
            "topic t",
            Some("Authorization failed.".into()),
        );
        match &e {
            Error::Authorization {
                api: ApiKey::CreateTopics,
                resource: crate::Resource::Topic(t),
                message: Some(m),
                ..
            } => assert_eq!((t.as_str(), m.as_str()), ("t", "Authorization failed.")),
            other => panic!("{other:?}"),
        }
        let e = kafka_error(
            ApiKey::ListGroups,
            KafkaCode::ClusterAuthorizationFailed,
            Scope::default(),
            "broker 1",
            None,
        );
        assert!(
            matches!(
                e,
                Error::Authorization {
                    resource: crate::Resource::Cluster,
                    ..
                }
            ),
            "{e:?}"
        );
        let e = kafka_error(
            ApiKey::DescribeGroups,
            KafkaCode::GroupAuthorizationFailed,
            Scope::group("g"),
            "group g",
            None,
        );
        assert!(
            e.to_string().starts_with("not authorized to DESCRIBE group `g`"),
            "{e}"
        );
    }
}
