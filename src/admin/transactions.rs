//! Transactions: list them (ListTransactions, KIP-664), describe them at their coordinator
//! (FindCoordinator for transactional ids, DescribeTransactions), describe the producers a
//! partition holds state for (DescribeProducers), and find hanging transactions the way
//! `kafka-transactions.sh find-hanging` does.
//!
//! The requests and the reading of their answers, and the hanging-transaction decision, are
//! pure functions below, unit-tested without a broker; the `Admin` methods only send them.

use super::{kafka_error, Admin};
use crate::authorization::Scope;
use crate::error::{Error, Result};
use crate::group::TopicPartition;
use crate::net::versions::{self, Capability};
use crate::protocol::messages::describe_producers_request::TopicRequest;
use crate::protocol::messages::{
    DescribeProducersRequest, DescribeProducersResponse, DescribeTransactionsRequest,
    DescribeTransactionsResponse, ListTransactionsRequest, ListTransactionsResponse,
};
use crate::protocol::ApiKey;
use crate::retry::{retry, Backoff, Step};
use crate::KafkaCode;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// ListTransactions (KIP-664, Kafka 3.0+).
const LIST_TRANSACTIONS: Capability = Capability {
    name: "listing transactions (ListTransactions, KIP-664)",
    needs: &[(ApiKey::ListTransactions, 0)],
};

/// The "running longer than" filter of ListTransactions v1 (KIP-994, Kafka 3.8+).
const LIST_TRANSACTIONS_BY_DURATION: Capability = Capability {
    name: "listing transactions open longer than a duration (ListTransactions v1, KIP-994)",
    needs: &[(ApiKey::ListTransactions, 1)],
};

/// DescribeTransactions at the transaction coordinator, found by FindCoordinator with the
/// transaction key type (KIP-664, Kafka 3.0+).
const DESCRIBE_TRANSACTIONS: Capability = Capability {
    name: "describing transactions (DescribeTransactions, KIP-664)",
    needs: &[(ApiKey::DescribeTransactions, 0), (ApiKey::FindCoordinator, 1)],
};

/// DescribeProducers (KIP-664, Kafka 2.8+).
const DESCRIBE_PRODUCERS: Capability = Capability {
    name: "describing producers (DescribeProducers, KIP-664)",
    needs: &[(ApiKey::DescribeProducers, 0)],
};

/// At most this many partitions in one DescribeProducers, so that a search over a whole
/// broker does not send it one giant request (Kafka's tool batches the same way).
const MAX_PARTITIONS_PER_REQUEST: usize = 500;

/// `kafka-transactions.sh find-hanging`'s default for `--max-transaction-timeout`: the
/// broker's default `transaction.max.timeout.ms`, 15 minutes.
pub const DEFAULT_MAX_TRANSACTION_TIMEOUT: Duration = Duration::from_secs(15 * 60);

/// A transaction's state at its coordinator, by the names brokers use.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TransactionState {
    /// The transactional id has a producer id but no transaction is open.
    Empty,
    /// A transaction is open.
    Ongoing,
    /// The coordinator is writing commit markers.
    PrepareCommit,
    /// The coordinator is writing abort markers.
    PrepareAbort,
    /// The last transaction committed.
    CompleteCommit,
    /// The last transaction aborted.
    CompleteAbort,
    /// The transactional id expired and is being removed.
    Dead,
    /// The coordinator is fencing the producer (bumping its epoch) to abort its transaction.
    PrepareEpochFence,
    /// A state this client does not know (from a newer broker), as the broker named it.
    Unknown(String),
}

impl TransactionState {
    /// Every state this client knows, in the order above.
    pub const KNOWN: [TransactionState; 8] = [
        TransactionState::Empty,
        TransactionState::Ongoing,
        TransactionState::PrepareCommit,
        TransactionState::PrepareAbort,
        TransactionState::CompleteCommit,
        TransactionState::CompleteAbort,
        TransactionState::Dead,
        TransactionState::PrepareEpochFence,
    ];

    /// The state's name on the wire, e.g. `Ongoing`.
    pub fn name(&self) -> &str {
        match self {
            TransactionState::Empty => "Empty",
            TransactionState::Ongoing => "Ongoing",
            TransactionState::PrepareCommit => "PrepareCommit",
            TransactionState::PrepareAbort => "PrepareAbort",
            TransactionState::CompleteCommit => "CompleteCommit",
            TransactionState::CompleteAbort => "CompleteAbort",
            TransactionState::Dead => "Dead",
            TransactionState::PrepareEpochFence => "PrepareEpochFence",
            TransactionState::Unknown(s) => s,
        }
    }

    /// The state a broker names `name` (`Unknown` for any other name).
    pub fn from_name(name: &str) -> Self {
        Self::KNOWN
            .iter()
            .find(|s| s.name() == name)
            .cloned()
            .unwrap_or_else(|| TransactionState::Unknown(name.to_string()))
    }
}

impl fmt::Display for TransactionState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Which transactions [`Admin::list_transactions`] returns; the default lists them all. Each
/// filter that is set must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TransactionFilter {
    /// Only transactions in one of these states (all states when empty).
    pub states: Vec<TransactionState>,
    /// Only transactions of one of these producer ids (all when empty).
    pub producer_ids: Vec<i64>,
    /// Only transactions open longer than this (ListTransactions v1, Kafka 3.8+; an older
    /// broker fails the call with [`Error::MissingCapability`]).
    pub open_longer_than: Option<Duration>,
}

/// One transactional id as [`Admin::list_transactions`] reports it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct TransactionListing {
    /// `transactional.id`.
    pub transactional_id: String,
    /// Its current producer id.
    pub producer_id: i64,
    /// Its state.
    pub state: TransactionState,
    /// The broker that coordinates it (the one that listed it).
    pub coordinator: i32,
}

/// A transactional id's transaction as [`Admin::describe_transactions`] reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionDescription {
    /// `transactional.id`.
    pub transactional_id: String,
    /// The broker that coordinates it.
    pub coordinator: i32,
    /// Its state.
    pub state: TransactionState,
    /// Its current producer id.
    pub producer_id: i64,
    /// Its current producer epoch.
    pub producer_epoch: i16,
    /// `transaction.timeout.ms` the producer registered with.
    pub transaction_timeout: Duration,
    /// When the current transaction started, in milliseconds since the epoch; `None` when
    /// none is open.
    pub start_time_ms: Option<i64>,
    /// The partitions in the transaction: all of them while `Ongoing`; while preparing to
    /// commit or abort, those still without a marker; none once complete.
    pub partitions: Vec<TopicPartition>,
}

/// What a partition's leader (or replica) knows of one producer that wrote to it, from
/// [`Admin::describe_producers`] (DescribeProducers).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerDescription {
    /// The producer id.
    pub producer_id: i64,
    /// Its epoch.
    pub producer_epoch: i32,
    /// The last sequence number it wrote (-1 for none).
    pub last_sequence: i32,
    /// The timestamp of its last write, in milliseconds since the epoch (-1 for none).
    pub last_timestamp: i64,
    /// The epoch of the transaction coordinator that last wrote a marker for it (-1 for none).
    pub coordinator_epoch: i32,
    /// The first offset of its open transaction on this partition; `None` when it has none.
    pub current_transaction_start_offset: Option<i64>,
}

/// Where [`Admin::find_hanging_transactions`] looks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HangingSearch {
    /// Every partition with a replica on this broker, asked of that broker (a follower's
    /// producer state can hang too).
    Broker(i32),
    /// Every partition of this topic, asked of each partition's leader.
    Topic(String),
    /// One partition, asked of its leader.
    Partition(TopicPartition),
}

/// A transaction a partition holds open that its coordinator will never end, from
/// [`Admin::find_hanging_transactions`]. It keeps the partition's last stable offset (and
/// `read_committed` consumers) from moving past `producer.current_transaction_start_offset`
/// until it is aborted (`kafka-transactions.sh abort`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HangingTransaction {
    /// The partition holding the transaction open.
    pub partition: TopicPartition,
    /// The producer state the partition holds.
    pub producer: ProducerDescription,
    /// The transactional id the coordinator maps the producer id to, `None` when no
    /// coordinator knows the producer id.
    pub transactional_id: Option<String>,
}

impl Admin {
    /// Lists the transactions of every broker (ListTransactions to each, since each
    /// transaction coordinator knows only its own ids), merged and sorted by transactional id.
    /// A broker's error fails the call, naming the broker; a coordinator still loading is
    /// asked again until `default.api.timeout.ms`.
    ///
    /// Fails with [`Error::MissingCapability`] on brokers before Kafka 3.0, and, when
    /// `filter.open_longer_than` is set, before 3.8.
    pub fn list_transactions(&self, filter: &TransactionFilter) -> Result<Vec<TransactionListing>> {
        let deadline = crate::deadline::after(self.api_timeout);
        let meta = self.client.refresh_metadata_by(Some(&[]), deadline)?;
        let mut listed = Vec::new();
        for &id in meta.brokers.keys() {
            let broker_versions = self.client.broker_versions(id)?;
            versions::check(&LIST_TRANSACTIONS, &broker_versions)?;
            if filter.open_longer_than.is_some() {
                versions::check(&LIST_TRANSACTIONS_BY_DURATION, &broker_versions)?;
            }
            let resp = self.client.retry_coordinator_errors(
                deadline,
                &format!("ListTransactions on broker {id}"),
                || {
                    self.client
                        .send_to_by(id, deadline, |_| list_transactions_request(filter))
                },
            )?;
            listed.extend(listings(id, resp)?);
        }
        listed.sort();
        Ok(listed)
    }

    /// Describes the transaction of each of `transactional_ids` at its coordinator
    /// (FindCoordinator with the transaction key type, then DescribeTransactions). Each id
    /// gets its own outcome, in the order given: an id no coordinator knows is
    /// `TRANSACTIONAL_ID_NOT_FOUND` ([`Error::Kafka`] naming the id). A coordinator moving or
    /// loading is retried until `default.api.timeout.ms`.
    ///
    /// An id's outcome is [`Error::MissingCapability`] when its coordinator is before Kafka
    /// 3.0.
    pub fn describe_transactions(
        &self,
        transactional_ids: &[&str],
    ) -> Result<Vec<(String, Result<TransactionDescription>)>> {
        let deadline = crate::deadline::after(self.api_timeout);
        Ok(transactional_ids
            .iter()
            .map(|&id| (id.to_string(), self.describe_transaction(id, deadline)))
            .collect())
    }

    fn describe_transaction(&self, id: &str, deadline: Instant) -> Result<TransactionDescription> {
        let what = format!("DescribeTransactions({id})");
        self.client.retry_coordinator_errors(deadline, &what, || {
            // The lookup remembers the coordinator's address, which a client that has not
            // fetched the cluster's metadata yet (a fresh one, as the CLI's) would not know.
            let coordinator = self.client.lookup_transaction_coordinator_by(id, deadline)?.id;
            versions::check(&DESCRIBE_TRANSACTIONS, &self.client.broker_versions(coordinator)?)?;
            let resp = self
                .client
                .send_to_by(coordinator, deadline, |_| DescribeTransactionsRequest {
                    transactional_ids: vec![id.into()],
                    ..Default::default()
                })?;
            transaction_description(id, coordinator, resp)
        })
    }

    /// The producers each of `partitions` holds state for (DescribeProducers to each
    /// partition's leader), by partition. Leader moves are retried until
    /// `default.api.timeout.ms`; a topic the cluster does not know fails at once.
    ///
    /// Fails with [`Error::MissingCapability`] on brokers before Kafka 2.8.
    pub fn describe_producers(
        &self,
        partitions: &[TopicPartition],
    ) -> Result<BTreeMap<TopicPartition, Vec<ProducerDescription>>> {
        self.describe_producers_at(None, partitions)
    }

    /// Finds hanging transactions in `search`, as `kafka-transactions.sh find-hanging` does: a
    /// producer that holds a transaction open on a partition (DescribeProducers), whose last
    /// write there is older than `max_transaction_timeout` (no live transaction can be older
    /// than the broker's `transaction.max.timeout.ms`, default
    /// [`DEFAULT_MAX_TRANSACTION_TIMEOUT`]), and whose coordinator either does not know the
    /// producer id (ListTransactions on every broker) or does not count this partition in its
    /// transaction (DescribeTransactions).
    pub fn find_hanging_transactions(
        &self,
        search: &HangingSearch,
        max_transaction_timeout: Duration,
    ) -> Result<Vec<HangingTransaction>> {
        let (broker, partitions) = self.partitions_to_search(search)?;
        let producers = self.describe_producers_at(broker, &partitions)?;
        let candidates = open_too_long(&producers, now_ms(), max_transaction_timeout);
        if candidates.is_empty() {
            return Ok(Vec::new());
        }
        let filter = TransactionFilter {
            producer_ids: candidates
                .iter()
                .map(|(_, p)| p.producer_id)
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect(),
            ..Default::default()
        };
        let ids = transactional_ids(&filter.producer_ids, &self.list_transactions(&filter)?);
        let wanted: BTreeSet<&str> = ids.values().map(String::as_str).collect();
        let wanted: Vec<&str> = wanted.into_iter().collect();
        let mut descriptions = BTreeMap::new();
        for (id, outcome) in self.describe_transactions(&wanted)? {
            match outcome {
                Ok(d) => {
                    descriptions.insert(id, Some(d));
                }
                // Gone between the listing and now: the coordinator does not know it.
                Err(e) if e.kafka_code() == Some(KafkaCode::TransactionalIdNotFound) => {
                    descriptions.insert(id, None);
                }
                Err(e) => return Err(e),
            }
        }
        Ok(hanging(candidates, &ids, &descriptions))
    }

    /// The partitions `search` covers, and the broker to ask if not each leader.
    fn partitions_to_search(&self, search: &HangingSearch) -> Result<(Option<i32>, Vec<TopicPartition>)> {
        let deadline = crate::deadline::after(self.api_timeout);
        match search {
            HangingSearch::Partition(tp) => Ok((None, vec![tp.clone()])),
            HangingSearch::Topic(topic) => {
                crate::names::check_topic("find_hanging_transactions", topic)?;
                let meta = self
                    .client
                    .refresh_metadata_by(Some(&[topic.as_str()]), deadline)?;
                let t = meta.topics.get(topic.as_str()).filter(|t| !t.error.is_error());
                let Some(t) = t else {
                    return Err(unknown_topic(ApiKey::Metadata, topic));
                };
                let partitions = t
                    .partitions
                    .iter()
                    .map(|p| TopicPartition::new(topic.clone(), p.partition))
                    .collect();
                Ok((None, partitions))
            }
            HangingSearch::Broker(id) => {
                let meta = self.client.refresh_metadata_by(None, deadline)?;
                if !meta.brokers.contains_key(id) {
                    return Err(Error::UnknownBroker { id: *id });
                }
                let partitions = meta
                    .topics
                    .values()
                    .flat_map(|t| {
                        t.partitions
                            .iter()
                            .filter(|p| p.replicas.contains(id))
                            .map(|p| TopicPartition::new(t.name.clone(), p.partition))
                    })
                    .collect();
                Ok((Some(*id), partitions))
            }
        }
    }

    /// DescribeProducers for `partitions`, to `broker` if given, else to each leader, in
    /// batches; retriable per-partition errors and unreachable brokers are retried until
    /// `default.api.timeout.ms`.
    fn describe_producers_at(
        &self,
        broker: Option<i32>,
        partitions: &[TopicPartition],
    ) -> Result<BTreeMap<TopicPartition, Vec<ProducerDescription>>> {
        for tp in partitions {
            crate::names::check_topic("describe_producers", &tp.topic)?;
        }
        let mut found = BTreeMap::new();
        let mut left: BTreeSet<TopicPartition> = partitions.iter().cloned().collect();
        if left.is_empty() {
            return Ok(found);
        }
        let deadline = crate::deadline::after(self.api_timeout);
        let topics: BTreeSet<&str> = partitions.iter().map(|tp| tp.topic.as_str()).collect();
        let topics: Vec<&str> = topics.into_iter().collect();
        let backoff = Backoff::fixed(self.client.retry_backoff());
        let what = || format!("DescribeProducers for {} partitions", partitions.len());
        retry(deadline, backoff, what, || {
            let meta = match self.client.refresh_metadata_by(Some(&topics), deadline) {
                Ok(meta) => meta,
                Err(e) if e.is_unreachable() => return Ok(Step::Retry(e)),
                Err(e) => return Err(e),
            };
            let mut by_target: BTreeMap<i32, Vec<TopicPartition>> = BTreeMap::new();
            let mut problem = None;
            for tp in &left {
                let Some(t) = meta.topics.get(tp.topic.as_str()).filter(|t| !t.error.is_error()) else {
                    return Err(unknown_topic(ApiKey::DescribeProducers, &tp.topic));
                };
                let target = match broker {
                    Some(b) => Some(b),
                    None => t
                        .partitions
                        .iter()
                        .find(|p| p.partition == tp.partition)
                        .map(|p| p.leader)
                        .filter(|l| *l >= 0),
                };
                match target {
                    Some(b) => by_target.entry(b).or_default().push(tp.clone()),
                    None => {
                        problem = Some(Error::NoLeader {
                            partition: tp.clone(),
                        })
                    }
                }
            }
            for (target, tps) in by_target {
                versions::check(&DESCRIBE_PRODUCERS, &self.client.broker_versions(target)?)?;
                for batch in tps.chunks(MAX_PARTITIONS_PER_REQUEST) {
                    let resp = match self
                        .client
                        .send_to_by(target, deadline, |_| describe_producers_request(batch))
                    {
                        Ok(resp) => resp,
                        Err(e) if e.is_unreachable() => {
                            problem = Some(e);
                            continue;
                        }
                        Err(e) => return Err(e),
                    };
                    for (tp, answer) in producer_states(resp) {
                        if !left.contains(&tp) {
                            continue;
                        }
                        match answer {
                            Ok(producers) => {
                                left.remove(&tp);
                                found.insert(tp, producers);
                            }
                            Err((code, message)) => {
                                let e = kafka_error(
                                    ApiKey::DescribeProducers,
                                    code,
                                    Scope::topic(&tp.topic),
                                    &format!("{tp} on broker {target}"),
                                    message,
                                );
                                if code.is_retriable() {
                                    problem = Some(e);
                                } else {
                                    return Err(e);
                                }
                            }
                        }
                    }
                }
            }
            if left.is_empty() {
                return Ok(Step::Done(()));
            }
            Ok(problem.map_or(Step::Wait, Step::Retry))
        })?;
        Ok(found)
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

fn unknown_topic(api: ApiKey, topic: &str) -> Error {
    kafka_error(
        api,
        KafkaCode::UnknownTopicOrPartition,
        Scope::topic(topic),
        &format!("topic {topic}"),
        None,
    )
}

/// ListTransactions for `filter`. The duration filter exists from v1 only; the caller has
/// checked the broker has it, and encoding refuses it below v1 rather than drop it.
pub(crate) fn list_transactions_request(filter: &TransactionFilter) -> ListTransactionsRequest {
    ListTransactionsRequest {
        state_filters: filter.states.iter().map(|s| s.name().into()).collect(),
        producer_id_filters: filter.producer_ids.clone(),
        duration_filter: filter
            .open_longer_than
            .map_or(-1, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX)),
        ..Default::default()
    }
}

/// The listings of one broker's ListTransactions answer; its error names the broker.
fn listings(broker: i32, resp: ListTransactionsResponse) -> Result<Vec<TransactionListing>> {
    let code = KafkaCode::from_code(resp.error_code);
    if code.is_error() {
        return Err(kafka_error(
            ApiKey::ListTransactions,
            code,
            Scope::default(),
            &format!("broker {broker}"),
            None,
        ));
    }
    if !resp.unknown_state_filters.is_empty() {
        // A state newer or older than the broker: it has no transaction in it.
        log::warn!(
            "ListTransactions: broker {broker} does not know the states {:?}",
            resp.unknown_state_filters
        );
    }
    Ok(resp
        .transaction_states
        .into_iter()
        .map(|t| TransactionListing {
            transactional_id: t.transactional_id.into(),
            producer_id: t.producer_id,
            state: TransactionState::from_name(&t.transaction_state),
            coordinator: broker,
        })
        .collect())
}

/// `id`'s description from its coordinator's DescribeTransactions answer.
fn transaction_description(
    id: &str,
    coordinator: i32,
    resp: DescribeTransactionsResponse,
) -> Result<TransactionDescription> {
    let Some(t) = resp
        .transaction_states
        .into_iter()
        .find(|t| t.transactional_id == id)
    else {
        return Err(Error::Kafka {
            api: ApiKey::DescribeTransactions,
            code: KafkaCode::UnknownServerError,
            message: Some(format!("transactional id {id}: missing from the response")),
        });
    };
    let code = KafkaCode::from_code(t.error_code);
    if code.is_error() {
        return Err(kafka_error(
            ApiKey::DescribeTransactions,
            code,
            Scope::default(),
            &format!("transactional id {id}"),
            None,
        ));
    }
    let mut partitions: Vec<TopicPartition> = t
        .topics
        .iter()
        .flat_map(|topic| {
            topic
                .partitions
                .iter()
                .map(|&p| TopicPartition::new(topic.topic.to_string(), p))
        })
        .collect();
    partitions.sort();
    Ok(TransactionDescription {
        transactional_id: id.to_string(),
        coordinator,
        state: TransactionState::from_name(&t.transaction_state),
        producer_id: t.producer_id,
        producer_epoch: t.producer_epoch,
        transaction_timeout: Duration::from_millis(u64::try_from(t.transaction_timeout_ms).unwrap_or(0)),
        start_time_ms: Some(t.transaction_start_time_ms).filter(|&t| t >= 0),
        partitions,
    })
}

/// DescribeProducers for `partitions`, grouped by topic.
fn describe_producers_request(partitions: &[TopicPartition]) -> DescribeProducersRequest {
    let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for tp in partitions {
        by_topic.entry(&tp.topic).or_default().push(tp.partition);
    }
    DescribeProducersRequest {
        topics: by_topic
            .into_iter()
            .map(|(name, partitions)| TopicRequest {
                name: name.into(),
                partition_indexes: partitions.into(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

/// Per partition of a DescribeProducers answer: its producers, or its error with the
/// broker's message.
type ProducerStates = BTreeMap<TopicPartition, Result<Vec<ProducerDescription>, (KafkaCode, Option<String>)>>;

fn producer_states(resp: DescribeProducersResponse) -> ProducerStates {
    let mut out = BTreeMap::new();
    for t in resp.topics {
        for p in t.partitions {
            let tp = TopicPartition::new(t.name.to_string(), p.partition_index);
            let code = KafkaCode::from_code(p.error_code);
            let answer = if code.is_error() {
                Err((code, p.error_message.map(String::from)))
            } else {
                Ok(p.active_producers
                    .into_iter()
                    .map(|s| ProducerDescription {
                        producer_id: s.producer_id,
                        producer_epoch: s.producer_epoch,
                        last_sequence: s.last_sequence,
                        last_timestamp: s.last_timestamp,
                        coordinator_epoch: s.coordinator_epoch,
                        current_transaction_start_offset: Some(s.current_txn_start_offset)
                            .filter(|&o| o >= 0),
                    })
                    .collect())
            };
            out.insert(tp, answer);
        }
    }
    out
}

/// The producers holding a transaction open on a partition whose last write there is more
/// than `max_transaction_timeout` before `now_ms`: no transaction the coordinator still runs
/// can be that old, so these are the candidates for hanging.
fn open_too_long(
    producers: &BTreeMap<TopicPartition, Vec<ProducerDescription>>,
    now_ms: i64,
    max_transaction_timeout: Duration,
) -> Vec<(TopicPartition, ProducerDescription)> {
    let max = i64::try_from(max_transaction_timeout.as_millis()).unwrap_or(i64::MAX);
    producers
        .iter()
        .flat_map(|(tp, ps)| ps.iter().map(move |p| (tp, p)))
        .filter(|(_, p)| p.current_transaction_start_offset.is_some())
        .filter(|(_, p)| now_ms.saturating_sub(p.last_timestamp) > max)
        .map(|(tp, p)| (tp.clone(), p.clone()))
        .collect()
}

/// Producer id → transactional id, from listings filtered by `producer_ids` (a listing of
/// another producer id is ignored).
fn transactional_ids(producer_ids: &[i64], listed: &[TransactionListing]) -> BTreeMap<i64, String> {
    listed
        .iter()
        .filter(|l| producer_ids.contains(&l.producer_id))
        .map(|l| (l.producer_id, l.transactional_id.clone()))
        .collect()
}

/// The candidates that hang: no coordinator maps their producer id to a transactional id,
/// the coordinator no longer knows that id (`None` description), or the coordinator's
/// transaction does not include the candidate's partition (it is complete, or a later one,
/// or the partition's marker was written and lost): nothing will ever write its marker.
fn hanging(
    candidates: Vec<(TopicPartition, ProducerDescription)>,
    ids: &BTreeMap<i64, String>,
    descriptions: &BTreeMap<String, Option<TransactionDescription>>,
) -> Vec<HangingTransaction> {
    candidates
        .into_iter()
        .filter_map(|(tp, producer)| {
            let id = ids.get(&producer.producer_id);
            let in_transaction = id
                .and_then(|id| descriptions.get(id))
                .and_then(Option::as_ref)
                .is_some_and(|d| d.partitions.contains(&tp));
            (!in_transaction).then(|| HangingTransaction {
                partition: tp,
                producer,
                transactional_id: id.cloned(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::messages::describe_producers_response::{
        PartitionResponse, ProducerState, TopicResponse,
    };
    use crate::protocol::messages::describe_transactions_response::{self as dt, TopicData};
    use crate::protocol::messages::list_transactions_response as lt;
    use crate::protocol::{EncodeError, Message};

    fn tp(t: &str, p: i32) -> TopicPartition {
        TopicPartition::new(t, p)
    }

    fn producer(id: i64, start: Option<i64>, last_timestamp: i64) -> ProducerDescription {
        ProducerDescription {
            producer_id: id,
            producer_epoch: 0,
            last_sequence: 2,
            last_timestamp,
            coordinator_epoch: -1,
            current_transaction_start_offset: start,
        }
    }

    #[test]
    fn states_round_trip_by_name() {
        for s in TransactionState::KNOWN {
            assert_eq!(TransactionState::from_name(s.name()), s);
        }
        assert_eq!(
            TransactionState::from_name("Frozen"),
            TransactionState::Unknown("Frozen".into())
        );
        assert_eq!(TransactionState::Unknown("Frozen".into()).to_string(), "Frozen");
    }

    #[test]
    fn list_request_sets_the_duration_filter_only_when_asked_and_v0_refuses_it() {
        let all = list_transactions_request(&TransactionFilter::default());
        assert_eq!(all.duration_filter, -1);
        for v in 0..=ApiKey::ListTransactions.versions().max {
            all.to_bytes(v).unwrap();
        }
        let filter = TransactionFilter {
            states: vec![TransactionState::Ongoing, TransactionState::PrepareCommit],
            producer_ids: vec![7],
            open_longer_than: Some(Duration::from_secs(2)),
        };
        let r = list_transactions_request(&filter);
        assert_eq!(r.state_filters, vec!["Ongoing", "PrepareCommit"]);
        assert_eq!(
            (r.producer_id_filters.clone(), r.duration_filter),
            (vec![7], 2000)
        );
        r.to_bytes(1).unwrap();
        // A v0 broker must never get a request with the filter silently dropped.
        assert!(matches!(r.to_bytes(0), Err(EncodeError::UnsupportedField { .. })));
    }

    #[test]
    fn listings_carry_the_broker_and_its_error_names_it() {
        let resp = ListTransactionsResponse {
            transaction_states: vec![lt::TransactionState {
                transactional_id: "tx".into(),
                producer_id: 9,
                transaction_state: "Ongoing".into(),
                ..Default::default()
            }],
            ..Default::default()
        };
        assert_eq!(
            listings(2, resp).unwrap(),
            vec![TransactionListing {
                transactional_id: "tx".into(),
                producer_id: 9,
                state: TransactionState::Ongoing,
                coordinator: 2,
            }]
        );
        let resp = ListTransactionsResponse {
            error_code: KafkaCode::CoordinatorLoadInProgress.code(),
            ..Default::default()
        };
        let e = listings(3, resp).unwrap_err();
        assert_eq!(e.kafka_code(), Some(KafkaCode::CoordinatorLoadInProgress));
        assert!(
            e.is_coordinator_transient(),
            "retried while the coordinator loads"
        );
        assert!(e.to_string().contains("broker 3"), "{e}");
    }

    #[test]
    fn descriptions_read_partitions_and_name_the_id_in_errors() {
        let resp = |code: KafkaCode| DescribeTransactionsResponse {
            transaction_states: vec![dt::TransactionState {
                error_code: code.code(),
                transactional_id: "tx".into(),
                transaction_state: "Ongoing".into(),
                transaction_timeout_ms: 60_000,
                transaction_start_time_ms: 1_000,
                producer_id: 5,
                producer_epoch: 1,
                topics: vec![TopicData {
                    topic: "t".into(),
                    partitions: vec![2, 0].into(),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        let d = transaction_description("tx", 1, resp(KafkaCode::None)).unwrap();
        assert_eq!(d.state, TransactionState::Ongoing);
        assert_eq!(d.partitions, vec![tp("t", 0), tp("t", 2)]);
        assert_eq!(
            (d.producer_id, d.producer_epoch, d.coordinator, d.start_time_ms),
            (5, 1, 1, Some(1_000))
        );
        assert_eq!(d.transaction_timeout, Duration::from_secs(60));
        let e = transaction_description("tx", 1, resp(KafkaCode::TransactionalIdNotFound)).unwrap_err();
        assert_eq!(e.kafka_code(), Some(KafkaCode::TransactionalIdNotFound));
        assert!(e.to_string().contains("transactional id tx"), "{e}");
        let e = transaction_description("other", 1, resp(KafkaCode::None)).unwrap_err();
        assert!(e.to_string().contains("missing from the response"), "{e}");
        DescribeTransactionsRequest {
            transactional_ids: vec!["tx".into()],
            ..Default::default()
        }
        .to_bytes(0)
        .unwrap();
    }

    #[test]
    fn producer_states_group_partitions_and_keep_errors() {
        let r = describe_producers_request(&[tp("a", 1), tp("b", 0), tp("a", 0)]);
        assert_eq!(r.topics.len(), 2);
        assert_eq!(
            (
                r.topics[0].name.as_ref(),
                r.topics[0].partition_indexes.as_slice()
            ),
            ("a", &[1, 0][..])
        );
        r.to_bytes(0).unwrap();
        let resp = DescribeProducersResponse {
            topics: vec![TopicResponse {
                name: "a".into(),
                partitions: vec![
                    PartitionResponse {
                        partition_index: 0,
                        active_producers: vec![
                            ProducerState {
                                producer_id: 4,
                                current_txn_start_offset: 10,
                                last_timestamp: 77,
                                ..Default::default()
                            },
                            ProducerState {
                                producer_id: 5,
                                current_txn_start_offset: -1,
                                ..Default::default()
                            },
                        ],
                        ..Default::default()
                    },
                    PartitionResponse {
                        partition_index: 1,
                        error_code: KafkaCode::NotLeaderOrFollower.code(),
                        error_message: Some("moved".into()),
                        ..Default::default()
                    },
                ],
                ..Default::default()
            }],
            ..Default::default()
        };
        let states = producer_states(resp);
        let ps = states[&tp("a", 0)].as_ref().unwrap();
        assert_eq!(ps[0].current_transaction_start_offset, Some(10));
        assert_eq!(ps[0].last_timestamp, 77);
        assert_eq!(ps[1].current_transaction_start_offset, None);
        assert_eq!(
            states[&tp("a", 1)],
            Err((KafkaCode::NotLeaderOrFollower, Some("moved".into())))
        );
    }

    fn description(partitions: Vec<TopicPartition>, state: TransactionState) -> TransactionDescription {
        TransactionDescription {
            transactional_id: "tx".into(),
            coordinator: 1,
            state,
            producer_id: 1,
            producer_epoch: 0,
            transaction_timeout: Duration::from_secs(60),
            start_time_ms: Some(0),
            partitions,
        }
    }

    #[test]
    fn candidates_hold_an_open_transaction_older_than_the_limit() {
        let now = 1_000_000;
        let producers = BTreeMap::from([(
            tp("t", 0),
            vec![
                producer(1, Some(3), now - 60_001), // open, older than a minute
                producer(2, Some(3), now - 59_999), // open, younger
                producer(3, None, 0),               // no open transaction
            ],
        )]);
        let c = open_too_long(&producers, now, Duration::from_secs(60));
        assert_eq!(c.iter().map(|(_, p)| p.producer_id).collect::<Vec<_>>(), vec![1]);
        assert_eq!(open_too_long(&producers, now, Duration::from_millis(1)).len(), 2);
    }

    #[test]
    fn hanging_when_the_coordinator_does_not_count_the_partition() {
        let candidates = vec![
            (tp("t", 0), producer(1, Some(3), 0)),
            (tp("t", 1), producer(1, Some(8), 0)),
            (tp("t", 0), producer(2, Some(4), 0)),
            (tp("t", 0), producer(3, Some(5), 0)),
            (tp("t", 0), producer(4, Some(6), 0)),
        ];
        let ids = transactional_ids(
            &[1, 2, 3, 4],
            &[
                TransactionListing {
                    transactional_id: "tx".into(),
                    producer_id: 1,
                    state: TransactionState::Ongoing,
                    coordinator: 1,
                },
                TransactionListing {
                    transactional_id: "done".into(),
                    producer_id: 3,
                    state: TransactionState::CompleteCommit,
                    coordinator: 1,
                },
                TransactionListing {
                    transactional_id: "gone".into(),
                    producer_id: 4,
                    state: TransactionState::Dead,
                    coordinator: 1,
                },
                // Not asked for: ignored.
                TransactionListing {
                    transactional_id: "other".into(),
                    producer_id: 9,
                    state: TransactionState::Ongoing,
                    coordinator: 1,
                },
            ],
        );
        assert_eq!(ids.len(), 3);
        let descriptions = BTreeMap::from([
            // Producer 1's transaction counts t-0 but not t-1.
            (
                "tx".to_string(),
                Some(description(vec![tp("t", 0)], TransactionState::Ongoing)),
            ),
            (
                "done".to_string(),
                Some(description(vec![], TransactionState::CompleteCommit)),
            ),
            ("gone".to_string(), None),
        ]);
        let h = hanging(candidates, &ids, &descriptions);
        let got: Vec<_> = h
            .iter()
            .map(|h| {
                (
                    h.partition.clone(),
                    h.producer.producer_id,
                    h.transactional_id.as_deref(),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (tp("t", 1), 1, Some("tx")),   // outside its coordinator's transaction
                (tp("t", 0), 2, None),         // no coordinator knows producer 2
                (tp("t", 0), 3, Some("done")), // its transaction completed
                (tp("t", 0), 4, Some("gone")), // the id is gone
            ]
        );
    }
}
