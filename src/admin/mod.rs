//! [`Admin`]: the few cluster-management calls a batch job and the integration tests need —
//! creating and deleting topics, listing and describing consumer groups, and removing static
//! members by `group.instance.id` (KIP-345).
//!
//! Every call builds its request for the version negotiated with the broker it goes to, setting
//! a field only in the versions that have it, so an old broker gets a request it understands or
//! a clear error, never one with a field silently dropped.

use crate::authorization::Scope;
use crate::client::{metadata_request, time_left, topic_denied, Broker, Client, Metadata};
use crate::consumer::offsets;
use crate::error::{Error, Result};
use crate::group::Assignment;
use crate::group::TopicPartition;
use crate::net::versions::{self, REMOVE_MEMBERS_BY_INSTANCE_ID};
use crate::protocol::messages::create_partitions_request::CreatePartitionsTopic;
use crate::protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use crate::protocol::messages::delete_topics_request::DeleteTopicState;
use crate::protocol::messages::leave_group_request::MemberIdentity;
use crate::protocol::messages::{
    CreatePartitionsRequest, CreateTopicsRequest, DeleteTopicsRequest, DescribeGroupsRequest,
    DescribeGroupsResponse, LeaveGroupRequest, LeaveGroupResponse, ListGroupsRequest, MetadataResponse,
};
use crate::protocol::{ApiKey, KafkaStr, Request};
use crate::KafkaCode;
use bytes::Bytes;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// Ceiling for the pause between metadata polls while waiting for topics to settle.
const MAX_POLL_BACKOFF: Duration = Duration::from_secs(1);
/// What brokers log as the reason for an admin removal (LeaveGroup v5+, KIP-800); the same
/// text as the Java admin client, so operators recognise it.
const REMOVE_REASON: &str = "member was removed by an admin";

/// A topic to create with [`Admin::create_topics`] (one `CreatableTopic` of CreateTopics).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTopic {
    /// Topic name.
    pub name: String,
    /// Number of partitions; -1 for the broker's `num.partitions` (CreateTopics v4+).
    pub partitions: i32,
    /// Replication factor; -1 for the broker's `default.replication.factor` (CreateTopics v4+).
    pub replication_factor: i16,
    /// Topic configuration overrides, e.g. `("retention.ms", "60000")`.
    pub configs: Vec<(String, String)>,
}

impl NewTopic {
    /// A topic with `partitions` partitions of `replication_factor` replicas and no config
    /// overrides.
    pub fn new(name: impl Into<String>, partitions: i32, replication_factor: i16) -> Self {
        NewTopic {
            name: name.into(),
            partitions,
            replication_factor,
            configs: Vec::new(),
        }
    }

    /// Adds a topic configuration override (e.g. `cleanup.policy`).
    pub fn config(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.configs.push((name.into(), value.into()));
        self
    }
}

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
    /// during a rebalance, for other protocol types, or if the bytes do not parse).
    pub decoded_assignment: Option<Assignment>,
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
}

/// Which offset [`Admin::list_offsets`] asks each partition's leader for (ListOffsets).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetSpec {
    /// The log start offset: the first offset still in the log.
    Earliest,
    /// The log end offset (high watermark): the offset the next record will get.
    Latest,
    /// The first offset whose record timestamp is at or after this many milliseconds since
    /// the epoch; -1 when there is none (on brokers with ListOffsets v1+, Kafka 0.10.1+).
    Timestamp(i64),
}

impl OffsetSpec {
    /// The `timestamp` field of ListOffsets: -2 earliest, -1 latest, else the time.
    fn timestamp(self) -> i64 {
        match self {
            OffsetSpec::Earliest => -2,
            OffsetSpec::Latest => -1,
            OffsetSpec::Timestamp(t) => t,
        }
    }
}

/// How far a group is behind on one partition, from [`Admin::group_lag`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionLag {
    /// The partition.
    pub tp: TopicPartition,
    /// The group's committed offset; `None` for an assigned partition with no commit yet.
    pub committed: Option<i64>,
    /// The partition's log end offset (high watermark).
    pub log_end: i64,
    /// `log_end - committed`, or `None` without a committed offset. Not clamped: a commit
    /// beyond the log end (after a truncation) shows as a negative lag.
    pub lag: Option<i64>,
}

/// Cluster administration over a [`Client`]: topics and consumer groups.
///
/// Cheap to clone; it shares the client's connections and metadata cache.
///
/// ```no_run
/// use kafka_group::{Admin, Client, NewTopic};
/// use std::time::Duration;
///
/// # fn main() -> kafka_group::Result<()> {
/// let client = Client::builder().bootstrap_servers("localhost:9092").build()?;
/// let admin = Admin::new(&client);
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

impl Admin {
    /// An admin handle using (a clone of) `client`.
    pub fn new(client: &Client) -> Self {
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

    /// Creates `topics` (CreateTopics), then waits until every broker's metadata (Metadata)
    /// shows each of them with all partitions led, so that producers and consumers started
    /// right after see a settled topic. Everything, including the wait, is bounded by
    /// `timeout`.
    ///
    /// A topic that already exists is an error (`TOPIC_ALREADY_EXISTS`); see
    /// [`Admin::create_topics_if_missing`]. Errors name the first topic that failed.
    pub fn create_topics(&self, topics: &[NewTopic], timeout: Duration) -> Result<()> {
        self.create(topics, timeout, false)
    }

    /// As [`Admin::create_topics`] (CreateTopics), but a topic that already exists counts as
    /// created (its partition count is not checked); the call still waits for its leaders.
    pub fn create_topics_if_missing(&self, topics: &[NewTopic], timeout: Duration) -> Result<()> {
        self.create(topics, timeout, true)
    }

    fn create(&self, topics: &[NewTopic], timeout: Duration, tolerate_existing: bool) -> Result<()> {
        if topics.is_empty() {
            return Ok(());
        }
        for t in topics {
            crate::names::check_topic("NewTopic::name", &t.name)?;
        }
        let deadline = crate::deadline::after(timeout);
        let names: Vec<&str> = topics.iter().map(|t| t.name.as_str()).collect();
        let accept = |code: KafkaCode| tolerate_existing && code == KafkaCode::TopicAlreadyExists;
        self.per_topic_to_controller(
            ApiKey::CreateTopics,
            &names,
            deadline,
            accept,
            |pending, timeout_ms| {
                let batch: Vec<&NewTopic> = topics
                    .iter()
                    .filter(|t| pending.contains(&t.name.as_str()))
                    .collect();
                let resp =
                    self.send_to_controller(deadline, |_| create_topics_request(&batch, timeout_ms))?;
                Ok(resp
                    .topics
                    .into_iter()
                    .map(|t| (Some(t.name), t.error_code, t.error_message))
                    .collect())
            },
        )?;
        self.wait_for_metadata(
            &names,
            deadline,
            "waiting for the new topics' partition leaders",
            |resp| topics.iter().all(|t| topic_ready(resp, &t.name, t.partitions)),
        )
    }

    /// Grows each `(topic, total)` to `total` partitions (CreatePartitions), then waits until
    /// every broker's metadata shows them all led. Bounded by `timeout`. A total at or below the
    /// current count is an error (`INVALID_PARTITIONS`): Kafka cannot shrink a topic.
    pub fn create_partitions(&self, topics: &[(&str, i32)], timeout: Duration) -> Result<()> {
        if topics.is_empty() {
            return Ok(());
        }
        let deadline = crate::deadline::after(timeout);
        let names: Vec<&str> = topics.iter().map(|t| t.0).collect();
        self.per_topic_to_controller(
            ApiKey::CreatePartitions,
            &names,
            deadline,
            |_| false,
            |pending, timeout_ms| {
                let batch: Vec<(&str, i32)> = topics
                    .iter()
                    .copied()
                    .filter(|(n, _)| pending.contains(n))
                    .collect();
                let resp =
                    self.send_to_controller(deadline, |_| create_partitions_request(&batch, timeout_ms))?;
                Ok(resp
                    .results
                    .into_iter()
                    .map(|r| (Some(r.name), r.error_code, r.error_message))
                    .collect())
            },
        )?;
        self.wait_for_metadata(
            &names,
            deadline,
            "waiting for the new partitions' leaders",
            |resp| {
                topics
                    .iter()
                    .all(|&(name, partitions)| topic_ready(resp, name, partitions))
            },
        )
    }

    /// Deletes `topics` (DeleteTopics), then waits until no broker's metadata (Metadata) shows
    /// them any more. Everything, including the wait, is bounded by `timeout`. A topic that
    /// does not exist is an error (`UNKNOWN_TOPIC_OR_PARTITION`).
    pub fn delete_topics(&self, topics: &[&str], timeout: Duration) -> Result<()> {
        if topics.is_empty() {
            return Ok(());
        }
        let deadline = crate::deadline::after(timeout);
        self.per_topic_to_controller(
            ApiKey::DeleteTopics,
            topics,
            deadline,
            |_| false,
            |pending, timeout_ms| {
                let resp =
                    self.send_to_controller(deadline, |v| delete_topics_request(pending, timeout_ms, v))?;
                Ok(resp
                    .responses
                    .into_iter()
                    .map(|t| (t.name, t.error_code, t.error_message))
                    .collect())
            },
        )?;
        self.wait_for_metadata(topics, deadline, "waiting for the topics to disappear", |resp| {
            topics.iter().all(|name| topic_gone(resp, name))
        })
    }

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
                groups.insert(
                    g.group_id.clone(),
                    ListedGroup {
                        group_id: g.group_id.into(),
                        protocol_type: g.protocol_type.into(),
                        state: state.map(Into::into),
                    },
                );
            }
        }
        Ok(groups.into_values().collect())
    }

    /// Describes `group` (DescribeGroups to its coordinator, found with FindCoordinator). A
    /// group the coordinator does not know comes back in state `Dead` with no members.
    pub fn describe_group(&self, group: &str) -> Result<GroupDescription> {
        self.with_coordinator(group, |coordinator, deadline| {
            let mut version = 0;
            let resp = self.client.send_to_by(coordinator.id, deadline, |v| {
                version = v;
                describe_groups_request(group)
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
            let resp = self.client.send_to_by(coordinator.id, deadline, |_| {
                leave_group_request(group, instance_ids)
            })?;
            member_outcomes(group, instance_ids, resp)
        })
    }

    /// The offset `spec` names for each of `partitions` (ListOffsets to each partition's
    /// leader, read_uncommitted, built per negotiated version: v0 asks for one offset with
    /// `max_num_offsets`). Leader changes and partitions not yet led are retried until
    /// `default.api.timeout.ms`; a topic the cluster does not know fails at once with
    /// `UNKNOWN_TOPIC_OR_PARTITION`.
    pub fn list_offsets(
        &self,
        partitions: &[TopicPartition],
        spec: OffsetSpec,
    ) -> Result<BTreeMap<TopicPartition, i64>> {
        let deadline = crate::deadline::after(self.api_timeout);
        let mut left: BTreeSet<TopicPartition> = partitions.iter().cloned().collect();
        let mut found = BTreeMap::new();
        let topics: BTreeSet<&str> = partitions.iter().map(|tp| tp.topic.as_str()).collect();
        let topics: Vec<&str> = topics.into_iter().collect();
        while !left.is_empty() {
            // The round handles unreachable leaders itself; an unreachable error here is the
            // metadata refresh's.
            let problem = match self.list_offsets_round(&topics, &mut left, &mut found, spec, deadline) {
                Ok(problem) => problem,
                Err(e) if e.is_unreachable() => Some(format!("metadata: {e}")),
                Err(e) => return Err(e),
            };
            if left.is_empty() {
                break;
            }
            let left_time = time_left(
                deadline,
                || {
                    format!(
                        "ListOffsets for {} partitions ({})",
                        left.len(),
                        problem.as_deref().unwrap_or("no answer")
                    )
                },
                None,
            )?;
            log::debug!("ListOffsets: {problem:?}; retrying");
            std::thread::sleep(self.client.retry_backoff().min(left_time));
        }
        Ok(found)
    }

    /// One ListOffsets to each leader of the partitions still `left`, moving those answered to
    /// `found`. Returns what held a partition back (no leader, an unreachable leader, a
    /// retriable code), if anything.
    fn list_offsets_round(
        &self,
        topics: &[&str],
        left: &mut BTreeSet<TopicPartition>,
        found: &mut BTreeMap<TopicPartition, i64>,
        spec: OffsetSpec,
        deadline: Instant,
    ) -> Result<Option<String>> {
        let meta = self.client.refresh_metadata_by(Some(topics), deadline)?;
        let (by_leader, unled) = by_leader(&meta, left, spec.timestamp())?;
        let mut problem = unled.map(|tp| format!("{tp}: no leader"));
        for (leader, targets) in by_leader {
            let answers = match self.list_offsets_at(leader, &targets, spec, deadline) {
                Ok(answers) => answers,
                Err(e) if e.is_unreachable() => {
                    problem = Some(format!("broker {leader}: {e}"));
                    continue;
                }
                Err(e) => return Err(e),
            };
            for (tp, answer) in answers {
                match answer {
                    Ok(offset) if left.remove(&tp) => {
                        found.insert(tp, offset);
                    }
                    Ok(_) => {}
                    // Leader moves, a topic the leader does not know yet, OFFSET_NOT_AVAILABLE
                    // during a leader election: all retriable in Kafka's table.
                    Err(code) if code.is_retriable() => problem = Some(format!("{tp}: {code}")),
                    Err(code) => {
                        let scope = Scope::topic(&tp.topic);
                        return Err(kafka_error(
                            ApiKey::ListOffsets,
                            code,
                            scope,
                            &tp.to_string(),
                            None,
                        ));
                    }
                }
            }
        }
        Ok(problem)
    }

    /// One ListOffsets to `leader`: per partition the offset or the error code.
    fn list_offsets_at(
        &self,
        leader: i32,
        targets: &BTreeMap<TopicPartition, (i64, i32)>,
        spec: OffsetSpec,
        deadline: Instant,
    ) -> Result<BTreeMap<TopicPartition, Result<i64, KafkaCode>>> {
        let mut version = 0;
        let resp = self.client.send_to_by(leader, deadline, |v| {
            version = v;
            offsets::list_offsets_request(v, 0, targets)
        })?;
        let mut answers = offsets::list_offsets_result(version, &resp);
        if matches!(spec, OffsetSpec::Timestamp(_)) {
            // A partition answered without error but without an offset has no record at or
            // after the time: that is the answer (-1, as Kafka's admin client gives), not a
            // condition to wait out.
            for t in &resp.topics {
                for p in &t.partitions {
                    if p.error_code == 0 {
                        let tp = TopicPartition::new(t.name.clone(), p.partition_index);
                        if let Some(a @ Err(KafkaCode::OffsetNotAvailable)) = answers.get_mut(&tp) {
                            *a = Ok(-1);
                        }
                    }
                }
            }
        }
        Ok(answers)
    }

    /// The offsets `group` has committed, for every partition it has committed one for
    /// (OffsetFetch to the coordinator; v2+ asks for all topics at once). Coordinators before
    /// OffsetFetch v2 (Kafka 0.10.2) need the topics named: they are taken from the members'
    /// current assignments (DescribeGroups), so there an empty group answers nothing.
    pub fn group_offsets(&self, group: &str) -> Result<BTreeMap<TopicPartition, i64>> {
        // Filled only if the coordinator turns out to be that old.
        let mut assigned: Option<Vec<TopicPartition>> = None;
        self.with_coordinator(group, |coordinator, deadline| {
            let version = self
                .client
                .connection_config()
                .pick_version(ApiKey::OffsetFetch, &self.client.broker_versions(coordinator.id)?)?;
            let named = if version < 2 {
                if assigned.is_none() {
                    assigned = Some(self.assigned_partitions(group)?);
                }
                assigned.clone()
            } else {
                None
            };
            let resp = self.client.send_to_by(coordinator.id, deadline, |v| {
                group_offsets_request(v, group, named.as_deref())
            })?;
            let committed = offsets::offset_fetch_result(&resp).map_err(|f| {
                let scope = Scope {
                    topic: f.topic.as_deref(),
                    group: Some(group),
                };
                kafka_error(
                    ApiKey::OffsetFetch,
                    f.code,
                    scope,
                    &format!("group {group}"),
                    None,
                )
            })?;
            Ok(committed
                .into_iter()
                .filter_map(|(tp, c)| c.map(|(offset, _)| (tp, offset)))
                .collect())
        })
    }

    /// Every partition of `group`'s members' current assignments (DescribeGroups), all
    /// partitions of each assigned topic, as an OffsetFetch before v2 needs them named.
    fn assigned_partitions(&self, group: &str) -> Result<Vec<TopicPartition>> {
        let d = self.describe_group(group)?;
        let topics: BTreeSet<String> = d
            .members
            .iter()
            .filter_map(|m| m.decoded_assignment.as_ref())
            .flat_map(|a| a.partitions.keys().cloned())
            .collect();
        if topics.is_empty() {
            return Ok(Vec::new());
        }
        let names: Vec<&str> = topics.iter().map(String::as_str).collect();
        let meta = self.client.refresh_metadata(Some(&names))?;
        Ok(names
            .iter()
            .filter_map(|t| meta.topics.get(*t))
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(|p| TopicPartition::new(t.name.clone(), p.partition))
            })
            .collect())
    }

    /// How far `group` is behind: for every partition it has committed an offset for or a
    /// member is assigned, the committed offset, the log end offset and their difference,
    /// sorted by partition (OffsetFetch, DescribeGroups and ListOffsets, as
    /// `kafka-consumer-groups --describe` shows it).
    pub fn group_lag(&self, group: &str) -> Result<Vec<PartitionLag>> {
        self.describe_group_lag(group).map(|(_, lag)| lag)
    }

    /// [`describe_group`](Self::describe_group) and [`group_lag`](Self::group_lag) together,
    /// with one DescribeGroups instead of two: what `kafka-group describe` shows.
    pub fn describe_group_lag(&self, group: &str) -> Result<(GroupDescription, Vec<PartitionLag>)> {
        let committed = self.group_offsets(group)?;
        let description = self.describe_group(group)?;
        let mut partitions: BTreeSet<TopicPartition> = committed.keys().cloned().collect();
        for m in &description.members {
            partitions.extend(m.decoded_assignment.iter().flat_map(Assignment::topic_partitions));
        }
        let partitions: Vec<TopicPartition> = partitions.into_iter().collect();
        let log_end = self.list_offsets(&partitions, OffsetSpec::Latest)?;
        Ok((description, lag_of(&committed, &log_end)))
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
    /// per topic. Codes for which `accept` holds count as success.
    fn per_topic_to_controller(
        &self,
        api: ApiKey,
        names: &[&str],
        deadline: Instant,
        accept: impl Fn(KafkaCode) -> bool,
        mut send: impl FnMut(&[&str], i32) -> Result<Vec<TopicOutcome>>,
    ) -> Result<()> {
        let mut pending: Vec<&str> = names.to_vec();
        while !pending.is_empty() {
            let outcomes = send(&pending, self.broker_timeout_ms(deadline))?;
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
            if !retry.is_empty() {
                let left = time_left(
                    deadline,
                    || format!("{}({}): the controller kept moving", api.name(), retry.join(",")),
                    None,
                )?;
                log::debug!("{}: NOT_CONTROLLER for {retry:?}; resending", api.name());
                std::thread::sleep(self.client.retry_backoff().min(left));
            }
            pending = retry;
        }
        Ok(())
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
        let mut backoff = self.client.retry_backoff().min(MAX_POLL_BACKOFF);
        loop {
            let last_error = match self.every_broker_shows(topics, &ready, deadline) {
                Ok(true) => break,
                Ok(false) => None,
                Err(e) if e.is_unreachable() => Some(e),
                Err(e) => return Err(e),
            };
            let left = time_left(
                deadline,
                || {
                    let mut addr = format!("{what} ({})", topics.join(","));
                    if let Some(e) = last_error {
                        addr.push_str(&format!("; last error: {e}"));
                    }
                    addr
                },
                None,
            )?;
            std::thread::sleep(backoff.min(left));
            backoff = backoff.saturating_mul(2).min(MAX_POLL_BACKOFF);
        }
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

/// CreateTopics: every field the client sets exists in every version (v0+).
fn create_topics_request(topics: &[&NewTopic], timeout_ms: i32) -> CreateTopicsRequest {
    CreateTopicsRequest {
        topics: topics
            .iter()
            .map(|t| CreatableTopic {
                name: t.name.clone().into(),
                num_partitions: t.partitions,
                replication_factor: t.replication_factor,
                configs: t
                    .configs
                    .iter()
                    .map(|(name, value)| CreatableTopicConfig {
                        name: name.clone().into(),
                        value: Some(value.into()),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            })
            .collect(),
        timeout_ms,
        ..Default::default()
    }
}

fn create_partitions_request(topics: &[(&str, i32)], timeout_ms: i32) -> CreatePartitionsRequest {
    CreatePartitionsRequest {
        topics: topics
            .iter()
            .map(|&(name, count)| CreatePartitionsTopic {
                name: name.to_string().into(),
                count,
                // Null: let the controller place the new replicas.
                assignments: None,
                ..Default::default()
            })
            .collect(),
        timeout_ms,
        ..Default::default()
    }
}

/// DeleteTopics: names as plain strings up to v5; v6 (KIP-516) lists `{name, topic id}`
/// pairs, where a nil id means "by name".
fn delete_topics_request(names: &[&str], timeout_ms: i32, version: i16) -> DeleteTopicsRequest {
    if version >= 6 {
        DeleteTopicsRequest {
            topics: names
                .iter()
                .map(|n| DeleteTopicState {
                    name: Some((*n).into()),
                    ..Default::default()
                })
                .collect(),
            timeout_ms,
            ..Default::default()
        }
    } else {
        DeleteTopicsRequest {
            topic_names: names.iter().map(|n| (*n).into()).collect(),
            timeout_ms,
            ..Default::default()
        }
    }
}

/// DescribeGroups for one group, without authorized operations (v3+ would compute them for
/// nothing).
pub(crate) fn describe_groups_request(group: &str) -> DescribeGroupsRequest {
    DescribeGroupsRequest {
        groups: vec![group.into()],
        ..Default::default()
    }
}

/// LeaveGroup naming members by instance id. Only v3+ has the `members` list; below it the
/// request cannot express this, and the codec refuses to encode it rather than send a
/// request without the members.
fn leave_group_request(group: &str, instance_ids: &[&str]) -> LeaveGroupRequest {
    LeaveGroupRequest {
        group_id: group.to_string().into(),
        members: instance_ids
            .iter()
            .map(|id| MemberIdentity {
                // An empty member id with an instance id means "whichever member holds it".
                member_id: String::new().into(),
                group_instance_id: Some((*id).into()),
                // Ignorable: v3 and v4 drop it.
                reason: Some(KafkaStr::from_static(REMOVE_REASON)),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
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

/// Groups the partitions in `left` by leader with the ListOffsets target (timestamp, no leader
/// epoch: an admin query has no position for a stale leader to corrupt). Returns a partition
/// without a leader yet, if any, for the retry message; a topic the metadata does not know is
/// an error.
#[allow(clippy::type_complexity)]
fn by_leader(
    meta: &Metadata,
    left: &BTreeSet<TopicPartition>,
    timestamp: i64,
) -> Result<(
    BTreeMap<i32, BTreeMap<TopicPartition, (i64, i32)>>,
    Option<TopicPartition>,
)> {
    let mut out: BTreeMap<i32, BTreeMap<TopicPartition, (i64, i32)>> = BTreeMap::new();
    let mut unled = None;
    for tp in left {
        let topic = meta.topics.get(&tp.topic);
        if let Some(t) = topic.filter(|t| t.error == KafkaCode::UnknownTopicOrPartition) {
            return Err(kafka_error(
                ApiKey::ListOffsets,
                t.error,
                Scope::topic(&tp.topic),
                &format!("topic {}", tp.topic),
                None,
            ));
        }
        // Denied topics have no partitions: without this the call would wait for leaders
        // until its timeout.
        if let Some(e) = topic_denied(meta, &tp.topic) {
            return Err(e);
        }
        let leader = topic
            .and_then(|t| t.partitions.iter().find(|p| p.partition == tp.partition))
            .map(|p| p.leader)
            .filter(|&l| l >= 0);
        match leader {
            Some(l) => {
                out.entry(l).or_default().insert(tp.clone(), (timestamp, -1));
            }
            None => unled = Some(tp.clone()),
        }
    }
    Ok((out, unled))
}

/// OffsetFetch for everything `group` committed: the consumer's request with the topic list
/// null (v2+: all topics), or naming `partitions` for coordinators before v2.
fn group_offsets_request(
    version: i16,
    group: &str,
    partitions: Option<&[TopicPartition]>,
) -> crate::protocol::messages::OffsetFetchRequest {
    let mut req = offsets::offset_fetch_request(version, group, partitions.unwrap_or(&[]), false);
    if partitions.is_none() {
        match req.groups.first_mut() {
            Some(g) => g.topics = None,
            None => req.topics = None,
        }
    }
    req
}

/// Joins committed offsets with log end offsets; partitions without a log end are left out.
fn lag_of(
    committed: &BTreeMap<TopicPartition, i64>,
    log_end: &BTreeMap<TopicPartition, i64>,
) -> Vec<PartitionLag> {
    log_end
        .iter()
        .map(|(tp, &end)| {
            let c = committed.get(tp).copied();
            PartitionLag {
                tp: tp.clone(),
                committed: c,
                log_end: end,
                lag: c.map(|c| end - c),
            }
        })
        .collect()
}

/// Whether `resp` shows `name` with all partitions led (and `partitions` of them, if positive).
fn topic_ready(resp: &MetadataResponse, name: &str, partitions: i32) -> bool {
    let Some(t) = resp.topics.iter().find(|t| t.name.as_deref() == Some(name)) else {
        return false;
    };
    KafkaCode::from_code(t.error_code) == KafkaCode::None
        && !t.partitions.is_empty()
        && (partitions <= 0 || t.partitions.len() == partitions as usize)
        && t.partitions.iter().all(|p| p.leader_id >= 0)
}

/// Whether `resp` no longer knows `name`.
fn topic_gone(resp: &MetadataResponse, name: &str) -> bool {
    match resp.topics.iter().find(|t| t.name.as_deref() == Some(name)) {
        None => true,
        Some(t) => KafkaCode::from_code(t.error_code) == KafkaCode::UnknownTopicOrPartition,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::messages::consumer_protocol_assignment;
    use crate::protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
    use crate::protocol::messages::leave_group_response::MemberResponse;
    use crate::protocol::messages::metadata_response::{MetadataResponsePartition, MetadataResponseTopic};
    use crate::protocol::messages::ConsumerProtocolAssignment;
    use crate::protocol::EncodeError;
    use crate::protocol::Message;

    fn versions(api: ApiKey) -> std::ops::RangeInclusive<i16> {
        api.versions().min..=api.versions().max
    }

    #[test]
    fn bad_topic_names_are_refused_before_any_request() {
        let client = Client::builder()
            .bootstrap_servers("localhost:1")
            .build()
            .unwrap();
        let admin = Admin::new(&client);
        for name in ["bad topic!", ".", &"t".repeat(250)] {
            let e = admin
                .create_topics(
                    &[NewTopic::new("ok", 1, 1), NewTopic::new(name, 1, 1)],
                    Duration::MAX,
                )
                .unwrap_err();
            assert!(
                matches!(
                    e,
                    Error::Config {
                        property: "NewTopic::name",
                        ..
                    }
                ),
                "{e}"
            );
        }
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
        for v in versions(ApiKey::DescribeGroups) {
            describe_groups_request("g").to_bytes(v).unwrap();
        }
        for v in 3..=ApiKey::LeaveGroup.versions().max {
            leave_group_request("g", &["i-1", "i-2"]).to_bytes(v).unwrap();
        }
    }

    #[test]
    fn leave_group_by_instance_id_refuses_versions_without_members() {
        for v in 0..3 {
            let e = leave_group_request("g", &["i-1"]).to_bytes(v).unwrap_err();
            assert!(
                matches!(e, EncodeError::UnsupportedField { field: "members", .. }),
                "v{v}: {e}"
            );
        }
    }

    #[test]
    fn delete_topics_puts_names_where_the_version_has_them() {
        let old = delete_topics_request(&["a"], 5, 5);
        assert_eq!(old.topic_names, vec!["a".to_string()]);
        assert!(old.topics.is_empty());
        let new = delete_topics_request(&["a"], 5, 6);
        assert!(new.topic_names.is_empty());
        assert_eq!(new.topics[0].name.as_deref(), Some("a"));
        assert_eq!(new.topics[0].topic_id, crate::protocol::Uuid::NIL);
    }

    #[test]
    fn create_topics_carries_partitions_and_configs() {
        let topic = NewTopic::new("t", 6, 3).config("cleanup.policy", "compact");
        let r = create_topics_request(&[&topic], 42);
        assert_eq!(r.timeout_ms, 42);
        assert_eq!(
            (r.topics[0].num_partitions, r.topics[0].replication_factor),
            (6, 3)
        );
        assert_eq!(r.topics[0].configs[0].name, "cleanup.policy");
        assert_eq!(r.topics[0].configs[0].value.as_deref(), Some("compact"));
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

    #[test]
    fn topic_readiness_needs_every_partition_led() {
        let topic = |name: &str, code: KafkaCode, leaders: &[i32]| MetadataResponseTopic {
            name: Some(name.into()),
            error_code: code.code(),
            partitions: leaders
                .iter()
                .enumerate()
                .map(|(i, &l)| MetadataResponsePartition {
                    partition_index: i as i32,
                    leader_id: l,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        };
        let resp = |t: MetadataResponseTopic| MetadataResponse {
            topics: vec![t],
            ..Default::default()
        };
        assert!(topic_ready(&resp(topic("t", KafkaCode::None, &[1, 2])), "t", 2));
        assert!(topic_ready(&resp(topic("t", KafkaCode::None, &[1, 2])), "t", -1));
        assert!(!topic_ready(&resp(topic("t", KafkaCode::None, &[1, -1])), "t", 2));
        assert!(!topic_ready(&resp(topic("t", KafkaCode::None, &[1])), "t", 2));
        assert!(!topic_ready(
            &resp(topic("t", KafkaCode::LeaderNotAvailable, &[])),
            "t",
            -1
        ));
        assert!(!topic_ready(&resp(topic("u", KafkaCode::None, &[1])), "t", 1));
        assert!(topic_gone(
            &resp(topic("t", KafkaCode::UnknownTopicOrPartition, &[])),
            "t"
        ));
        assert!(topic_gone(&resp(topic("u", KafkaCode::None, &[1])), "t"));
        assert!(!topic_gone(&resp(topic("t", KafkaCode::None, &[1])), "t"));
    }

    #[test]
    fn offset_specs_map_to_list_offsets_timestamps() {
        assert_eq!(OffsetSpec::Earliest.timestamp(), -2);
        assert_eq!(OffsetSpec::Latest.timestamp(), -1);
        assert_eq!(
            OffsetSpec::Timestamp(1_700_000_000_000).timestamp(),
            1_700_000_000_000
        );
    }

    #[test]
    fn group_offsets_asks_for_all_topics_from_v2_and_names_them_below() {
        use crate::protocol::messages::OffsetFetchRequest;
        let named = [TopicPartition::new("t", 1), TopicPartition::new("t", 0)];
        for v in versions(ApiKey::OffsetFetch) {
            let back =
                |r: OffsetFetchRequest| OffsetFetchRequest::from_bytes(r.to_bytes(v).unwrap(), v).unwrap();
            if v >= 2 {
                let all = back(group_offsets_request(v, "g", None));
                if v >= 8 {
                    assert_eq!(all.groups[0].group_id, "g");
                    assert_eq!(all.groups[0].topics, None, "v{v}");
                } else {
                    assert_eq!(all.group_id, "g");
                    assert_eq!(all.topics, None, "v{v}");
                }
                assert!(!all.require_stable);
            } else {
                // Null means "all" only from v2; below it the request cannot say so.
                assert!(group_offsets_request(v, "g", None).to_bytes(v).is_err(), "v{v}");
            }
            let some = back(group_offsets_request(v, "g", Some(&named)));
            let parts = if v >= 8 {
                some.groups[0].topics.as_ref().unwrap()[0]
                    .partition_indexes
                    .clone()
            } else {
                some.topics.as_ref().unwrap()[0].partition_indexes.clone()
            };
            assert_eq!(parts, vec![0, 1], "v{v}");
        }
    }

    #[test]
    fn lag_is_log_end_minus_committed() {
        let tp = |p| TopicPartition::new("t", p);
        let committed: BTreeMap<_, _> = [(tp(0), 5), (tp(1), 12)].into_iter().collect();
        let log_end: BTreeMap<_, _> = [(tp(0), 9), (tp(1), 10), (tp(2), 3)].into_iter().collect();
        let lag = lag_of(&committed, &log_end);
        assert_eq!(
            lag,
            vec![
                PartitionLag {
                    tp: tp(0),
                    committed: Some(5),
                    log_end: 9,
                    lag: Some(4)
                },
                PartitionLag {
                    tp: tp(1),
                    committed: Some(12),
                    log_end: 10,
                    lag: Some(-2)
                },
                PartitionLag {
                    tp: tp(2),
                    committed: None,
                    log_end: 3,
                    lag: None
                },
            ]
        );
    }

    #[test]
    fn list_offsets_targets_go_to_each_leader() {
        use crate::client::{PartitionMetadata, TopicMetadata};
        let partition = |p, leader| PartitionMetadata {
            partition: p,
            leader,
            leader_epoch: 3,
            replicas: [].into(),
            isr: [].into(),
            error: KafkaCode::None,
        };
        let topic = |name: &str, error, partitions| {
            std::sync::Arc::new(TopicMetadata {
                name: name.into(),
                id: crate::protocol::Uuid::NIL,
                error,
                internal: false,
                partitions,
            })
        };
        let mut meta = Metadata::default();
        meta.topics.insert(
            "t".into(),
            topic(
                "t",
                KafkaCode::None,
                vec![partition(0, 1), partition(1, 2), partition(2, -1)],
            ),
        );
        meta.topics.insert(
            "gone".into(),
            topic("gone", KafkaCode::UnknownTopicOrPartition, vec![]),
        );
        let tp = |t: &str, p| TopicPartition::new(t, p);
        let left: BTreeSet<_> = [tp("t", 0), tp("t", 1), tp("t", 2)].into_iter().collect();
        let (by, unled) = by_leader(&meta, &left, -1).unwrap();
        assert_eq!(by[&1][&tp("t", 0)], (-1, -1));
        assert_eq!(by[&2][&tp("t", 1)], (-1, -1));
        assert_eq!(unled, Some(tp("t", 2)));
        let left: BTreeSet<_> = [tp("gone", 0)].into_iter().collect();
        let e = by_leader(&meta, &left, -2).unwrap_err();
        assert_eq!(e.kafka_code(), Some(KafkaCode::UnknownTopicOrPartition));
        assert!(e.to_string().contains("topic gone"), "{e}");
        // A denied topic has no partitions: an error at once, not a wait for leaders.
        meta.topics.insert(
            "denied".into(),
            topic("denied", KafkaCode::TopicAuthorizationFailed, vec![]),
        );
        let left: BTreeSet<_> = [tp("t", 0), tp("denied", 0)].into_iter().collect();
        let e = by_leader(&meta, &left, -1).unwrap_err();
        assert!(
            matches!(&e, Error::Authorization { api: ApiKey::Metadata, resource: crate::Resource::Topic(t), .. } if t == "denied"),
            "{e:?}"
        );
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
