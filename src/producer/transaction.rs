//! The transactional producer (KIP-98, KIP-447) as pure state and decisions: which call is
//! allowed in which state, which partitions the transaction coordinator has been told about,
//! what each coordinator answer means for the application, and the requests. No sockets, no
//! threads: `transactional` (the caller's side) and the sender thread do the I/O.
//!
//! Lifecycle, as Java's `TransactionManager` and librdkafka have it:
//!
//! ```text
//! Uninitialized --init_transactions--> Ready --begin--> InTransaction
//! InTransaction --commit_transaction--> Committing --EndTxn--> Ready
//! InTransaction | Abortable --abort_transaction--> Aborting --EndTxn--> Ready
//! InTransaction --a batch or an offset commit fails--> Abortable
//! any --fenced, not authorized, state lost--> Fatal (every call fails)
//! ```
//!
//! A call that runs out of time leaves the state where it was (Committing, Aborting,
//! Initializing): calling it again picks up where it stopped, as Java's and librdkafka's do, so
//! a timeout never leaves a transaction half-ended without the application knowing.

use super::idempotence::ProducerIdEpoch;
use crate::error::{Error, TransactionAction};
use crate::group::TopicPartition;
use crate::protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use crate::protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use crate::protocol::messages::{
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, EndTxnRequest,
    InitProducerIdRequest, TxnOffsetCommitRequest, TxnOffsetCommitResponse,
};
use crate::protocol::ApiKey;
use crate::{ConsumerGroupMetadata, KafkaCode, OffsetAndMetadata};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

/// Where the transactional producer stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// `init_transactions` has not succeeded yet.
    Uninitialized,
    /// Between transactions.
    Ready,
    /// `begin_transaction` was called; records and offsets may be added.
    InTransaction,
    /// `commit_transaction` started: flushing, then EndTxn(commit).
    Committing,
    /// `abort_transaction` started: EndTxn(abort).
    Aborting,
    /// The transaction cannot commit; only `abort_transaction` is allowed.
    Abortable,
    /// The producer can do nothing more.
    Fatal,
}

impl Phase {
    /// How [`Error::TransactionState`] names it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Phase::Uninitialized => "not initialized (call init_transactions first)",
            Phase::Ready => "between transactions (call begin_transaction first)",
            Phase::InTransaction => "in a transaction",
            Phase::Committing => "committing a transaction (call commit_transaction again)",
            Phase::Aborting => "aborting a transaction (call abort_transaction again)",
            Phase::Abortable => "in a transaction that must be aborted",
            Phase::Fatal => "failed for good",
        }
    }
}

/// A transactional producer's public call, for [`Transaction::check`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Call {
    Init,
    Begin,
    Send,
    SendOffsets,
    Commit,
    Abort,
}

impl Call {
    fn name(self) -> &'static str {
        match self {
            Call::Init => "init_transactions",
            Call::Begin => "begin_transaction",
            Call::Send => "send",
            Call::SendOffsets => "send_offsets_to_transaction",
            Call::Commit => "commit_transaction",
            Call::Abort => "abort_transaction",
        }
    }
}

/// Whether the coordinator knows a partition is in the transaction (AddPartitionsToTxn).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Added {
    /// Not yet asked for.
    No,
    /// An AddPartitionsToTxn naming it is in flight.
    Adding,
    /// Added: its batches may be sent.
    Yes,
}

/// What a coordinator's answer code means for the transactional producer (KIP-1050's
/// categories, plus the coordinator lookup).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reaction {
    /// Done.
    Ok,
    /// Send again after `retry.backoff.ms`, within the call's timeout.
    Retry,
    /// The coordinator moved or is not up: look it up again, then send again.
    FindCoordinator,
    /// The transaction must be aborted.
    Abortable,
    /// The producer is finished.
    Fatal,
}

/// How the transactional producer reacts to `code` from `api` (InitProducerId,
/// AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn, or Produce for a
/// transactional batch). One row per case:
///
/// | code | api | reaction |
/// |---|---|---|
/// | NONE | | Ok |
/// | NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE | | FindCoordinator |
/// | COORDINATOR_LOAD_IN_PROGRESS, CONCURRENT_TRANSACTIONS, any retriable code | | Retry |
/// | UNKNOWN_TOPIC_OR_PARTITION (retriable) | | Retry |
/// | PRODUCER_FENCED, INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED | | Fatal |
/// | TRANSACTIONAL_ID_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED | | Fatal |
/// | INVALID_TXN_STATE, INVALID_TRANSACTION_TIMEOUT, UNSUPPORTED_VERSION, UNSUPPORTED_FOR_MESSAGE_FORMAT | | Fatal |
/// | TOPIC_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED, OPERATION_NOT_ATTEMPTED, TRANSACTION_ABORTABLE | | Abortable |
/// | UNKNOWN_PRODUCER_ID, INVALID_PRODUCER_ID_MAPPING | | Abortable |
/// | UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, FENCED_INSTANCE_ID, REBALANCE_IN_PROGRESS, STALE_MEMBER_EPOCH, FENCED_MEMBER_EPOCH | TxnOffsetCommit | Abortable (the consumer is no longer the group's current member: a zombie) |
/// | any other code | InitProducerId, EndTxn | Fatal |
/// | any other code | the others | Abortable |
pub(crate) fn react(api: ApiKey, code: KafkaCode) -> Reaction {
    use KafkaCode as K;
    match code {
        K::None => Reaction::Ok,
        K::NotCoordinator | K::CoordinatorNotAvailable => Reaction::FindCoordinator,
        K::ProducerFenced
        | K::InvalidProducerEpoch
        | K::TransactionCoordinatorFenced
        | K::TransactionalIdAuthorizationFailed
        | K::ClusterAuthorizationFailed
        | K::InvalidTxnState
        | K::InvalidTransactionTimeout
        | K::UnsupportedVersion
        | K::UnsupportedForMessageFormat => Reaction::Fatal,
        K::TopicAuthorizationFailed
        | K::GroupAuthorizationFailed
        | K::OperationNotAttempted
        | K::TransactionAbortable
        | K::UnknownProducerId
        | K::InvalidProducerIdMapping => Reaction::Abortable,
        K::UnknownMemberId
        | K::IllegalGeneration
        | K::FencedInstanceId
        | K::RebalanceInProgress
        | K::StaleMemberEpoch
        | K::FencedMemberEpoch
            if api == ApiKey::TxnOffsetCommit =>
        {
            Reaction::Abortable
        }
        c if c.is_retriable() || c == K::ConcurrentTransactions || c == K::CoordinatorLoadInProgress => {
            Reaction::Retry
        }
        _ if matches!(api, ApiKey::InitProducerId | ApiKey::EndTxn) => Reaction::Fatal,
        _ => Reaction::Abortable,
    }
}

/// The transactional producer's state, kept with the rest of the producer's shared state so
/// that the sender threads see which partitions may be sent.
#[derive(Debug)]
pub(crate) struct Transaction {
    /// `transactional.id`.
    pub(crate) id: String,
    phase: Phase,
    /// Why the phase is Abortable or Fatal.
    error: Option<Arc<Error>>,
    /// The partitions written in the current transaction, by topic.
    partitions: HashMap<String, HashMap<i32, Added>>,
    /// Groups whose offsets the coordinator was told about (AddOffsetsToTxn).
    groups: BTreeSet<String>,
    /// The transaction coordinator, once found.
    pub(crate) coordinator: Option<i32>,
    /// A batch of this transaction failed for good: committing would lose it.
    pub(crate) failed_batches: bool,
    /// Transaction protocol v2 (KIP-890): Produce v12 adds a partition to the transaction
    /// itself, TxnOffsetCommit v5 the group, and EndTxn v5 bumps the epoch at every end.
    pub(crate) v2: bool,
}

impl Transaction {
    /// A producer with `transactional.id` `id`, not initialized.
    pub(crate) fn new(id: String) -> Self {
        Transaction {
            id,
            phase: Phase::Uninitialized,
            error: None,
            partitions: HashMap::new(),
            groups: BTreeSet::new(),
            coordinator: None,
            failed_batches: false,
            v2: false,
        }
    }

    /// The current phase.
    pub(crate) fn phase(&self) -> Phase {
        self.phase
    }

    /// The error a call gets in the Abortable or Fatal phase.
    fn error_now(&self) -> Option<Error> {
        let action = match self.phase {
            Phase::Abortable => TransactionAction::Abort,
            Phase::Fatal => TransactionAction::Close,
            _ => return None,
        };
        Some(Error::Transaction {
            transactional_id: self.id.clone(),
            action,
            cause: self.error.clone().unwrap_or_else(|| Arc::new(Error::Closed)),
        })
    }

    /// Whether `call` is allowed now; the error it gets otherwise.
    pub(crate) fn check(&self, call: Call) -> Result<(), Error> {
        use Phase as P;
        let ok = match (self.phase, call) {
            (P::Fatal, _) => false,
            (P::Uninitialized, Call::Init) => true,
            (P::Ready, Call::Begin) => true,
            (P::InTransaction, Call::Send | Call::SendOffsets | Call::Commit | Call::Abort) => true,
            (P::Committing, Call::Commit) => true,
            (P::Aborting, Call::Abort) => true,
            (P::Abortable, Call::Abort) => true,
            _ => false,
        };
        if ok {
            return Ok(());
        }
        let abortable_call = matches!(call, Call::Send | Call::SendOffsets | Call::Commit);
        match self.error_now() {
            Some(e) if self.phase == P::Fatal || abortable_call => Err(e),
            _ => Err(Error::TransactionState {
                call: call.name(),
                state: self.phase.name(),
            }),
        }
    }

    /// Moves to `phase` (a call that passed [`check`](Self::check) started or finished).
    pub(crate) fn set_phase(&mut self, phase: Phase) {
        if self.phase != Phase::Fatal {
            self.phase = phase;
        }
        if phase == Phase::Ready {
            self.partitions.clear();
            self.groups.clear();
            self.error = None;
            self.failed_batches = false;
        }
    }

    /// The transaction cannot commit, because of `e` (the first cause is kept).
    pub(crate) fn abortable(&mut self, e: Arc<Error>) {
        if matches!(self.phase, Phase::InTransaction | Phase::Committing) {
            self.phase = Phase::Abortable;
            self.error.get_or_insert(e);
        }
    }

    /// The producer is finished, because of `e`.
    pub(crate) fn fatal(&mut self, e: Arc<Error>) {
        if self.phase != Phase::Fatal {
            self.phase = Phase::Fatal;
            self.error = Some(e);
        }
    }

    /// Notes that a record goes to `tp` in this transaction; true if the coordinator must be
    /// told (a partition new to the transaction).
    pub(crate) fn add_partition(&mut self, topic: &str, partition: i32) -> bool {
        let by_topic = match self.partitions.get_mut(topic) {
            Some(t) => t,
            None => self.partitions.entry(topic.to_string()).or_default(),
        };
        if by_topic.contains_key(&partition) {
            return false;
        }
        // Under protocol v2 the broker adds the partition when its first batch arrives.
        by_topic.insert(partition, if self.v2 { Added::Yes } else { Added::No });
        !self.v2
    }

    /// Whether the partition's batches may be sent: the coordinator knows it is in the
    /// transaction.
    pub(crate) fn may_send(&self, topic: &str, partition: i32) -> bool {
        self.partitions
            .get(topic)
            .and_then(|t| t.get(&partition))
            .is_some_and(|a| *a == Added::Yes)
    }

    /// The partitions to add now (marked as being added), sorted.
    pub(crate) fn take_to_add(&mut self) -> Vec<TopicPartition> {
        let mut out = Vec::new();
        for (topic, ps) in &mut self.partitions {
            for (p, added) in ps.iter_mut() {
                if *added == Added::No {
                    *added = Added::Adding;
                    out.push(TopicPartition::new(topic.clone(), *p));
                }
            }
        }
        out.sort();
        out
    }

    /// Whether partitions wait to be added.
    pub(crate) fn has_to_add(&self) -> bool {
        self.partitions
            .values()
            .flat_map(|t| t.values())
            .any(|a| *a == Added::No)
    }

    /// The outcome of an AddPartitionsToTxn for `tps`: added, or back to be asked again.
    pub(crate) fn added(&mut self, tps: &[TopicPartition], ok: bool) {
        for tp in tps {
            if let Some(a) = self
                .partitions
                .get_mut(&tp.topic)
                .and_then(|t| t.get_mut(&tp.partition))
            {
                *a = if ok { Added::Yes } else { Added::No };
            }
        }
    }

    /// Whether every partition of the transaction is added.
    #[cfg(test)]
    pub(crate) fn all_added(&self) -> bool {
        self.partitions
            .values()
            .flat_map(|t| t.values())
            .all(|a| *a == Added::Yes)
    }

    /// Whether the coordinator knows of the transaction (a partition or a group was added):
    /// without that there is nothing for EndTxn to end.
    pub(crate) fn started(&self) -> bool {
        !self.groups.is_empty()
            || self
                .partitions
                .values()
                .flat_map(|t| t.values())
                .any(|a| *a != Added::No)
    }

    /// Whether the coordinator already knows `group`'s offsets are in the transaction.
    pub(crate) fn has_group(&self, group: &str) -> bool {
        self.groups.contains(group)
    }

    /// AddOffsetsToTxn for `group` succeeded.
    pub(crate) fn group_added(&mut self, group: &str) {
        self.groups.insert(group.to_string());
    }
}

// ---------------------------------------------------------------------------------------------
// Requests and answers.

/// InitProducerId for transactional id `id`: a fresh start (`current` none), or on v3+ naming
/// the current producer id and epoch so that the coordinator bumps that epoch (KIP-360: after
/// an abort that left sequences unknown) instead of handing out a new id.
pub(crate) fn init_request(
    version: i16,
    id: &str,
    timeout_ms: i32,
    current: Option<ProducerIdEpoch>,
) -> InitProducerIdRequest {
    let current = current.filter(|_| version >= 3).unwrap_or(ProducerIdEpoch::NONE);
    InitProducerIdRequest {
        transactional_id: Some(id.into()),
        transaction_timeout_ms: timeout_ms,
        producer_id: current.id,
        producer_epoch: current.epoch,
        ..Default::default()
    }
}

/// AddPartitionsToTxn (client versions 0–3) for `tps`.
pub(crate) fn add_partitions_request(
    id: &str,
    producer: ProducerIdEpoch,
    tps: &[TopicPartition],
) -> AddPartitionsToTxnRequest {
    let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for tp in tps {
        by_topic.entry(&tp.topic).or_default().push(tp.partition);
    }
    AddPartitionsToTxnRequest {
        v3_and_below_transactional_id: id.into(),
        v3_and_below_producer_id: producer.id,
        v3_and_below_producer_epoch: producer.epoch,
        v3_and_below_topics: by_topic
            .into_iter()
            .map(|(name, partitions)| AddPartitionsToTxnTopic {
                name: name.into(),
                partitions: partitions.into(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

/// The worst code of an AddPartitionsToTxn answer (the top-level one, else the first
/// partition error that is not OPERATION_NOT_ATTEMPTED, which only says another partition
/// failed), with the partition it is about.
pub(crate) fn add_partitions_answer(
    resp: &AddPartitionsToTxnResponse,
) -> (KafkaCode, Option<TopicPartition>) {
    let top = KafkaCode::from_code(resp.error_code);
    if top.is_error() {
        return (top, None);
    }
    let mut not_attempted = None;
    for t in &resp.results_by_topic_v3_and_below {
        for p in &t.results_by_partition {
            let code = KafkaCode::from_code(p.partition_error_code);
            let tp = TopicPartition::new(t.name.to_string(), p.partition_index);
            match code {
                KafkaCode::None => {}
                KafkaCode::OperationNotAttempted => {
                    not_attempted.get_or_insert((code, Some(tp)));
                }
                c => return (c, Some(tp)),
            }
        }
    }
    not_attempted.unwrap_or((KafkaCode::None, None))
}

/// AddOffsetsToTxn: the coordinator adds `group`'s offsets partition to the transaction.
pub(crate) fn add_offsets_request(
    id: &str,
    producer: ProducerIdEpoch,
    group: &str,
) -> AddOffsetsToTxnRequest {
    AddOffsetsToTxnRequest {
        transactional_id: id.into(),
        producer_id: producer.id,
        producer_epoch: producer.epoch,
        group_id: group.into(),
        ..Default::default()
    }
}

/// TxnOffsetCommit of `offsets` for the consumer `group` describes (KIP-447 from v3: its
/// generation or member epoch, member id and instance id, so that the group coordinator
/// refuses a member that is no longer current).
pub(crate) fn txn_offset_commit_request(
    id: &str,
    producer: ProducerIdEpoch,
    group: &ConsumerGroupMetadata,
    offsets: &BTreeMap<TopicPartition, OffsetAndMetadata>,
) -> TxnOffsetCommitRequest {
    let mut topics: Vec<TxnOffsetCommitRequestTopic> = Vec::new();
    for (tp, o) in offsets {
        let p = TxnOffsetCommitRequestPartition {
            partition_index: tp.partition,
            committed_offset: o.offset,
            committed_leader_epoch: o.leader_epoch.unwrap_or(-1),
            committed_metadata: Some(o.metadata.as_str().into()),
            ..Default::default()
        };
        match topics.last_mut().filter(|t| t.name == tp.topic) {
            Some(t) => t.partitions.push(p),
            None => topics.push(TxnOffsetCommitRequestTopic {
                name: (&tp.topic).into(),
                partitions: vec![p],
                ..Default::default()
            }),
        }
    }
    TxnOffsetCommitRequest {
        transactional_id: id.into(),
        group_id: (&group.group_id).into(),
        producer_id: producer.id,
        producer_epoch: producer.epoch,
        generation_id_or_member_epoch: group.generation_id,
        member_id: (&group.member_id).into(),
        group_instance_id: group.group_instance_id.as_deref().map(Into::into),
        topics,
        ..Default::default()
    }
}

/// The first error of a TxnOffsetCommit answer, with its partition.
pub(crate) fn txn_offset_commit_answer(
    resp: &TxnOffsetCommitResponse,
) -> (KafkaCode, Option<TopicPartition>) {
    for t in &resp.topics {
        for p in &t.partitions {
            let code = KafkaCode::from_code(p.error_code);
            if code.is_error() {
                return (
                    code,
                    Some(TopicPartition::new(t.name.to_string(), p.partition_index)),
                );
            }
        }
    }
    (KafkaCode::None, None)
}

/// EndTxn: commit or abort.
pub(crate) fn end_request(id: &str, producer: ProducerIdEpoch, commit: bool) -> EndTxnRequest {
    EndTxnRequest {
        transactional_id: id.into(),
        producer_id: producer.id,
        producer_epoch: producer.epoch,
        committed: commit,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::messages::add_partitions_to_txn_response::{
        AddPartitionsToTxnPartitionResult, AddPartitionsToTxnTopicResult,
    };

    fn txn() -> Transaction {
        Transaction::new("tx".into())
    }

    fn in_phase(phase: Phase) -> Transaction {
        let mut t = txn();
        t.phase = phase;
        t
    }

    #[test]
    fn each_call_is_allowed_in_its_phases_only() {
        use Call::*;
        use Phase::*;
        let allowed: &[(Phase, &[Call])] = &[
            (Uninitialized, &[Init]),
            (Ready, &[Begin]),
            (InTransaction, &[Send, SendOffsets, Commit, Abort]),
            (Committing, &[Commit]),
            (Aborting, &[Abort]),
            (Abortable, &[Abort]),
            (Fatal, &[]),
        ];
        for (phase, calls) in allowed {
            let t = in_phase(*phase);
            for call in [Init, Begin, Send, SendOffsets, Commit, Abort] {
                let got = t.check(call);
                assert_eq!(got.is_ok(), calls.contains(&call), "{phase:?} {call:?}: {got:?}");
            }
        }
    }

    #[test]
    fn a_refused_call_names_itself_and_the_state_or_the_error_to_act_on() {
        let e = in_phase(Phase::Ready).check(Call::Send).unwrap_err();
        assert!(matches!(e, Error::TransactionState { call: "send", .. }), "{e:?}");
        assert!(e.to_string().contains("begin_transaction"), "{e}");

        let mut t = in_phase(Phase::InTransaction);
        t.abortable(Arc::new(Error::Kafka {
            api: ApiKey::Produce,
            code: KafkaCode::TopicAuthorizationFailed,
            message: None,
        }));
        for call in [Call::Send, Call::SendOffsets, Call::Commit] {
            let e = t.check(call).unwrap_err();
            assert!(
                matches!(
                    e,
                    Error::Transaction {
                        action: TransactionAction::Abort,
                        ..
                    }
                ),
                "{call:?}: {e:?}"
            );
        }
        assert!(t.check(Call::Abort).is_ok());
        assert!(matches!(
            t.check(Call::Begin),
            Err(Error::TransactionState { .. })
        ));

        t.fatal(Arc::new(Error::Kafka {
            api: ApiKey::EndTxn,
            code: KafkaCode::ProducerFenced,
            message: None,
        }));
        let e = t.check(Call::Abort).unwrap_err();
        assert!(matches!(
            e,
            Error::Transaction {
                action: TransactionAction::Close,
                ..
            }
        ));
        assert!(e.to_string().contains("fenced"), "{e}");
        t.set_phase(Phase::Ready);
        assert_eq!(t.phase(), Phase::Fatal, "nothing leaves Fatal");
    }

    #[test]
    fn reaction_table_rows() {
        use KafkaCode as K;
        use Reaction as R;
        let rows = [
            (ApiKey::EndTxn, K::None, R::Ok),
            (ApiKey::EndTxn, K::NotCoordinator, R::FindCoordinator),
            (
                ApiKey::AddPartitionsToTxn,
                K::CoordinatorNotAvailable,
                R::FindCoordinator,
            ),
            (ApiKey::EndTxn, K::ConcurrentTransactions, R::Retry),
            (ApiKey::InitProducerId, K::CoordinatorLoadInProgress, R::Retry),
            (ApiKey::AddPartitionsToTxn, K::UnknownTopicOrPartition, R::Retry),
            (ApiKey::InitProducerId, K::ProducerFenced, R::Fatal),
            (ApiKey::EndTxn, K::InvalidProducerEpoch, R::Fatal),
            (
                ApiKey::AddOffsetsToTxn,
                K::TransactionalIdAuthorizationFailed,
                R::Fatal,
            ),
            (ApiKey::EndTxn, K::InvalidTxnState, R::Fatal),
            (ApiKey::InitProducerId, K::InvalidTransactionTimeout, R::Fatal),
            (
                ApiKey::AddPartitionsToTxn,
                K::TopicAuthorizationFailed,
                R::Abortable,
            ),
            (ApiKey::TxnOffsetCommit, K::GroupAuthorizationFailed, R::Abortable),
            (ApiKey::AddPartitionsToTxn, K::OperationNotAttempted, R::Abortable),
            (ApiKey::Produce, K::TransactionAbortable, R::Abortable),
            (ApiKey::Produce, K::UnknownProducerId, R::Abortable),
            (ApiKey::TxnOffsetCommit, K::IllegalGeneration, R::Abortable),
            (ApiKey::TxnOffsetCommit, K::UnknownMemberId, R::Abortable),
            (ApiKey::TxnOffsetCommit, K::FencedInstanceId, R::Abortable),
            (ApiKey::TxnOffsetCommit, K::StaleMemberEpoch, R::Abortable),
            (ApiKey::TxnOffsetCommit, K::RebalanceInProgress, R::Abortable),
            (ApiKey::EndTxn, K::UnknownServerError, R::Fatal),
            (ApiKey::AddOffsetsToTxn, K::UnknownServerError, R::Abortable),
        ];
        for (api, code, want) in rows {
            assert_eq!(react(api, code), want, "{} from {}", code.name(), api.name());
        }
    }

    #[test]
    fn partitions_are_sent_only_once_added_and_forgotten_after_the_transaction() {
        let mut t = in_phase(Phase::InTransaction);
        let (a0, a1, b0) = (
            TopicPartition::new("a", 0),
            TopicPartition::new("a", 1),
            TopicPartition::new("b", 0),
        );
        let add = |t: &mut Transaction, tp: &TopicPartition| t.add_partition(&tp.topic, tp.partition);
        assert!(add(&mut t, &a1) && add(&mut t, &a0) && add(&mut t, &b0));
        assert!(!add(&mut t, &a0), "already in the transaction");
        assert!(!t.may_send("a", 0) && t.has_to_add() && !t.all_added());
        let asked = t.take_to_add();
        assert_eq!(asked, vec![a0.clone(), a1.clone(), b0.clone()]);
        assert!(
            !t.has_to_add() && t.take_to_add().is_empty(),
            "in flight, not asked twice"
        );
        t.added(&asked[..1], true);
        t.added(&asked[1..], false);
        assert!(t.may_send("a", 0) && !t.may_send("a", 1));
        assert_eq!(t.take_to_add(), vec![a1.clone(), b0.clone()], "asked again");
        t.added(&[a1, b0], true);
        assert!(t.all_added());
        t.group_added("g");
        assert!(t.has_group("g"));
        t.set_phase(Phase::Ready);
        assert!(!t.may_send("a", 0) && !t.has_group("g") && t.all_added());
    }

    #[test]
    fn add_partitions_answer_names_the_real_failure_not_the_partitions_left_out() {
        let part = |i, code: KafkaCode| AddPartitionsToTxnPartitionResult {
            partition_index: i,
            partition_error_code: code.code(),
            ..Default::default()
        };
        let resp = AddPartitionsToTxnResponse {
            results_by_topic_v3_and_below: vec![AddPartitionsToTxnTopicResult {
                name: "t".into(),
                results_by_partition: vec![
                    part(0, KafkaCode::OperationNotAttempted),
                    part(1, KafkaCode::TopicAuthorizationFailed),
                ],
                ..Default::default()
            }],
            ..Default::default()
        };
        assert_eq!(
            add_partitions_answer(&resp),
            (
                KafkaCode::TopicAuthorizationFailed,
                Some(TopicPartition::new("t", 1))
            )
        );
        assert_eq!(
            add_partitions_answer(&AddPartitionsToTxnResponse::default()).0,
            KafkaCode::None
        );
    }

    #[test]
    fn requests_carry_the_producer_and_the_group_generation() {
        let pe = ProducerIdEpoch { id: 7, epoch: 3 };
        let init = init_request(4, "tx", 60_000, Some(pe));
        assert_eq!(
            (
                init.transactional_id.as_deref(),
                init.producer_id,
                init.producer_epoch
            ),
            (Some("tx"), 7, 3)
        );
        let init = init_request(2, "tx", 60_000, Some(pe));
        assert_eq!(
            (init.producer_id, init.producer_epoch),
            (-1, -1),
            "v2 cannot name one"
        );
        let add = add_partitions_request(
            "tx",
            pe,
            &[
                TopicPartition::new("a", 1),
                TopicPartition::new("b", 0),
                TopicPartition::new("a", 0),
            ],
        );
        assert_eq!(add.v3_and_below_topics.len(), 2);
        let meta = ConsumerGroupMetadata {
            group_id: "g".into(),
            generation_id: 5,
            member_id: "m-1".into(),
            group_instance_id: Some("i-1".into()),
        };
        let offsets: BTreeMap<_, _> = [(TopicPartition::new("in", 2), OffsetAndMetadata::new(42))].into();
        let c = txn_offset_commit_request("tx", pe, &meta, &offsets);
        assert_eq!(c.generation_id_or_member_epoch, 5);
        assert_eq!(c.member_id.as_str(), "m-1");
        assert_eq!(c.group_instance_id.as_deref(), Some("i-1"));
        assert_eq!(c.topics[0].partitions[0].committed_offset, 42);
        let end = end_request("tx", pe, true);
        assert!(end.committed && end.producer_epoch == 3);
    }
}
