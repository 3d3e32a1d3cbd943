//! Share groups (KIP-932, Kafka's queues): the consumers of a share group take records from
//! the same partitions, each record acquired by one consumer at a time and acknowledged on its
//! own, with no rebalance to wait for and no partition-count ceiling on parallelism.
//!
//! A [`ShareConsumer`] is a group member whose engine speaks ShareGroupHeartbeat (the KIP-848
//! engine: the membership rules are the same) plus, on the caller's thread, a ShareFetch to
//! each leader of its assigned partitions, in a share session per broker ([`session`]),
//! carrying the acknowledgements made since the last one ([`acks`]); `commit` and `close` send
//! what is left with ShareAcknowledge. Requests and answers are built and read by pure
//! functions ([`fetch`]).

pub(crate) mod acks;
mod builder;
pub(crate) mod fetch;
mod record;
pub(crate) mod session;

pub use acks::AcknowledgeType;
pub use builder::ShareConsumerBuilder;
pub use record::{AcknowledgementMode, Acknowledger, ShareRecord};

use acks::{Batch, PartitionAcks};
use builder::ShareConfig;
use fetch::{FetchSettings, PartitionAnswer};
use record::AckQueue;
use session::{IdPartition, Plan, ShareSession, CLOSE_EPOCH};

use crate::client::Client;
use crate::error::{Error, Result};
use crate::group::{GroupMember, TopicPartition};
use crate::net::link::{Link, Purpose};
use crate::net::Pending;
use crate::protocol::messages::ShareFetchRequest;
use crate::protocol::{ApiKey, Uuid};
use crate::records::DecodeLimits;
use crate::wakeup::WakeupHandle;
use crate::KafkaCode;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A consumer in a share group (Java's `KafkaShareConsumer`).
///
/// [`poll`](Self::poll) joins the group at its first call, then returns the records the
/// brokers acquired for this consumer, each with its delivery count. Each record is
/// acknowledged on its own — [`AcknowledgeType::Accept`] (done), `Release` (deliver it again)
/// or `Reject` (never again) — by [`ShareRecord::acknowledge`] or, from another thread, by its
/// [`Acknowledger`]; under [`AcknowledgementMode::Implicit`] (the default) whatever the
/// application did not acknowledge itself is accepted by the next `poll`. Acknowledgements go
/// out with the next ShareFetch; [`commit`](Self::commit) sends them at once and reports each
/// partition's result.
///
/// A record stays acquired by this consumer until acknowledged or until its lock expires
/// (the group's `group.share.record.lock.duration.ms`, 30 s by default); then the broker
/// delivers it again, to any consumer of the group, its delivery count one higher, until
/// `group.share.delivery.count.limit` (5) deliveries, after which it is archived.
///
/// ```no_run
/// use kafka_group::{AcknowledgeType, Client};
/// use std::time::Duration;
///
/// # fn main() -> kafka_group::Result<()> {
/// let client = Client::builder().bootstrap_servers("127.0.0.1:9092").build()?;
/// let mut consumer = client.share_consumer("jobs").subscribe(["tasks"]).build()?;
/// loop {
///     for record in consumer.poll(Duration::from_secs(1))? {
///         if record.value.is_none() {
///             record.acknowledge(AcknowledgeType::Reject)?;
///         }
///         // Anything not acknowledged is accepted by the next poll.
///     }
/// }
/// # }
/// ```
#[derive(Debug)]
pub struct ShareConsumer {
    client: Client,
    config: ShareConfig,
    member: Option<GroupMember>,
    queue: Arc<AckQueue>,
    /// Acknowledgements waiting for a request, by partition.
    acks: BTreeMap<IdPartition, PartitionAcks>,
    /// What the last poll returned (implicit mode accepts what was not acknowledged).
    delivered: Vec<(IdPartition, i64)>,
    brokers: BTreeMap<i32, ShareBroker>,
    /// Records fetched beyond what one poll returns.
    buffered: VecDeque<ShareRecord>,
    names: HashMap<Uuid, Arc<str>>,
    /// Acknowledgements the brokers refused since the last call that reported them.
    failed: Vec<(TopicPartition, Error)>,
    /// The assigned partitions' metadata needs reading again (a leader moved).
    stale: bool,
    limits: DecodeLimits,
}

/// One leader the consumer fetches from: its connection, its share session, and the ShareFetch
/// in flight on it.
#[derive(Debug)]
struct ShareBroker {
    link: Link,
    session: ShareSession,
    in_flight: Option<InFlight>,
    /// After a failed request, the next waits until then (`retry.backoff.ms`).
    retry_at: Option<Instant>,
}

#[derive(Debug)]
struct InFlight {
    pending: Pending<ShareFetchRequest>,
    /// When it went out: the acquisition locks it gets run from no earlier than this.
    sent: Instant,
    plan: Plan,
    acks: BTreeMap<IdPartition, Vec<Batch>>,
}

/// Every partition's result of a [`ShareConsumer::commit`]: `Ok` when the broker took its
/// acknowledgements, else why not (`INVALID_RECORD_STATE`: the lock had expired and the record
/// was delivered again).
pub type AcknowledgementResults = BTreeMap<TopicPartition, Result<()>>;

impl ShareConsumer {
    pub(crate) fn new(client: Client, config: ShareConfig, member: GroupMember) -> ShareConsumer {
        ShareConsumer {
            client,
            config,
            member: Some(member),
            queue: Arc::default(),
            acks: BTreeMap::new(),
            delivered: Vec::new(),
            brokers: BTreeMap::new(),
            buffered: VecDeque::new(),
            names: HashMap::new(),
            failed: Vec::new(),
            stale: true,
            limits: DecodeLimits::default(),
        }
    }

    fn member(&mut self) -> Result<&mut GroupMember> {
        self.member.as_mut().ok_or(Error::Closed)
    }

    /// The group id.
    pub fn group_id(&self) -> &str {
        &self.config.member.group_id
    }

    /// The partitions the coordinator assigned to this consumer (other consumers of the group
    /// may have the same ones).
    pub fn assignment(&self) -> Vec<TopicPartition> {
        self.member
            .as_ref()
            .map(|m| m.assignment().topic_partitions())
            .unwrap_or_default()
    }

    /// A handle that makes a blocked [`poll`](Self::poll) return [`Error::Wakeup`] (Java's
    /// `wakeup`).
    pub fn wakeup_handle(&self) -> Result<WakeupHandle> {
        self.member
            .as_ref()
            .map(GroupMember::wakeup_handle)
            .ok_or(Error::Closed)
    }

    /// Acknowledges `record` as `kind` (see [`ShareRecord::acknowledge`]).
    pub fn acknowledge(&self, record: &ShareRecord, kind: AcknowledgeType) -> Result<()> {
        record.acknowledge(kind)
    }

    /// The acknowledgements that rode on ShareFetch requests and that the brokers refused,
    /// since the last call (each with the partition and the error, e.g. `INVALID_RECORD_STATE`
    /// for a record whose lock had expired). [`commit`](Self::commit) reports its own.
    pub fn take_acknowledgement_errors(&mut self) -> Vec<(TopicPartition, Error)> {
        std::mem::take(&mut self.failed)
    }

    /// Returns records acquired for this consumer, at most `max.poll.records`, waiting up to
    /// `timeout` for some; joins the group at the first call. Under
    /// [`AcknowledgementMode::Implicit`] it first accepts what the previous poll returned and
    /// the application did not acknowledge itself.
    pub fn poll(&mut self, timeout: Duration) -> Result<Vec<ShareRecord>> {
        let deadline = crate::deadline::after(timeout);
        // The whole call counts as polling for `max.poll.interval.ms`, fetches included.
        let _polling = self.member()?.polling();
        self.accept_delivered();
        loop {
            if !self.buffered.is_empty() {
                return Ok(self.hand_out());
            }
            let waiting = self.assignment().is_empty();
            // Nothing assigned yet: wait for the membership; else only take its news.
            let wait = if waiting {
                crate::deadline::left(deadline)
            } else {
                Duration::ZERO
            };
            let events = self.member()?.poll(wait)?;
            if events.iter().any(|e| {
                matches!(
                    e,
                    crate::GroupEvent::Assigned { .. }
                        | crate::GroupEvent::Revoked { .. }
                        | crate::GroupEvent::Lost { .. }
                )
            }) {
                self.stale = true;
            }
            if self.assignment().is_empty() {
                if Instant::now() >= deadline {
                    return Ok(Vec::new());
                }
                continue;
            }
            let waited = self.fetch(deadline)?;
            if !self.buffered.is_empty() || Instant::now() >= deadline {
                return Ok(self.hand_out());
            }
            if !waited {
                // Nothing went out (leaders unknown, brokers backing off): wait a little, for
                // the membership's news meanwhile, rather than spin.
                let pause = self.backoff().min(crate::deadline::left(deadline));
                self.member()?.poll(pause)?;
            }
        }
    }

    fn backoff(&self) -> Duration {
        self.config.member.retry_backoff(&self.client)
    }

    /// Sends every acknowledgement made so far now (ShareAcknowledge to each leader), waiting
    /// up to `timeout`, and returns each partition's result (Java's `commitSync`).
    pub fn commit(&mut self, timeout: Duration) -> Result<AcknowledgementResults> {
        let deadline = crate::deadline::after(timeout);
        self.accept_delivered();
        self.take_queued();
        self.acknowledge_all(deadline, false)
    }

    /// Leaves the group within `close_timeout`: sends the last acknowledgements (implicit
    /// mode: accepting what the last poll returned), closes each share session (the brokers
    /// release what this consumer still holds), and sends the leave heartbeat. Acknowledgers
    /// given out fail with [`Error::Closed`] afterwards.
    pub fn close(mut self) -> Result<()> {
        self.close_inner()
    }

    /// Stops like a killed process: no acknowledgement, no session closed, no leave; the
    /// brokers release what it held when the locks expire (`unstable::TestHooks`).
    pub(crate) fn crash(mut self) {
        self.queue.close();
        self.brokers.clear();
        if let Some(m) = self.member.take() {
            m.crash();
        }
    }

    /// The membership (`unstable::TestHooks`).
    pub(crate) fn group_member(&self) -> Option<&GroupMember> {
        self.member.as_ref()
    }

    fn close_inner(&mut self) -> Result<()> {
        let Some(member) = self.member.take() else {
            return Ok(());
        };
        let deadline = crate::deadline::after(self.config.member.close_timeout);
        self.accept_delivered();
        self.take_queued();
        self.queue.close();
        let acked = self.acknowledge_all(deadline, true);
        let left = member.close_by(deadline);
        if let Ok(results) = &acked {
            for (tp, r) in results {
                if let Err(e) = r {
                    log::warn!(
                        "share group {}: {tp}: last acknowledgements: {e}",
                        self.group_id()
                    );
                }
            }
        }
        acked.and(left)
    }

    /// Accepts (implicit mode) what the last poll returned and nobody acknowledged.
    fn accept_delivered(&mut self) {
        self.take_queued();
        let delivered = std::mem::take(&mut self.delivered);
        if self.config.mode == AcknowledgementMode::Implicit {
            for (p, offset) in delivered {
                self.acks.entry(p).or_default().accept_unless_acknowledged(offset);
            }
        }
    }

    /// Moves what other threads acknowledged into the waiting acknowledgements.
    fn take_queued(&mut self) {
        for (p, offset, kind) in self.queue.take() {
            self.acks.entry(p).or_default().add(offset, kind);
        }
    }

    /// At most `max.poll.records` of the buffered records; remembered as delivered.
    fn hand_out(&mut self) -> Vec<ShareRecord> {
        let n = self.buffered.len().min(self.config.max_poll_records);
        let out: Vec<ShareRecord> = self.buffered.drain(..n).collect();
        for r in &out {
            let a = r.acknowledger();
            self.delivered.push((a.id_partition(), a.offset()));
        }
        out
    }

    /// The assigned partitions by leader, by topic id; reads the metadata again when stale or
    /// when a partition is not in it.
    fn leaders(&mut self, deadline: Instant) -> Result<BTreeMap<i32, BTreeSet<IdPartition>>> {
        let assigned = self.assignment();
        let mut meta = self.client.cached_metadata();
        let missing = |m: &crate::client::Metadata| {
            assigned.iter().any(|tp| {
                m.topics.get(&tp.topic).map_or(true, |t| {
                    t.id == Uuid::default()
                        || !t
                            .partitions
                            .iter()
                            .any(|p| p.partition == tp.partition && p.leader >= 0)
                })
            })
        };
        if self.stale || missing(&meta) {
            let topics: Vec<&str> = self.config.member.topics.iter().map(String::as_str).collect();
            meta = self
                .client
                .refresh_metadata_by(Some(&topics), crate::group::member::lookup_deadline(deadline))?;
            self.stale = false;
        }
        let mut out: BTreeMap<i32, BTreeSet<IdPartition>> = BTreeMap::new();
        for tp in &assigned {
            let Some(t) = meta.topics.get(&tp.topic) else {
                continue;
            };
            if t.id == Uuid::default() {
                continue;
            }
            self.names
                .entry(t.id)
                .or_insert_with(|| Arc::from(t.name.as_str()));
            if let Some(p) = t
                .partitions
                .iter()
                .find(|p| p.partition == tp.partition && p.leader >= 0)
            {
                out.entry(p.leader).or_default().insert((t.id, tp.partition));
            }
        }
        Ok(out)
    }

    /// One round of ShareFetch to every leader (those with a request in flight already are
    /// only waited for), reading the answers that come by `deadline` into the buffer; whether
    /// any request was waited for.
    fn fetch(&mut self, deadline: Instant) -> Result<bool> {
        self.take_queued();
        let member_id = self.member()?.member_id().to_string();
        if member_id.is_empty() {
            return Ok(false);
        }
        let leaders = self.leaders(deadline)?;
        let group = self.config.member.group_id.clone();
        let settings = FetchSettings {
            max_wait: self.config.fetch_max_wait.min(crate::deadline::left(deadline)),
            min_bytes: self.config.fetch_min_bytes as i32,
            max_bytes: self.config.fetch_max_bytes as i32,
            max_records: self.config.max_poll_records as i32,
        };
        let meta = self.client.cached_metadata();
        // Brokers that lead nothing of ours any more are kept while their session is open, so
        // that the next request forgets the partitions there (and carries their acknowledgements).
        let ids: BTreeSet<i32> = leaders
            .keys()
            .copied()
            .chain(
                self.brokers
                    .iter()
                    .filter(|(_, b)| b.session.is_open())
                    .map(|(id, _)| *id),
            )
            .collect();
        for id in ids {
            if !self.brokers.contains_key(&id) {
                let Some(b) = meta.brokers.get(&id) else { continue };
                let link = self.client.link(Purpose::Fetch, b.addr());
                self.brokers.insert(
                    id,
                    ShareBroker {
                        link,
                        session: ShareSession::default(),
                        in_flight: None,
                        retry_at: None,
                    },
                );
            }
            let wanted = leaders.get(&id).cloned().unwrap_or_default();
            let Some(broker) = self.brokers.get(&id) else {
                continue;
            };
            let plan = broker.session.plan(&wanted);
            let (busy, open) = (broker.in_flight.is_some(), broker.session.is_open());
            let backing_off = broker.retry_at.is_some_and(|at| Instant::now() < at);
            if busy || backing_off || (plan.epoch == 0 && wanted.is_empty()) {
                continue;
            }
            let acks = self.acks_for(id, &wanted);
            let acks = if open {
                acks
            } else {
                // Records acquired in a session that is gone were released by the broker.
                self.drop_acks(acks, "the share session ended (its records were released)");
                BTreeMap::new()
            };
            let req = fetch::share_fetch_request(&group, &member_id, &plan, &acks, &settings);
            let request_timeout = self.client.connection_config().request_timeout;
            let retry_at = crate::deadline::after(self.backoff());
            let Some(broker) = self.brokers.get_mut(&id) else {
                continue;
            };
            let sent = broker.link.connect(Some(deadline)).and_then(|()| {
                let version = broker.link.version(ApiKey::ShareFetch)?;
                let wait = settings.max_wait + request_timeout;
                broker.link.send_pending(&req, version, Some(wait))
            });
            match sent {
                Ok(pending) => {
                    broker.in_flight = Some(InFlight {
                        pending,
                        sent: Instant::now(),
                        plan,
                        acks,
                    })
                }
                Err(e) => {
                    log::debug!("share group {group}: ShareFetch to broker {id}: {e}");
                    broker.retry_at = Some(retry_at);
                    broker.session.reset();
                    self.stale = true;
                    self.drop_acks(acks, &format!("ShareFetch failed: {e}"));
                }
            }
        }
        let in_flight: Vec<i32> = self
            .brokers
            .iter()
            .filter(|(_, b)| b.in_flight.is_some())
            .map(|(id, _)| *id)
            .collect();
        let waited = !in_flight.is_empty();
        for id in in_flight {
            self.receive(id, deadline)?;
        }
        Ok(waited)
    }

    /// The acknowledgements waiting for partitions `broker` leads (or led: those of `wanted`
    /// and of its session), packed.
    fn acks_for(&mut self, broker: i32, wanted: &BTreeSet<IdPartition>) -> BTreeMap<IdPartition, Vec<Batch>> {
        let held: BTreeSet<IdPartition> = self
            .brokers
            .get(&broker)
            .map(|b| b.session.partitions().clone())
            .unwrap_or_default();
        let mut out = BTreeMap::new();
        for (p, acks) in self.acks.iter_mut() {
            if (wanted.contains(p) || held.contains(p)) && !acks.is_empty() {
                out.insert(*p, acks.take_batches());
            }
        }
        out
    }

    fn drop_acks(&mut self, acks: BTreeMap<IdPartition, Vec<Batch>>, why: &str) {
        for (p, batches) in acks {
            let real = batches.iter().any(|b| b.types.iter().any(|t| *t != acks::GAP));
            if real {
                let tp = self.tp(p);
                log::warn!(
                    "share group {}: acknowledgements of {tp} lost: {why}",
                    self.group_id()
                );
                self.failed.push((
                    tp,
                    Error::Kafka {
                        api: ApiKey::ShareFetch,
                        code: KafkaCode::ShareSessionNotFound,
                        message: Some(why.to_string()),
                    },
                ));
            }
        }
    }

    fn tp(&self, (id, partition): IdPartition) -> TopicPartition {
        let topic = self
            .names
            .get(&id)
            .map_or_else(|| id.to_string(), |n| n.to_string());
        TopicPartition::new(topic, partition)
    }

    /// Waits for `broker`'s ShareFetch answer until `deadline` and reads it.
    fn receive(&mut self, id: i32, deadline: Instant) -> Result<()> {
        let retry_at = crate::deadline::after(self.backoff());
        let Some(broker) = self.brokers.get_mut(&id) else {
            return Ok(());
        };
        let Some(flight) = broker.in_flight.take() else {
            return Ok(());
        };
        let wakeup = self.member.as_ref().map(|m| m.wakeup().clone());
        let left = crate::deadline::left(deadline);
        let received = match &wakeup {
            Some(w) => {
                let link = &mut broker.link;
                w.during(link.interrupter(), || link.receive(&flight.pending, left))
                    .unwrap_or(Ok(None))
            }
            None => broker.link.receive(&flight.pending, left),
        };
        let resp = match received {
            Ok(Some(resp)) => resp,
            Ok(None) => {
                broker.in_flight = Some(flight);
                if let Some(w) = &wakeup {
                    w.check()?;
                }
                return Ok(());
            }
            Err(e) => {
                log::debug!(
                    "share group {}: ShareFetch answer from broker {id}: {e}",
                    self.config.member.group_id
                );
                broker.retry_at = Some(retry_at);
                broker.session.reset();
                broker.link.disconnect();
                self.stale = true;
                self.drop_acks(flight.acks, &format!("ShareFetch failed: {e}"));
                if let Some(w) = &wakeup {
                    w.check()?;
                }
                return Ok(());
            }
        };
        let answer = fetch::read_share_fetch(resp, &self.names, &self.limits);
        let Some(broker) = self.brokers.get_mut(&id) else {
            return Ok(());
        };
        if let Some(code) = answer.code {
            log::debug!(
                "share group {}: ShareFetch to broker {id} answered {code}{}",
                self.config.member.group_id,
                answer
                    .message
                    .as_deref()
                    .map(|m| format!(": {m}"))
                    .unwrap_or_default()
            );
            broker.retry_at = Some(retry_at);
            broker.session.reset();
            self.stale = true;
            self.drop_acks(flight.acks, &format!("ShareFetch answered {code}"));
            return Ok(());
        }
        broker.retry_at = None;
        broker.session.answered(&flight.plan);
        let lock_expires = answer.lock_timeout.map(|d| flight.sent + d);
        for (p, part) in answer.partitions {
            self.take_partition(p, part, ApiKey::ShareFetch, lock_expires);
        }
        Ok(())
    }

    /// What one partition of an answer brought: records to the buffer, gaps to acknowledge,
    /// errors noted.
    fn take_partition(
        &mut self,
        p: IdPartition,
        part: PartitionAnswer,
        api: ApiKey,
        lock_expires: Option<Instant>,
    ) {
        if let Some(code) = part.ack_code {
            let tp = self.tp(p);
            log::warn!(
                "share group {}: acknowledgements of {tp} refused: {code}",
                self.group_id()
            );
            self.failed.push((
                tp,
                Error::Kafka {
                    api,
                    code,
                    message: part.message.clone(),
                },
            ));
        }
        if let Some(code) = part.code {
            log::debug!("share group {}: {} {code}", self.group_id(), self.tp(p));
            self.stale = true;
        }
        for (first, last) in part.gaps {
            self.acks.entry(p).or_default().gaps(first, last);
        }
        for a in part.records {
            let acknowledger = Acknowledger::new(self.queue.clone(), p, a.record.offset);
            self.buffered.push_back(ShareRecord::new(
                a.record,
                a.delivery_count,
                acknowledger,
                lock_expires,
            ));
        }
    }

    /// Sends every waiting acknowledgement with ShareAcknowledge (epoch -1 when `closing`,
    /// which also closes each open session), by `deadline`.
    fn acknowledge_all(&mut self, deadline: Instant, closing: bool) -> Result<AcknowledgementResults> {
        let mut results = AcknowledgementResults::new();
        let member_id = match self.member.as_ref() {
            Some(m) => m.member_id().to_string(),
            None => return Ok(results),
        };
        let group = self.config.member.group_id.clone();
        let ids: Vec<i32> = self.brokers.keys().copied().collect();
        for id in ids {
            // A ShareFetch in flight goes first: the session's epochs are sequential.
            self.receive(id, deadline).ok();
            let Some(broker) = self.brokers.get(&id) else {
                continue;
            };
            if broker.in_flight.is_some() {
                continue;
            }
            let held = broker.session.partitions().clone();
            let open = broker.session.is_open();
            let epoch = broker.session.epoch();
            let acks = self.acks_for(id, &held);
            if !open {
                for p in acks.keys() {
                    results.insert(
                        self.tp(*p),
                        Err(Error::Kafka {
                            api: ApiKey::ShareAcknowledge,
                            code: KafkaCode::ShareSessionNotFound,
                            message: Some("no share session: its records were released".into()),
                        }),
                    );
                }
                continue;
            }
            if acks.is_empty() && !closing {
                continue;
            }
            let epoch = if closing { CLOSE_EPOCH } else { epoch };
            let req = fetch::share_acknowledge_request(&group, &member_id, epoch, &acks);
            let Some(broker) = self.brokers.get_mut(&id) else {
                continue;
            };
            let answered = broker.link.request(Some(deadline), |_| req);
            let sent: Vec<IdPartition> = acks.keys().copied().collect();
            match answered {
                Ok(resp) => {
                    let answer = fetch::read_share_acknowledge(resp);
                    if closing {
                        broker.session.reset();
                    } else if answer.code.is_none() {
                        broker.session.answered(&Plan {
                            epoch,
                            add: Vec::new(),
                            forget: Vec::new(),
                        });
                    } else {
                        broker.session.reset();
                    }
                    for p in sent {
                        let code = answer.code.or(answer.partitions.get(&p).and_then(|a| a.ack_code));
                        let r = match code {
                            None => Ok(()),
                            Some(code) => Err(Error::Kafka {
                                api: ApiKey::ShareAcknowledge,
                                code,
                                message: answer
                                    .message
                                    .clone()
                                    .or_else(|| answer.partitions.get(&p).and_then(|a| a.message.clone())),
                            }),
                        };
                        results.insert(self.tp(p), r);
                    }
                }
                Err(e) => {
                    broker.session.reset();
                    broker.link.disconnect();
                    let text = e.to_string();
                    for p in sent {
                        results.insert(
                            self.tp(p),
                            Err(Error::Kafka {
                                api: ApiKey::ShareAcknowledge,
                                code: KafkaCode::NetworkException,
                                message: Some(text.clone()),
                            }),
                        );
                    }
                }
            }
        }
        Ok(results)
    }
}

impl Drop for ShareConsumer {
    fn drop(&mut self) {
        if let Err(e) = self.close_inner() {
            log::debug!("share group {}: close on drop: {e}", self.config.member.group_id);
        }
    }
}
