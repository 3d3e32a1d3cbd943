//! The transactional producer's calls (the caller's side) and its requests to the transaction
//! coordinator; the decisions are in [`transaction`](super::transaction), pure.
//!
//! Every call is bounded by the timeout its caller gives: coordinator lookups, retries of
//! `CONCURRENT_TRANSACTIONS` and loading coordinators, and the wait for the transaction's
//! records all end by it. A call that runs out of time returns [`Error::Timeout`] and leaves
//! the transaction where it was, so calling it again continues.

use super::idempotence::{ProducerIdEpoch, Sequences, MAX_IN_FLIGHT};
use super::state::{Shared, State};
use super::transaction::{self, react, Call, Phase, Reaction};
use super::Producer;
use crate::authorization::Scope;
use crate::client::Client;
use crate::error::{Error, Result, TransactionAction};
use crate::group::TopicPartition;
use crate::net::versions::{self, Capability};
use crate::protocol::{ApiKey, Request};
use crate::retry::{retry, Backoff, Step};
use crate::{ConsumerGroupMetadata, KafkaCode, OffsetAndMetadata};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Transactions (KIP-98): a producer id per transactional id, and the transaction APIs.
pub(crate) const TRANSACTIONS: Capability = Capability {
    name: "transactions (transactional.id)",
    needs: &[
        (ApiKey::FindCoordinator, 1),
        (ApiKey::InitProducerId, 0),
        (ApiKey::AddPartitionsToTxn, 0),
        (ApiKey::EndTxn, 0),
        (ApiKey::Produce, 3),
    ],
};

/// Offsets committed in a transaction with the consumer's generation, member id and instance
/// id (KIP-447, Kafka 2.5), so that the group coordinator refuses a zombie's.
pub(crate) const TRANSACTIONAL_OFFSETS: Capability = Capability {
    name:
        "offsets in a transaction checked against the consumer group (KIP-447, send_offsets_to_transaction)",
    needs: &[(ApiKey::AddOffsetsToTxn, 0), (ApiKey::TxnOffsetCommit, 3)],
};

/// The highest EndTxn and TxnOffsetCommit versions of transaction protocol v1: v5 of each
/// belongs to protocol v2.
const V1_END_TXN: i16 = 4;
const V1_TXN_OFFSET_COMMIT: i16 = 4;

/// CONCURRENT_TRANSACTIONS right after a transaction ended only means its markers are still
/// being written: try again sooner than `retry.backoff.ms`, as Java's producer does.
const CONCURRENT_RETRY: Duration = Duration::from_millis(20);

impl Producer {
    /// Gets this producer's id and epoch from the transaction coordinator of its
    /// `transactional.id` (InitProducerId), which first completes or aborts any transaction an
    /// earlier producer with the same id left open and fences that producer: its later writes
    /// and commits are refused with `PRODUCER_FENCED`. Call once, before the first
    /// [`begin_transaction`](Self::begin_transaction) (Java's `initTransactions`).
    ///
    /// Errors: [`Error::TransactionState`] on a producer without `transactional.id` or already
    /// initialized; [`Error::MissingCapability`] on a broker before Kafka 0.11;
    /// [`Error::Transaction`] with [`TransactionAction::Close`] when the coordinator refuses
    /// for good (the principal may not write the transactional id, `transaction.timeout.ms`
    /// above the broker's `transaction.max.timeout.ms`); [`Error::Timeout`] when `timeout`
    /// passed first (the coordinator may still be aborting the earlier transaction: call again).
    pub fn init_transactions(&mut self, timeout: Duration) -> Result<()> {
        let deadline = crate::deadline::after(timeout);
        self.check(Call::Init)?;
        let bv = self.broker_versions(deadline)?;
        versions::check(&TRANSACTIONS, &bv)?;
        let producer = self.init_producer_id(deadline, None)?;
        let v2 = self.speaks_v2(&bv, deadline);
        let mut st = self.shared.lock();
        let per_partition = self.settings.config.max_in_flight.min(MAX_IN_FLIGHT);
        let mut seq = Sequences::transactional();
        seq.reset(producer);
        st.seq = Some(seq);
        st.per_partition = per_partition;
        st.idempotence_decided = true;
        if let Some(t) = st.txn.as_mut() {
            t.set_phase(Phase::Ready);
            t.v2 = v2;
        }
        log::info!(
            "producer: transactional.id {}: producer id {} epoch {}, transaction protocol v{}",
            self.txn_id(),
            producer.id,
            producer.epoch,
            if v2 { 2 } else { 1 }
        );
        Ok(())
    }

    /// Whether to speak transaction protocol v2 (KIP-890): the cluster has finalized
    /// `transaction.version` 2 or above (Kafka 4.0+ by default) and the broker has the
    /// versions it brings (Produce v12, TxnOffsetCommit v5, EndTxn v5). Asked of the
    /// transaction coordinator; anything unknown means v1, which every broker still takes.
    fn speaks_v2(&self, bv: &crate::net::versions::BrokerVersions, deadline: Instant) -> bool {
        let has = |api: ApiKey, v: i16| bv.get(&api.key()).is_some_and(|r| r.max >= v);
        if !(has(ApiKey::Produce, 12) && has(ApiKey::TxnOffsetCommit, 5) && has(ApiKey::EndTxn, 5)) {
            return false;
        }
        let Some(coordinator) = self.shared.lock().txn.as_ref().and_then(|t| t.coordinator) else {
            return false;
        };
        match self
            .client
            .finalized_feature_of(coordinator, "transaction.version", deadline)
        {
            Ok(level) => level.is_some_and(|l| l >= 2),
            Err(e) => {
                log::debug!("producer: transaction.version unknown ({e}); protocol v1");
                false
            }
        }
    }

    /// Some broker's ApiVersions, retried while none is reachable, until `deadline`.
    fn broker_versions(&self, deadline: Instant) -> Result<crate::net::versions::BrokerVersions> {
        let backoff = Backoff::fixed(self.settings.retry_backoff);
        retry(
            deadline,
            backoff,
            || "connecting to a broker".to_string(),
            || match self.client.any_broker_versions_by(deadline) {
                Ok(bv) => Ok(Step::Done(bv)),
                Err(e) if e.is_unreachable() => Ok(Step::Retry(e)),
                Err(e) => Err(e),
            },
        )
    }

    /// Whether this producer speaks transaction protocol v2.
    fn v2(&self) -> bool {
        self.shared.lock().txn.as_ref().is_some_and(|t| t.v2)
    }

    /// Starts a transaction: every record [`send`](Self::send) writes from now on, and the
    /// offsets given to [`send_offsets_to_transaction`](Self::send_offsets_to_transaction),
    /// become visible to `read_committed` consumers together at
    /// [`commit_transaction`](Self::commit_transaction), or never after
    /// [`abort_transaction`](Self::abort_transaction). No network call.
    pub fn begin_transaction(&mut self) -> Result<()> {
        let mut st = self.shared.lock();
        let txn = st.txn.as_mut().ok_or_else(not_transactional(Call::Begin))?;
        txn.check(Call::Begin)?;
        txn.set_phase(Phase::InTransaction);
        Ok(())
    }

    /// Adds a consumer's positions to the transaction, so that they are committed with its
    /// records or not at all: the consume-transform-produce step of an exactly-once job.
    /// `offsets` are the positions to resume from (the offset after the last record
    /// processed), as [`Consumer::commit_offsets`](crate::Consumer::commit_offsets) takes them;
    /// `group` is [`Consumer::group_metadata`](crate::Consumer::group_metadata) taken **now**:
    /// the group coordinator checks its generation (the member epoch under the consumer
    /// protocol), member id and instance id (KIP-447) and refuses the offsets of a member that
    /// is no longer current. That refusal comes back as [`Error::Transaction`] with
    /// [`TransactionAction::Abort`] and the group's code (`ILLEGAL_GENERATION`,
    /// `UNKNOWN_MEMBER_ID`, `FENCED_INSTANCE_ID`) as its cause: abort, then resume from the
    /// committed offsets (a rebalance may have moved the partitions).
    ///
    /// Needs Kafka 2.5+ ([`Error::MissingCapability`] otherwise). Bounded by `timeout`.
    pub fn send_offsets_to_transaction(
        &mut self,
        offsets: &BTreeMap<TopicPartition, OffsetAndMetadata>,
        group: &ConsumerGroupMetadata,
        timeout: Duration,
    ) -> Result<()> {
        let deadline = crate::deadline::after(timeout);
        self.check(Call::SendOffsets)?;
        if group.group_id.is_empty() {
            return Err(Error::Config {
                property: "group.id",
                problem: "send_offsets_to_transaction needs the consumer's group (its group_id is empty)"
                    .into(),
            });
        }
        let bv = self.broker_versions(deadline)?;
        versions::check(&TRANSACTIONAL_OFFSETS, &bv)?;
        let id = self.txn_id();
        let has_group = self
            .shared
            .lock()
            .txn
            .as_ref()
            .is_some_and(|t| t.has_group(&group.group_id));
        // Under protocol v2 the TxnOffsetCommit adds the group itself.
        if !has_group && !self.v2() {
            let producer = self.producer_id_epoch();
            self.call_coordinator(
                ApiKey::AddOffsetsToTxn,
                deadline,
                Some(&group.group_id),
                None,
                |_| transaction::add_offsets_request(&id, producer, &group.group_id),
                |r| (KafkaCode::from_code(r.error_code), None),
            )?;
        }
        if let Some(t) = self.shared.lock().txn.as_mut() {
            t.group_added(&group.group_id);
        }
        if offsets.is_empty() {
            return Ok(());
        }
        self.txn_offset_commit(offsets, group, deadline)
    }

    /// Commits the transaction: waits until every record sent in it is written, then has the
    /// coordinator commit it (EndTxn), which makes its records and offsets visible to
    /// `read_committed` consumers. Bounded by `timeout`: when it passes, [`Error::Timeout`]
    /// and the transaction is still committing; call `commit_transaction` again (not abort).
    ///
    /// When a record of the transaction could not be written, or its offsets were refused,
    /// returns [`Error::Transaction`] with [`TransactionAction::Abort`]: call
    /// [`abort_transaction`](Self::abort_transaction) and redo the work. A fenced producer gets
    /// [`TransactionAction::Close`].
    pub fn commit_transaction(&mut self, timeout: Duration) -> Result<()> {
        let deadline = crate::deadline::after(timeout);
        self.check(Call::Commit)?;
        self.set_phase(Phase::Committing);
        self.wait_for_records(deadline)?;
        // A record that failed made the transaction abortable while we waited.
        self.check(Call::Commit)?;
        self.end(true, deadline)
    }

    /// Aborts the transaction: records not sent yet are dropped (their handles fail), records
    /// in flight are waited for, and the coordinator aborts the transaction (EndTxn), so that
    /// `read_committed` consumers never see its records and its offsets are not committed.
    /// The producer is then ready for the next transaction; the consumer should go back to
    /// its last committed offsets (`seek` to [`Consumer::committed`](crate::Consumer::committed))
    /// before redoing the work. Bounded by `timeout`: when it passes, [`Error::Timeout`];
    /// call it again.
    pub fn abort_transaction(&mut self, timeout: Duration) -> Result<()> {
        let deadline = crate::deadline::after(timeout);
        self.check(Call::Abort)?;
        self.set_phase(Phase::Aborting);
        {
            let mut st = self.shared.lock();
            let aborted = Arc::new(Error::Transaction {
                transactional_id: self.txn_id(),
                action: TransactionAction::Abort,
                cause: Arc::new(Error::Closed),
            });
            for b in st.acc.drain_waiting() {
                b.delivery.failed(Arc::clone(&aborted));
            }
        }
        self.shared.settled.notify_all();
        self.wait_for_records(deadline)?;
        self.end(false, deadline)
    }

    /// A transactional producer closed in the middle of a transaction aborts it (as Java's
    /// does), so that `read_committed` consumers do not wait `transaction.timeout.ms` for the
    /// coordinator to do it. True unless the abort was needed and failed (logged).
    pub(super) fn abort_open_transaction(&mut self, timeout: Duration) -> bool {
        let open = self.shared.lock().txn.as_ref().is_some_and(|t| {
            matches!(
                t.phase(),
                Phase::InTransaction | Phase::Abortable | Phase::Committing | Phase::Aborting
            )
        });
        if !open {
            return true;
        }
        if self.check(Call::Abort).is_err() {
            // Committing: a commit that timed out is not turned into an abort behind the
            // application's back; the coordinator ends it after transaction.timeout.ms.
            return true;
        }
        match self.abort_transaction(timeout) {
            Ok(()) => true,
            Err(e) => {
                log::warn!("producer closed in a transaction, and aborting it failed: {e}");
                false
            }
        }
    }

    /// The transactional producer's state check for `call`.
    pub(super) fn check(&self, call: Call) -> Result<()> {
        check_in(&self.shared.lock(), call)
    }

    fn set_phase(&self, phase: Phase) {
        if let Some(t) = self.shared.lock().txn.as_mut() {
            t.set_phase(phase);
        }
    }

    fn txn_id(&self) -> String {
        self.settings.config.transactional_id.clone().unwrap_or_default()
    }

    fn producer_id_epoch(&self) -> ProducerIdEpoch {
        self.shared
            .lock()
            .seq
            .as_ref()
            .map_or(ProducerIdEpoch::NONE, |s| s.producer())
    }

    /// Waits until no record of the transaction is pending, or the transaction can no longer
    /// commit, or `deadline`.
    fn wait_for_records(&self, deadline: Instant) -> Result<()> {
        let mut st = self.shared.lock();
        st.flushing += 1;
        self.shared.work.notify_all();
        let result = loop {
            let stuck = st
                .txn
                .as_ref()
                .is_some_and(|t| matches!(t.phase(), Phase::Abortable | Phase::Fatal));
            // Aborting: batches held for a partition the coordinator never added will not go.
            if st.acc.pending == 0 || (stuck && st.acc.in_flight() == 0) {
                break Ok(());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break Err(Error::retries_timeout(
                    format!(
                        "waiting for the {} record(s) of transactional.id {} to be written",
                        st.acc.pending,
                        self.txn_id()
                    ),
                    st.first_failure.as_ref().map(|e| Error::Delivery {
                        failed: st.failed,
                        first: Arc::clone(e),
                    }),
                ));
            }
            st = self
                .shared
                .wait(&self.shared.settled, st, left.min(Duration::from_millis(100)));
        };
        st.flushing -= 1;
        if st.txn.as_ref().is_some_and(|t| t.phase() == Phase::Aborting) {
            // Whatever was left waiting for a partition to be added will never be sent.
            let aborted = Arc::new(Error::Closed);
            for b in st.acc.drain_waiting() {
                b.delivery.failed(Arc::clone(&aborted));
            }
        }
        result
    }

    /// EndTxn, then the producer is ready for the next transaction. After an abort that left a
    /// partition's sequence unknown (a batch failed), the coordinator bumps the epoch first
    /// (InitProducerId naming the current one), so the next transaction starts every partition
    /// at sequence 0.
    fn end(&mut self, commit: bool, deadline: Instant) -> Result<()> {
        let id = self.txn_id();
        let producer = self.producer_id_epoch();
        let (started, reset) = {
            let st = self.shared.lock();
            let t = st.txn.as_ref();
            let started = t.is_some_and(|t| t.started());
            let reset =
                t.is_some_and(|t| t.failed_batches) || st.seq.as_ref().is_some_and(Sequences::has_gap);
            (started, reset)
        };
        let v2 = self.v2();
        let mut next = None;
        if started {
            let resp = self.call_coordinator(
                ApiKey::EndTxn,
                deadline,
                None,
                (!v2).then_some(V1_END_TXN),
                |_| transaction::end_request(&id, producer, commit),
                |r| (KafkaCode::from_code(r.error_code), None),
            )?;
            // Protocol v2 ends every transaction with a new epoch (or, once the epoch is used
            // up, a new producer id), under which every partition starts at sequence 0.
            let bumped = ProducerIdEpoch {
                id: resp.producer_id,
                epoch: resp.producer_epoch,
            };
            if v2 && bumped.is_valid() {
                next = Some(bumped);
            }
        }
        if let Some(bumped) = next {
            let mut st = self.shared.lock();
            if let Some(seq) = st.seq.as_mut() {
                seq.reset(bumped);
            }
        } else if reset && !commit {
            let bumped = self.init_producer_id(deadline, Some(producer))?;
            let mut st = self.shared.lock();
            if let Some(seq) = st.seq.as_mut() {
                seq.reset(bumped);
            }
            log::info!(
                "producer: transactional.id {id}: epoch bumped to {} after the abort",
                bumped.epoch
            );
        }
        let mut st = self.shared.lock();
        if let Some(t) = st.txn.as_mut() {
            t.set_phase(Phase::Ready);
        }
        // The transaction's failures were reported as its error; the next flush starts clean.
        st.first_failure = None;
        st.failed = 0;
        log::debug!(
            "producer: transactional.id {id}: transaction {}",
            if commit { "committed" } else { "aborted" }
        );
        Ok(())
    }

    /// InitProducerId for the transactional id, retried within `deadline`.
    fn init_producer_id(
        &self,
        deadline: Instant,
        current: Option<ProducerIdEpoch>,
    ) -> Result<ProducerIdEpoch> {
        let id = self.txn_id();
        let timeout_ms = self
            .settings
            .config
            .transaction_timeout
            .as_millis()
            .min(i32::MAX as u128) as i32;
        let resp = self.call_coordinator(
            ApiKey::InitProducerId,
            deadline,
            None,
            None,
            |v| transaction::init_request(v, &id, timeout_ms, current),
            |r| (KafkaCode::from_code(r.error_code), None),
        )?;
        let got = ProducerIdEpoch {
            id: resp.producer_id,
            epoch: resp.producer_epoch,
        };
        if !got.is_valid() {
            return Err(self.fail_for_good(Error::Kafka {
                api: ApiKey::InitProducerId,
                code: KafkaCode::None,
                message: Some(format!("the coordinator handed out no producer id ({got})")),
            }));
        }
        Ok(got)
    }

    /// TxnOffsetCommit to the group's coordinator, retried within `deadline`.
    fn txn_offset_commit(
        &self,
        offsets: &BTreeMap<TopicPartition, OffsetAndMetadata>,
        group: &ConsumerGroupMetadata,
        deadline: Instant,
    ) -> Result<()> {
        let id = self.txn_id();
        let producer = self.producer_id_epoch();
        let max = if self.v2() { i16::MAX } else { V1_TXN_OFFSET_COMMIT };
        let backoff = Backoff::fixed(self.settings.retry_backoff);
        let what = || {
            format!(
                "TxnOffsetCommit of group {} for transactional.id {id}",
                group.group_id
            )
        };
        retry(deadline, backoff, what, || {
            let coordinator = match self.client.find_coordinator_by(&group.group_id, deadline) {
                Ok(b) => b.id,
                Err(e) if e.is_coordinator_transient() => return Ok(Step::Retry(e)),
                Err(e) => return Err(e),
            };
            let resp = match self
                .client
                .send_to_coordinator_capped_by(coordinator, deadline, max, |_| {
                    transaction::txn_offset_commit_request(&id, producer, group, offsets)
                }) {
                Ok(r) => r,
                Err(e) if e.is_unreachable() => return Ok(Step::Retry(e)),
                Err(e) => return Err(e),
            };
            let (code, tp) = transaction::txn_offset_commit_answer(&resp);
            let about = match &tp {
                Some(tp) => format!(
                    "group {} (generation {}, member {:?}, instance {}), {tp}",
                    group.group_id,
                    group.generation_id,
                    group.member_id,
                    group.group_instance_id.as_deref().unwrap_or("none")
                ),
                None => format!("group {}", group.group_id),
            };
            let e = || {
                Error::from_code_about(
                    ApiKey::TxnOffsetCommit,
                    code,
                    Scope::transaction(&id, Some(&group.group_id)),
                    &about,
                    None,
                )
            };
            match react(ApiKey::TxnOffsetCommit, code) {
                Reaction::Ok => Ok(Step::Done(())),
                Reaction::Retry | Reaction::FindCoordinator => Ok(Step::Retry(e())),
                Reaction::Abortable => Err(self.fail_transaction(e())),
                Reaction::Fatal => Err(self.fail_for_good(e())),
            }
        })
    }

    /// Sends a request to the transaction coordinator (found, and found again when it moves)
    /// until it answers without a retriable error or `deadline` passes; an abortable or fatal
    /// answer changes the transaction's phase and comes back as [`Error::Transaction`].
    fn call_coordinator<R: Request>(
        &self,
        api: ApiKey,
        deadline: Instant,
        group: Option<&str>,
        max_version: Option<i16>,
        build: impl Fn(i16) -> R,
        code_of: impl Fn(&R::Response) -> (KafkaCode, Option<String>),
    ) -> Result<R::Response> {
        let id = self.txn_id();
        let backoff = Backoff::fixed(self.settings.retry_backoff);
        let what = || format!("{} for transactional.id {id}", api.name());
        retry(deadline, backoff, what, || {
            let coordinator = match coordinator(&self.client, &self.shared, &id, deadline) {
                Ok(c) => c,
                Err(e) if e.is_coordinator_transient() => return Ok(Step::Retry(e)),
                Err(e) => return Err(self.fail_for_good(e)),
            };
            let sent = match max_version {
                Some(max) => self
                    .client
                    .send_to_coordinator_capped_by(coordinator, deadline, max, &build),
                None => self.client.send_to_coordinator_by(coordinator, deadline, &build),
            };
            let resp = match sent {
                Ok(r) => r,
                Err(e) if e.is_unreachable() => {
                    forget_coordinator(&self.shared);
                    return Ok(Step::Retry(e));
                }
                Err(e) => return Err(e),
            };
            let (code, message) = code_of(&resp);
            let e = || Error::from_code(api, code, Scope::transaction(&id, group), message.clone());
            match react(api, code) {
                Reaction::Ok => Ok(Step::Done(resp)),
                Reaction::Retry => {
                    if code == KafkaCode::ConcurrentTransactions {
                        std::thread::sleep(
                            CONCURRENT_RETRY.min(deadline.saturating_duration_since(Instant::now())),
                        );
                    }
                    Ok(Step::Retry(e()))
                }
                Reaction::FindCoordinator => {
                    forget_coordinator(&self.shared);
                    Ok(Step::Retry(e()))
                }
                Reaction::Abortable => Err(self.fail_transaction(e())),
                Reaction::Fatal => Err(self.fail_for_good(e())),
            }
        })
    }

    /// The transaction cannot commit because of `e`: the error the call returns.
    fn fail_transaction(&self, e: Error) -> Error {
        let cause = Arc::new(e);
        let mut st = self.shared.lock();
        if let Some(t) = st.txn.as_mut() {
            t.abortable(Arc::clone(&cause));
        }
        Error::Transaction {
            transactional_id: self.txn_id(),
            action: TransactionAction::Abort,
            cause,
        }
    }

    /// The producer cannot go on because of `e`: every batch fails, and every later call.
    fn fail_for_good(&self, e: Error) -> Error {
        let cause = Arc::new(e);
        log::error!("producer: transactional.id {}: {cause}", self.txn_id());
        let mut st = self.shared.lock();
        if let Some(t) = st.txn.as_mut() {
            t.fatal(Arc::clone(&cause));
        }
        let fatal = Arc::new(Error::Transaction {
            transactional_id: self.txn_id(),
            action: TransactionAction::Close,
            cause: Arc::clone(&cause),
        });
        for b in st.acc.drain_waiting() {
            b.delivery.failed(Arc::clone(&fatal));
        }
        drop(st);
        self.shared.settled.notify_all();
        Error::Transaction {
            transactional_id: self.txn_id(),
            action: TransactionAction::Close,
            cause,
        }
    }
}

/// The transactional producer's state check for `call`, under the lock the caller holds.
pub(super) fn check_in(st: &State, call: Call) -> Result<()> {
    st.txn.as_ref().ok_or_else(not_transactional(call))?.check(call)
}

/// The error of a transactional call on a producer without `transactional.id`.
fn not_transactional(call: Call) -> impl FnOnce() -> Error {
    move || Error::TransactionState {
        call: match call {
            Call::Init => "init_transactions",
            Call::Begin => "begin_transaction",
            Call::Send => "send",
            Call::SendOffsets => "send_offsets_to_transaction",
            Call::Commit => "commit_transaction",
            Call::Abort => "abort_transaction",
        },
        state: "not transactional (set ProducerBuilder::transactional_id)",
    }
}

/// The transaction coordinator's broker id: the one found last, or a new lookup.
pub(super) fn coordinator(client: &Client, shared: &Shared, id: &str, deadline: Instant) -> Result<i32> {
    if let Some(c) = shared.lock().txn.as_ref().and_then(|t| t.coordinator) {
        return Ok(c);
    }
    let b = client.lookup_transaction_coordinator_by(id, deadline)?;
    log::debug!("producer: transactional.id {id}: coordinator is broker {}", b.id);
    if let Some(t) = shared.lock().txn.as_mut() {
        t.coordinator = Some(b.id);
    }
    Ok(b.id)
}

/// The coordinator moved or is unreachable: look it up again next time.
pub(super) fn forget_coordinator(shared: &Shared) {
    if let Some(t) = shared.lock().txn.as_mut() {
        t.coordinator = None;
    }
}

/// What the sender thread's AddPartitionsToTxn came to.
pub(super) enum Added {
    /// The partitions are in the transaction.
    Yes,
    /// Try again after a pause (this long).
    Retry(Duration),
    /// The transaction cannot commit.
    Abortable(Error),
    /// The producer cannot go on.
    Fatal(Error),
}

/// One AddPartitionsToTxn for `tps` (the sender thread's: partitions written for the first time
/// in the transaction), bounded by `deadline`.
pub(super) fn add_partitions(
    client: &Client,
    shared: &Shared,
    id: &str,
    producer: ProducerIdEpoch,
    tps: &[TopicPartition],
    retry_backoff: Duration,
    deadline: Instant,
) -> Added {
    let coordinator = match coordinator(client, shared, id, deadline) {
        Ok(c) => c,
        Err(e) if e.is_coordinator_transient() => return Added::Retry(retry_backoff),
        Err(e) => return Added::Fatal(e),
    };
    let resp = match client.send_to_coordinator_by(coordinator, deadline, |_| {
        transaction::add_partitions_request(id, producer, tps)
    }) {
        Ok(r) => r,
        Err(e) if e.is_unreachable() => {
            forget_coordinator(shared);
            return Added::Retry(retry_backoff);
        }
        Err(e) => return Added::Fatal(e),
    };
    let (code, tp) = transaction::add_partitions_answer(&resp);
    let e = || {
        let topic = tp.as_ref().map(|tp| tp.topic.as_str());
        let scope = Scope {
            topic,
            ..Scope::transaction(id, None)
        };
        let about = tp
            .as_ref()
            .map_or_else(|| "the transaction".to_string(), |tp| tp.to_string());
        Error::from_code_about(ApiKey::AddPartitionsToTxn, code, scope, &about, None)
    };
    match react(ApiKey::AddPartitionsToTxn, code) {
        Reaction::Ok => Added::Yes,
        Reaction::Retry if code == KafkaCode::ConcurrentTransactions => {
            Added::Retry(CONCURRENT_RETRY.min(retry_backoff))
        }
        Reaction::Retry => Added::Retry(retry_backoff),
        Reaction::FindCoordinator => {
            forget_coordinator(shared);
            Added::Retry(Duration::ZERO)
        }
        Reaction::Abortable => Added::Abortable(e()),
        Reaction::Fatal => Added::Fatal(e()),
    }
}

#[cfg(test)]
mod tests {
    //! Each row of the reaction table, as the application sees it, on the scripted broker.

    use super::*;
    use crate::net::script::{Answer, Script};
    use crate::protocol::messages::add_partitions_to_txn_response::{
        AddPartitionsToTxnPartitionResult, AddPartitionsToTxnTopicResult,
    };
    use crate::protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
    use crate::protocol::messages::{
        AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, AddPartitionsToTxnRequest,
        AddPartitionsToTxnResponse, EndTxnRequest, EndTxnResponse, FindCoordinatorRequest,
        InitProducerIdRequest, InitProducerIdResponse, ProduceRequest, ProduceResponse,
    };
    use crate::records;
    use crate::{ProducerRecord, Resource};

    const CALL: Duration = Duration::from_secs(10);
    /// Long enough that a batch sent after this answer was read is told apart from one sent
    /// before it on a loaded machine; far below `CALL`.
    const SLOW_ANSWER: Duration = Duration::from_secs(2);

    /// Broker 0 leads topic `t` (2 partitions), coordinates every key, hands out producer id
    /// 7 (epoch 1, then one higher per InitProducerId), adds every partition and ends every
    /// transaction, and writes every batch: unless a test queues other answers first.
    fn script() -> Script {
        let script = Script::new();
        script.cluster(&[(0, "b0", 9092)]).topic("t", 2).coordinator(0);
        let mut epoch = 0;
        script.on::<InitProducerIdRequest>(move |_, _| {
            epoch += 1;
            Answer::Reply(InitProducerIdResponse {
                producer_id: 7,
                producer_epoch: epoch,
                ..Default::default()
            })
        });
        script.on::<AddPartitionsToTxnRequest>(|req, _| Answer::Reply(added(req, KafkaCode::None)));
        script.on::<AddOffsetsToTxnRequest>(|_, _| Answer::Reply(AddOffsetsToTxnResponse::default()));
        script.on::<EndTxnRequest>(|_, _| Answer::Reply(EndTxnResponse::default()));
        script.on::<ProduceRequest>(|req, _| {
            Answer::Reply(ProduceResponse {
                responses: req
                    .topic_data
                    .iter()
                    .map(|t| TopicProduceResponse {
                        name: t.name.clone(),
                        partition_responses: t
                            .partition_data
                            .iter()
                            .map(|p| PartitionProduceResponse {
                                index: p.index,
                                base_offset: 0,
                                ..Default::default()
                            })
                            .collect(),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            })
        });
        script
    }

    /// Every partition of `req` answered with `code`.
    fn added(req: &AddPartitionsToTxnRequest, code: KafkaCode) -> AddPartitionsToTxnResponse {
        AddPartitionsToTxnResponse {
            results_by_topic_v3_and_below: req
                .v3_and_below_topics
                .iter()
                .map(|t| AddPartitionsToTxnTopicResult {
                    name: t.name.clone(),
                    results_by_partition: t
                        .partitions
                        .iter()
                        .map(|p| AddPartitionsToTxnPartitionResult {
                            partition_index: *p,
                            partition_error_code: code.code(),
                            ..Default::default()
                        })
                        .collect(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    /// An AddPartitionsToTxn answer of `t`-`partition` alone (clients' versions, v0-v3,
    /// answer per partition only).
    fn one_partition_answer(partition: i32, code: KafkaCode) -> AddPartitionsToTxnResponse {
        AddPartitionsToTxnResponse {
            results_by_topic_v3_and_below: vec![AddPartitionsToTxnTopicResult {
                name: "t".into(),
                results_by_partition: vec![AddPartitionsToTxnPartitionResult {
                    partition_index: partition,
                    partition_error_code: code.code(),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    /// A consumer's group metadata and one offset of it to commit.
    fn group_and_offsets(
        instance: Option<&str>,
    ) -> (ConsumerGroupMetadata, BTreeMap<TopicPartition, OffsetAndMetadata>) {
        let group = ConsumerGroupMetadata {
            group_id: "g".into(),
            generation_id: 3,
            member_id: "m".into(),
            group_instance_id: instance.map(String::from),
        };
        (
            group,
            [(TopicPartition::new("in", 0), OffsetAndMetadata::new(5))].into(),
        )
    }

    fn producer(script: &Script) -> Producer {
        script
            .client(
                Client::builder()
                    .bootstrap_servers("b0:9092")
                    .reconnect_backoff(Duration::from_millis(1))
                    .retry_backoff(Duration::from_millis(1)),
            )
            .unwrap()
            .producer()
            .transactional_id("tx")
            .linger(Duration::ZERO)
            .build()
            .unwrap()
    }

    fn apis(script: &Script) -> Vec<ApiKey> {
        script.seen().iter().map(|s| s.api).collect()
    }

    #[test]
    fn loading_and_moving_coordinators_and_concurrent_transactions_are_retried_inside_the_call() {
        let script = script();
        script
            .push::<InitProducerIdRequest>(Answer::Reply(InitProducerIdResponse {
                error_code: KafkaCode::CoordinatorLoadInProgress.code(),
                ..Default::default()
            }))
            .push::<InitProducerIdRequest>(Answer::Reply(InitProducerIdResponse {
                error_code: KafkaCode::NotCoordinator.code(),
                ..Default::default()
            }))
            .push::<EndTxnRequest>(Answer::Reply(EndTxnResponse {
                error_code: KafkaCode::ConcurrentTransactions.code(),
                ..Default::default()
            }));
        let mut p = producer(&script);
        p.init_transactions(CALL).unwrap();
        let finds = script.requests::<FindCoordinatorRequest>();
        assert_eq!(finds.len(), 2, "looked up again after NOT_COORDINATOR");
        assert!(
            finds.iter().all(|f| f.key_type == 1),
            "transaction coordinator lookups"
        );
        assert_eq!(script.requests::<InitProducerIdRequest>().len(), 3);
        p.begin_transaction().unwrap();
        p.send(ProducerRecord::new("t", "v").partition(1)).unwrap();
        p.commit_transaction(CALL).unwrap();
        assert_eq!(
            script.requests::<EndTxnRequest>().len(),
            2,
            "CONCURRENT_TRANSACTIONS retried"
        );
        assert!(script.requests::<EndTxnRequest>().iter().all(|e| e.committed));
    }

    #[test]
    fn a_partitions_batches_go_only_after_the_coordinator_added_it_and_carry_the_transaction() {
        let script = script();
        // Clients' versions (v0-v3) answer per partition only.
        script.push::<AddPartitionsToTxnRequest>(Answer::Reply(one_partition_answer(
            1,
            KafkaCode::ConcurrentTransactions,
        )));
        let mut p = producer(&script);
        p.init_transactions(CALL).unwrap();
        p.begin_transaction().unwrap();
        let handle = p.send(ProducerRecord::new("t", "v").partition(1)).unwrap();
        p.commit_transaction(CALL).unwrap();
        assert!(handle.wait().is_ok());
        let seen = apis(&script);
        let produce_at = seen.iter().position(|a| *a == ApiKey::Produce).unwrap();
        let adds: Vec<usize> = seen
            .iter()
            .enumerate()
            .filter(|(_, a)| **a == ApiKey::AddPartitionsToTxn)
            .map(|(i, _)| i)
            .collect();
        assert_eq!(adds.len(), 2, "retried after CONCURRENT_TRANSACTIONS: {seen:?}");
        assert!(adds[1] < produce_at, "added before produced: {seen:?}");
        let end_at = seen.iter().position(|a| *a == ApiKey::EndTxn).unwrap();
        assert!(produce_at < end_at, "{seen:?}");
        let produce = &script.requests::<ProduceRequest>()[0];
        assert_eq!(produce.transactional_id.as_deref(), Some("tx"));
        let batch = produce.topic_data[0].partition_data[0].records.clone().unwrap();
        let info = records::decode(&batch, &records::DecodeLimits::default()).unwrap();
        assert!(
            !info.transactional().is_empty(),
            "the batch has the transactional attribute"
        );
    }

    #[test]
    fn a_partition_the_coordinator_refuses_makes_the_transaction_abortable_and_abort_recovers() {
        let script = script();
        script.push::<AddPartitionsToTxnRequest>(Answer::Reply(one_partition_answer(
            0,
            KafkaCode::TopicAuthorizationFailed,
        )));
        let mut p = producer(&script);
        p.init_transactions(CALL).unwrap();
        p.begin_transaction().unwrap();
        let lost = p.send(ProducerRecord::new("t", "v").partition(0)).unwrap();
        let e = p.commit_transaction(CALL).unwrap_err();
        match &e {
            Error::Transaction {
                action: TransactionAction::Abort,
                cause,
                ..
            } => assert!(
                matches!(&**cause, Error::Authorization { resource: Resource::Topic(t), .. } if t == "t"),
                "{cause:?}"
            ),
            other => panic!("{other:?}"),
        }
        assert!(script.requests::<EndTxnRequest>().is_empty(), "nothing committed");
        p.abort_transaction(CALL).unwrap();
        assert!(
            lost.wait().is_err(),
            "the record of the aborted transaction failed"
        );
        // The producer goes on.
        p.begin_transaction().unwrap();
        let ok = p.send(ProducerRecord::new("t", "w").partition(0)).unwrap();
        p.commit_transaction(CALL).unwrap();
        assert!(ok.wait().is_ok());
    }

    #[test]
    fn a_fenced_producer_can_do_nothing_more_and_says_why() {
        let script = script();
        script.push::<EndTxnRequest>(Answer::Reply(EndTxnResponse {
            error_code: KafkaCode::ProducerFenced.code(),
            ..Default::default()
        }));
        let mut p = producer(&script);
        p.init_transactions(CALL).unwrap();
        p.begin_transaction().unwrap();
        p.send(ProducerRecord::new("t", "v")).unwrap();
        let e = p.commit_transaction(CALL).unwrap_err();
        assert!(
            matches!(
                e,
                Error::Transaction {
                    action: TransactionAction::Close,
                    ..
                }
            ),
            "{e:?}"
        );
        assert!(
            e.to_string()
                .contains("another producer with the same transactional.id"),
            "{e}"
        );
        for e in [
            p.begin_transaction().unwrap_err(),
            p.abort_transaction(CALL).unwrap_err(),
            p.send(ProducerRecord::new("t", "x")).unwrap_err(),
        ] {
            assert!(
                matches!(
                    e,
                    Error::Transaction {
                        action: TransactionAction::Close,
                        ..
                    }
                ),
                "{e:?}"
            );
        }
    }

    #[test]
    fn a_commit_that_runs_out_of_time_continues_when_called_again() {
        let script = script();
        // The coordinator is slower than the first call's bound.
        script.push::<EndTxnRequest>(Answer::Delayed(
            Duration::from_millis(900),
            EndTxnResponse::default(),
        ));
        let mut p = producer(&script);
        p.init_transactions(CALL).unwrap();
        p.begin_transaction().unwrap();
        p.send(ProducerRecord::new("t", "v")).unwrap();
        let started = Instant::now();
        let e = p.commit_transaction(Duration::from_millis(300)).unwrap_err();
        assert!(matches!(e, Error::Timeout { .. }), "{e:?}");
        assert!(started.elapsed() < Duration::from_millis(300) + crate::deadline::LOAD_MARGIN);
        let e = p.begin_transaction().unwrap_err();
        assert!(e.to_string().contains("call commit_transaction again"), "{e}");
        p.commit_transaction(CALL).unwrap();
        p.begin_transaction().unwrap();
    }

    #[test]
    fn an_abort_after_a_lost_record_gets_a_new_epoch_so_sequences_restart() {
        let script = script();
        script.push::<ProduceRequest>(Answer::Reply(ProduceResponse {
            responses: vec![TopicProduceResponse {
                name: "t".into(),
                partition_responses: vec![PartitionProduceResponse {
                    index: 0,
                    error_code: KafkaCode::InvalidRecord.code(),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }));
        let mut p = producer(&script);
        p.init_transactions(CALL).unwrap();
        p.begin_transaction().unwrap();
        p.send(ProducerRecord::new("t", "v").partition(0)).unwrap();
        let e = p.commit_transaction(CALL).unwrap_err();
        assert!(
            matches!(
                e,
                Error::Transaction {
                    action: TransactionAction::Abort,
                    ..
                }
            ),
            "{e:?}"
        );
        p.abort_transaction(CALL).unwrap();
        let inits = script.requests::<InitProducerIdRequest>();
        assert_eq!(inits.len(), 2, "the abort asked for a new epoch");
        assert_eq!(
            (inits[1].producer_id, inits[1].producer_epoch),
            (7, 1),
            "naming the current one"
        );
        p.begin_transaction().unwrap();
        p.send(ProducerRecord::new("t", "w").partition(0)).unwrap();
        p.commit_transaction(CALL).unwrap();
        let last = script.requests::<ProduceRequest>().pop().unwrap();
        let batch = last.topic_data[0].partition_data[0].records.clone().unwrap();
        let info = records::decode(&batch, &records::DecodeLimits::default()).unwrap();
        let header = info.batches[0];
        assert_eq!(
            (header.producer_epoch, header.base_sequence),
            (2, 0),
            "{header:?}"
        );
    }

    #[test]
    fn protocol_v2_adds_partitions_and_groups_implicitly_and_takes_the_epoch_each_end_gives() {
        let script = script();
        script.feature("transaction.version", 2);
        let mut epoch = 1;
        script.on::<EndTxnRequest>(move |_, _| {
            epoch += 1;
            Answer::Reply(EndTxnResponse {
                producer_id: 7,
                producer_epoch: epoch,
                ..Default::default()
            })
        });
        script.on::<crate::protocol::messages::TxnOffsetCommitRequest>(|_, _| {
            Answer::Reply(crate::protocol::messages::TxnOffsetCommitResponse::default())
        });
        let mut p = producer(&script);
        p.init_transactions(CALL).unwrap();
        let (group, offsets) = group_and_offsets(Some("i"));
        for _ in 0..2 {
            p.begin_transaction().unwrap();
            p.send(ProducerRecord::new("t", "v").partition(0)).unwrap();
            p.send_offsets_to_transaction(&offsets, &group, CALL).unwrap();
            p.commit_transaction(CALL).unwrap();
        }
        let seen = script.seen();
        let apis: Vec<ApiKey> = seen.iter().map(|s| s.api).collect();
        assert!(!apis.contains(&ApiKey::AddPartitionsToTxn), "{apis:?}");
        assert!(!apis.contains(&ApiKey::AddOffsetsToTxn), "{apis:?}");
        let version = |api| seen.iter().find(|s| s.api == api).map(|s| s.version);
        assert_eq!(version(ApiKey::Produce), Some(12));
        assert_eq!(version(ApiKey::EndTxn), Some(5));
        assert_eq!(version(ApiKey::TxnOffsetCommit), Some(5));
        // The second transaction's batch carries the epoch the first EndTxn handed out, from
        // sequence 0.
        let produced = script.requests::<ProduceRequest>();
        let header = |i: usize| {
            let batch = produced[i].topic_data[0].partition_data[0]
                .records
                .clone()
                .unwrap();
            records::decode(&batch, &records::DecodeLimits::default())
                .unwrap()
                .batches[0]
        };
        assert_eq!((header(0).producer_epoch, header(0).base_sequence), (1, 0));
        assert_eq!((header(1).producer_epoch, header(1).base_sequence), (2, 0));
    }

    #[test]
    fn after_end_txn_v2s_new_epoch_five_batches_of_a_partition_go_out_before_the_first_answer() {
        let script = script();
        script.feature("transaction.version", 2);
        script.on::<EndTxnRequest>(|_, _| {
            Answer::Reply(EndTxnResponse {
                producer_id: 7,
                producer_epoch: 2,
                ..Default::default()
            })
        });
        // The first Produce of the second epoch is answered late; the handler notes, for each
        // later one, whether it came before that answer could be read.
        let first_answer_at: Arc<std::sync::Mutex<Option<Instant>>> = Arc::default();
        let before_first_answer: Arc<std::sync::Mutex<Vec<bool>>> = Arc::default();
        let (at, before) = (Arc::clone(&first_answer_at), Arc::clone(&before_first_answer));
        script.on::<ProduceRequest>(move |req, _| {
            let part = &req.topic_data[0].partition_data[0];
            let batch = part.records.clone().unwrap();
            let header = records::decode(&batch, &records::DecodeLimits::default())
                .unwrap()
                .batches[0];
            let answer = ProduceResponse {
                responses: vec![TopicProduceResponse {
                    name: req.topic_data[0].name.clone(),
                    partition_responses: vec![PartitionProduceResponse {
                        index: part.index,
                        base_offset: 0,
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
                ..Default::default()
            };
            if header.producer_epoch < 2 {
                return Answer::Reply(answer);
            }
            let mut at = at.lock().unwrap();
            match *at {
                None => {
                    *at = Some(crate::deadline::after(SLOW_ANSWER));
                    Answer::Delayed(SLOW_ANSWER, answer)
                }
                Some(t) => {
                    before.lock().unwrap().push(Instant::now() < t);
                    Answer::Reply(answer)
                }
            }
        });
        let mut p = script
            .client(
                Client::builder()
                    .bootstrap_servers("b0:9092")
                    .retry_backoff(Duration::from_millis(1)),
            )
            .unwrap()
            .producer()
            .transactional_id("tx")
            .linger(Duration::ZERO)
            // One record a batch.
            .batch_size(1)
            .build()
            .unwrap();
        p.init_transactions(CALL).unwrap();
        // The first epoch writes the partition (one batch at a time until its first answer).
        p.begin_transaction().unwrap();
        p.send(ProducerRecord::new("t", "a").partition(0)).unwrap();
        p.commit_transaction(CALL).unwrap();
        p.begin_transaction().unwrap();
        for v in ["b", "c", "d", "e", "f"] {
            p.send(ProducerRecord::new("t", v).partition(0)).unwrap();
        }
        p.commit_transaction(CALL).unwrap();
        let before = before_first_answer.lock().unwrap().clone();
        assert_eq!(
            before,
            vec![true; 4],
            "the 4 batches after the first of the new epoch were sent before its answer"
        );
        let produced = script.requests::<ProduceRequest>();
        let sequences: Vec<(i16, i32)> = produced
            .iter()
            .map(|r| {
                let batch = r.topic_data[0].partition_data[0].records.clone().unwrap();
                let h = records::decode(&batch, &records::DecodeLimits::default())
                    .unwrap()
                    .batches[0];
                (h.producer_epoch, h.base_sequence)
            })
            .collect();
        assert_eq!(
            sequences,
            vec![(1, 0), (2, 0), (2, 1), (2, 2), (2, 3), (2, 4)],
            "in order, from sequence 0 of the new epoch"
        );
    }

    #[test]
    fn a_commit_sends_what_is_pending_at_once_whatever_linger_says() {
        let script = script();
        let mut p = script
            .client(Client::builder().bootstrap_servers("b0:9092"))
            .unwrap()
            .producer()
            .transactional_id("tx")
            // Far beyond the commit's own bound: only a commit that ignores it can succeed.
            .linger(Duration::from_secs(3600))
            .build()
            .unwrap();
        p.init_transactions(CALL).unwrap();
        for _ in 0..2 {
            p.begin_transaction().unwrap();
            let h = p.send(ProducerRecord::new("t", "v").partition(0)).unwrap();
            p.commit_transaction(CALL).unwrap();
            assert!(h.wait().is_ok());
        }
        assert_eq!(script.requests::<EndTxnRequest>().len(), 2);
    }

    #[test]
    fn a_send_to_a_known_topic_takes_the_shared_lock_once() {
        let script = script();
        let mut p = producer(&script);
        p.init_transactions(CALL).unwrap();
        p.begin_transaction().unwrap();
        // The topic's metadata and the partition's place in the transaction come first.
        p.send(ProducerRecord::new("t", "v").partition(0)).unwrap();
        let before = super::super::state::locks_taken();
        p.send(ProducerRecord::new("t", "w").partition(0)).unwrap();
        assert_eq!(
            super::super::state::locks_taken() - before,
            1,
            "the state check, the topic lookup and the append under one lock"
        );
        p.commit_transaction(CALL).unwrap();
        // The idempotent producer's send too.
        let mut p = script
            .client(Client::builder().bootstrap_servers("b0:9092"))
            .unwrap()
            .producer()
            .build()
            .unwrap();
        p.send(ProducerRecord::new("t", "v").partition(0)).unwrap();
        let before = super::super::state::locks_taken();
        p.send(ProducerRecord::new("t", "w").partition(0)).unwrap();
        assert_eq!(super::super::state::locks_taken() - before, 1);
        p.flush().unwrap();
    }

    #[test]
    fn protocol_v1_keeps_produce_end_txn_and_txn_offset_commit_below_the_v2_versions() {
        let script = script();
        script.on::<crate::protocol::messages::TxnOffsetCommitRequest>(|_, _| {
            Answer::Reply(crate::protocol::messages::TxnOffsetCommitResponse::default())
        });
        let mut p = producer(&script);
        p.init_transactions(CALL).unwrap();
        let (group, offsets) = group_and_offsets(None);
        p.begin_transaction().unwrap();
        p.send(ProducerRecord::new("t", "v").partition(0)).unwrap();
        p.send_offsets_to_transaction(&offsets, &group, CALL).unwrap();
        p.commit_transaction(CALL).unwrap();
        let seen = script.seen();
        let version = |api| seen.iter().find(|s| s.api == api).map(|s| s.version);
        assert_eq!(version(ApiKey::Produce), Some(11));
        assert_eq!(version(ApiKey::EndTxn), Some(4));
        assert_eq!(version(ApiKey::TxnOffsetCommit), Some(4));
        assert_eq!(version(ApiKey::AddPartitionsToTxn), Some(3));
        assert!(version(ApiKey::AddOffsetsToTxn).is_some());
    }

    #[test]
    fn no_call_waits_longer_than_its_timeout_for_an_unreachable_cluster() {
        let script = script();
        script.refuse_to("b0:9092", true);
        let mut p = producer(&script);
        let bound = Duration::from_millis(300);
        let started = Instant::now();
        let e = p.init_transactions(bound).unwrap_err();
        assert!(
            started.elapsed() < bound + crate::deadline::LOAD_MARGIN,
            "{:?}",
            started.elapsed()
        );
        assert!(matches!(e, Error::Timeout { .. }), "{e:?}");
        assert!(e.to_string().contains("refused"), "the cause is kept: {e}");
    }

    #[test]
    fn brokers_too_old_are_named_before_anything_is_sent() {
        let script = script();
        script.version_range(ApiKey::AddPartitionsToTxn, None);
        let mut p = producer(&script);
        let e = p.init_transactions(CALL).unwrap_err();
        assert!(matches!(e, Error::MissingCapability { .. }), "{e:?}");
        assert!(e.to_string().contains("0.11"), "{e}");

        let script = self::script();
        script.version_range(ApiKey::TxnOffsetCommit, Some(crate::VersionRange::new(0, 2)));
        let mut p = producer(&script);
        p.init_transactions(CALL).unwrap();
        p.begin_transaction().unwrap();
        let group = ConsumerGroupMetadata {
            group_id: "g".into(),
            generation_id: 1,
            member_id: "m".into(),
            group_instance_id: None,
        };
        let e = p
            .send_offsets_to_transaction(&BTreeMap::new(), &group, CALL)
            .unwrap_err();
        assert!(matches!(e, Error::MissingCapability { .. }), "{e:?}");
        assert!(e.to_string().contains("2.5"), "{e}");
        assert!(script.requests::<AddOffsetsToTxnRequest>().is_empty());
    }
}
