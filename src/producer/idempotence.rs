//! The idempotent producer (KIP-98) as pure state and decisions: no sockets, no threads, no
//! clock. The sender thread does the I/O and asks this module what to send and what an answer
//! means.
//!
//! Lifecycle:
//!
//! 1. **Config** ([`check_config`], before any network call): `enable.idempotence` (on by
//!    default, as in Java since 3.0) with `max.in.flight.requests.per.connection` above
//!    [`MAX_IN_FLIGHT`], `acks` other than all, or `retries=0` is an error when idempotence was
//!    asked for explicitly, and quietly turns it off when it was only the default.
//! 2. **Support** ([`support`], once the broker's ApiVersions are known): InitProducerId and
//!    Produce v3+ (Kafka 0.11+) are needed; otherwise the producer falls back to plain acks and
//!    [`Support::NotIdempotent`] says why, for one log line.
//! 3. **Producer id** ([`init_request`], [`read_init_answer`]): InitProducerId, sent to any
//!    broker (no coordinator without a transactional id), gives a producer id and epoch;
//!    [`Sequences::set_producer`] installs them.
//! 4. **Sequences** ([`Sequences::next_batch`]): each new batch of a partition takes the next
//!    base sequence (wrapping from `i32::MAX` to 0, as the broker counts) and is encoded once
//!    with [`crate::records::encode_with`]. A retry resends the same bytes: the broker knows
//!    a duplicate by producer id, epoch and sequence, and rejects a later sequence until the
//!    earlier one is written, which is what keeps order with up to 5 requests in flight.
//! 5. **Answers** ([`Sequences::on_answer`], applying the table [`on_partition_answer`]): each
//!    Produce partition answer completes, retries or fails its batch, and may ask for an epoch
//!    bump when the broker's view of the sequence has a gap or was lost. A batch refused as
//!    too large is split instead ([`Sequences::split`]): its pieces take its sequence range,
//!    so no gap opens and nothing is bumped.
//! 6. **Epoch bump** ([`Sequences::bump_epoch`], when [`Sequences::bump_required`]): as
//!    Java's client does since Kafka 2.5 (KIP-360), an idempotent producer bumps its epoch
//!    locally: its producer id is its own, and a broker of any version accepts a higher epoch
//!    whose first batch has sequence 0 (InitProducerId naming the current id would not help:
//!    without a transactional id the broker answers with a new id). The partitions that asked have their in-flight batches
//!    renumbered from 0 under the new epoch, and those batches' bytes must be restamped
//!    ([`crate::records::restamp`]) before they are resent: [`Sequences::resend`] gives the
//!    values. Other partitions finish their in-flight batches under the old epoch, then restart
//!    at sequence 0. Only when the epoch is exhausted does the producer need a new id
//!    ([`Bump::NeedProducerId`]): InitProducerId again.
//!
//! A transactional producer ([`Sequences::transactional`]) uses the same table with
//! `transactional` set, where Kafka's reaction differs: fencing is fatal, and a sequence gap is
//! not bumped locally but makes the transaction abort; after the abort the transaction
//! coordinator hands out the next epoch (see `transaction`).

use crate::error::Error;
use crate::net::versions::{self, BrokerVersions};
use crate::producer::Acks;
use crate::protocol::messages::{InitProducerIdRequest, InitProducerIdResponse};
use crate::protocol::ApiKey;
use crate::records::BatchProducer;
use crate::{KafkaCode, Resource};
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::hash::Hash;

/// The most Produce requests an idempotent producer may have in flight per connection: a
/// broker keeps the metadata of the last 5 batches of each producer per partition to spot
/// duplicates, so a sixth could be retried after the broker forgot it.
pub(crate) const MAX_IN_FLIGHT: usize = 5;

/// A producer id and its epoch, as InitProducerId hands them out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct ProducerIdEpoch {
    /// Producer id, -1 for none.
    pub(crate) id: i64,
    /// Epoch, -1 for none.
    pub(crate) epoch: i16,
}

impl ProducerIdEpoch {
    /// No producer id yet (or no longer one).
    pub(crate) const NONE: ProducerIdEpoch = ProducerIdEpoch { id: -1, epoch: -1 };

    /// Whether this is a producer id a broker gave out.
    pub(crate) fn is_valid(&self) -> bool {
        self.id >= 0 && self.epoch >= 0
    }

    /// The header values of a batch of this producer starting at `base_sequence`.
    pub(crate) fn batch(&self, base_sequence: i32) -> BatchProducer {
        BatchProducer {
            id: self.id,
            epoch: self.epoch,
            base_sequence,
            transactional: false,
        }
    }
}

impl fmt::Display for ProducerIdEpoch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "producer id {} epoch {}", self.id, self.epoch)
    }
}

/// The sequence after `seq` once `count` records are written, wrapping from `i32::MAX` to 0 as
/// Kafka's brokers do (`DefaultRecordBatch.incrementSequence`).
pub(crate) fn next_sequence(seq: i32, count: i32) -> i32 {
    // Both are non-negative, so the sum fits in i64 and the result below 2^31.
    ((seq as i64 + count as i64) % (i32::MAX as i64 + 1)) as i32
}

/// Whether sequence `a` comes after `b`, across the wrap: sequences of the batches one
/// producer has in flight on a partition span far less than half the range.
fn is_later(a: i32, b: i32) -> bool {
    let d = (a as i64 - b as i64).rem_euclid(i32::MAX as i64 + 1);
    d != 0 && d < (1 << 30)
}

// ---------------------------------------------------------------------------------------------
// Config and broker support.

/// What the configuration asks for, once checked by [`check_config`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Requested {
    /// Idempotence, if the broker supports it.
    Idempotent,
    /// No idempotence, and why.
    Not(WhyNot),
}

/// Why a producer is not idempotent, for the one log line that says so.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WhyNot {
    /// `enable.idempotence=false`.
    Disabled,
    /// Idempotence was only the default, and another setting excludes it (as Java's client
    /// decides since 3.2): the setting, e.g. `acks`.
    Conflicts(&'static str),
    /// The broker lacks InitProducerId or Produce v3 (Kafka before 0.11).
    BrokerTooOld,
}

impl fmt::Display for WhyNot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WhyNot::Disabled => f.write_str("enable.idempotence=false"),
            WhyNot::Conflicts(p) => write!(
                f,
                "{p} excludes idempotence (enable.idempotence was not set, so it is turned off)"
            ),
            WhyNot::BrokerTooOld => {
                f.write_str("the broker is older than Kafka 0.11 (no InitProducerId or Produce v3)")
            }
        }
    }
}

/// Checks `enable.idempotence` against the settings it needs, as Java's `ProducerConfig` does:
/// `max.in.flight.requests.per.connection` at most [`MAX_IN_FLIGHT`], `acks=all`, and
/// `retries` above 0. `enable_idempotence` is `None` when the application left it at its
/// default (on): a conflict then turns idempotence off instead of failing.
pub(crate) fn check_config(
    enable_idempotence: Option<bool>,
    max_in_flight: usize,
    acks: Acks,
    retries: u32,
) -> Result<Requested, Error> {
    if enable_idempotence == Some(false) {
        return Ok(Requested::Not(WhyNot::Disabled));
    }
    let conflict = if max_in_flight > MAX_IN_FLIGHT {
        Some((
            "max.in.flight.requests.per.connection",
            format!(
                "is {max_in_flight}; the idempotent producer allows at most {MAX_IN_FLIGHT} \
                 (brokers remember 5 batches per producer and partition)"
            ),
        ))
    } else if acks != Acks::All {
        Some(("acks", "must be all for the idempotent producer".to_string()))
    } else if retries == 0 {
        Some((
            "retries",
            "must be above 0 for the idempotent producer".to_string(),
        ))
    } else {
        None
    };
    match (conflict, enable_idempotence) {
        (None, _) => Ok(Requested::Idempotent),
        (Some((property, _)), None) => Ok(Requested::Not(WhyNot::Conflicts(property))),
        (Some((property, problem)), Some(_)) => Err(Error::Config {
            property,
            problem: format!("{problem}, and enable.idempotence=true"),
        }),
    }
}

/// Whether the producer is idempotent with this broker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Support {
    /// Idempotent: get a producer id with InitProducerId at this version.
    Idempotent {
        /// The InitProducerId version to send.
        init_version: i16,
    },
    /// Plain acks, for this reason (log it once).
    NotIdempotent(WhyNot),
}

/// Decides from the configuration and the broker's ApiVersions whether to be idempotent.
/// A broker too old falls back to plain acks (the caller keeps ordering with one request in
/// flight) rather than failing, even when idempotence was asked for explicitly: the issue's
/// choice, which Java's client does not make (it fails the producer).
pub(crate) fn support(requested: Requested, broker: &BrokerVersions) -> Support {
    if let Requested::Not(why) = requested {
        return Support::NotIdempotent(why);
    }
    if versions::check(&versions::IDEMPOTENT_PRODUCER, broker).is_err() {
        return Support::NotIdempotent(WhyNot::BrokerTooOld);
    }
    match versions::pick(ApiKey::InitProducerId, broker, None) {
        Ok(init_version) => Support::Idempotent { init_version },
        Err(_) => Support::NotIdempotent(WhyNot::BrokerTooOld),
    }
}

// ---------------------------------------------------------------------------------------------
// InitProducerId.

/// Why InitProducerId is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum InitPurpose {
    /// A new producer id (first start, or the epoch is exhausted).
    Fresh,
    /// KIP-360: the same producer id with a higher epoch, naming the current ones (v3+). Only
    /// a transactional producer gets that: without a transactional id a broker ignores the
    /// named id and hands out a new one (checked against Kafka 4.4 in
    /// `tests/it/idempotence_codec_tests.rs`), which is why the idempotent producer bumps
    /// locally ([`Sequences::bump_epoch`]). Kept for the transactional producer to come.
    #[cfg_attr(not(test), allow(dead_code))]
    Bump(ProducerIdEpoch),
}

impl InitPurpose {
    /// What a request of `version` can ask: v0–v2 cannot name the current producer, so a bump
    /// there asks for a new id (every sequence restarts at 0 then).
    pub(crate) fn at_version(self, version: i16) -> InitPurpose {
        match self {
            InitPurpose::Bump(_) if version < 3 => InitPurpose::Fresh,
            other => other,
        }
    }
}

/// The InitProducerId request of an idempotent (not transactional) producer at `version`
/// (v0–v5): no transactional id, the transaction timeout Java's client sends for it
/// (`i32::MAX`, unused without a transaction), and on v3+ the producer id and epoch: -1 for a
/// fresh id, the current ones for a KIP-360 bump.
pub(crate) fn init_request(version: i16, purpose: InitPurpose) -> InitProducerIdRequest {
    let current = match purpose.at_version(version) {
        InitPurpose::Fresh => ProducerIdEpoch::NONE,
        InitPurpose::Bump(p) => p,
    };
    InitProducerIdRequest {
        transactional_id: None,
        transaction_timeout_ms: i32::MAX,
        producer_id: current.id,
        producer_epoch: current.epoch,
        ..Default::default()
    }
}

/// Why InitProducerId gave no producer id.
#[derive(Debug)]
pub(crate) enum InitFailure {
    /// Try again after the retry backoff (a broker still loading, electing or allocating id
    /// blocks, or any code Kafka calls retriable).
    Retry(KafkaCode),
    /// The producer cannot be idempotent: fail it with this error.
    Fatal(Error),
}

/// Reads an InitProducerId answer: the producer id and epoch, or what to do about its error.
/// `CLUSTER_AUTHORIZATION_FAILED` means the principal may not have a producer id: an
/// [`Error::Authorization`] on the cluster that names the `IDEMPOTENT_WRITE` ACL.
pub(crate) fn read_init_answer(answer: &InitProducerIdResponse) -> Result<ProducerIdEpoch, InitFailure> {
    let code = KafkaCode::from_code(answer.error_code);
    let fatal = |code| {
        InitFailure::Fatal(Error::Kafka {
            api: ApiKey::InitProducerId,
            code,
            message: None,
        })
    };
    match code {
        KafkaCode::None => {
            let got = ProducerIdEpoch {
                id: answer.producer_id,
                epoch: answer.producer_epoch,
            };
            if got.is_valid() {
                Ok(got)
            } else {
                // A broker that says yes and hands out no id: asking again may reach a sane one.
                Err(InitFailure::Retry(KafkaCode::None))
            }
        }
        KafkaCode::ClusterAuthorizationFailed => Err(InitFailure::Fatal(Error::Authorization {
            api: ApiKey::InitProducerId,
            code,
            resource: Resource::Cluster,
            message: None,
        })),
        // Only with a transactional id, which this producer never sends; fatal all the same.
        KafkaCode::TransactionalIdAuthorizationFailed => Err(fatal(code)),
        KafkaCode::NotCoordinator
        | KafkaCode::CoordinatorNotAvailable
        | KafkaCode::CoordinatorLoadInProgress
        | KafkaCode::ConcurrentTransactions => Err(InitFailure::Retry(code)),
        c if c.is_retriable() => Err(InitFailure::Retry(c)),
        c => Err(fatal(c)),
    }
}

// ---------------------------------------------------------------------------------------------
// The reaction table.

/// What the table knows of a partition when one of its answers arrives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct PartitionView {
    /// Sequence of the last record acknowledged, if any since the sequences last restarted.
    pub(crate) last_acked_sequence: Option<i32>,
    /// Offset of the last record acknowledged, if any.
    pub(crate) last_acked_offset: Option<i64>,
    /// The sequence after a batch given up on (delivery timeout) after it was sent, whose fate
    /// is unknown until later batches are answered.
    pub(crate) unresolved: Option<i32>,
}

/// What the table knows of the batch an answer is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AnsweredBatch {
    /// Base sequence the answered attempt carried.
    pub(crate) base_sequence: i32,
    /// Records in the batch.
    pub(crate) record_count: i32,
    /// The batch's sequence was rewritten by an epoch bump: after this attempt was sent (the
    /// answer is about the old numbering), or before it (Java's `sequenceHasBeenReset`). Errors
    /// about sequences are then the bump's expected echo, not a new gap.
    pub(crate) sequence_reset: bool,
}

/// One partition's answer in a Produce response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PartitionAnswer {
    /// The partition's error code.
    pub(crate) code: KafkaCode,
    /// Offset of the batch's first record, -1 when unknown.
    pub(crate) base_offset: i64,
    /// The partition's log start offset (Produce v5+), -1 when unknown.
    pub(crate) log_start_offset: i64,
}

/// What to do with a batch after its partition's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    /// Written: report success, with its base offset when the broker still knows it (not on
    /// `DUPLICATE_SEQUENCE_NUMBER`, where the batch was written by an earlier attempt whose
    /// metadata the broker no longer keeps).
    Complete {
        /// Offset of the batch's first record.
        base_offset: Option<i64>,
    },
    /// Resend the same bytes (same producer id, epoch and sequence) after the retry backoff.
    Retry,
    /// Resend after an epoch bump: the partition asked for one ([`Sequences::bump_required`]);
    /// once bumped, the batch has a new epoch and sequence, so its bytes must be restamped
    /// ([`crate::records::restamp`]) with what [`Sequences::resend`] gives.
    RetryAfterBump,
    /// Fail the batch with the answer's code. With `bump`, the batch's sequences are a gap the
    /// broker would refuse to skip, so the partition asked for an epoch bump before it sends
    /// more.
    Fail {
        /// An epoch bump was asked for.
        bump: bool,
    },
    /// The batch was refused as too large (`MESSAGE_TOO_LARGE`) and has more than one record:
    /// not written, so split it and send the pieces in its place ([`Sequences::split`] gives
    /// them its sequences). Its entry stays until then.
    Split,
    /// The producer cannot go on (authorization, fencing of a transactional producer, a
    /// version the broker refuses): fail every batch with the answer's code.
    Fatal,
    /// The answer is for a batch no longer tracked (already completed or failed, e.g. an
    /// answer that arrived twice across a reconnect): ignore it.
    Stale,
}

/// How an idempotent producer reacts to one Produce partition answer: Java's `Sender` and
/// `TransactionManager` rules (Kafka 2.5+, KIP-360), as a table. One row per case:
///
/// | code | condition | action |
/// |---|---|---|
/// | NONE | | Complete |
/// | DUPLICATE_SEQUENCE_NUMBER | | Complete, offset unknown |
/// | UNKNOWN_PRODUCER_ID | log start offset unknown (-1) | Retry |
/// | UNKNOWN_PRODUCER_ID | sequence reset by a bump | Retry |
/// | UNKNOWN_PRODUCER_ID | otherwise (state expired with the log's head, or lost) | RetryAfterBump |
/// | OUT_OF_ORDER_SEQUENCE_NUMBER | sequence reset by a bump | Retry |
/// | OUT_OF_ORDER_SEQUENCE_NUMBER | not the next after the last acked (an earlier batch is still pending) | Retry |
/// | OUT_OF_ORDER_SEQUENCE_NUMBER | unresolved, and not the batch right after the unresolved one | Retry |
/// | OUT_OF_ORDER_SEQUENCE_NUMBER | the next one: a real gap | RetryAfterBump |
/// | INVALID_PRODUCER_EPOCH | sequence reset by a bump (an old-epoch echo) | Retry |
/// | INVALID_PRODUCER_EPOCH, PRODUCER_FENCED | | Fail + bump |
/// | MESSAGE_TOO_LARGE | more than one record | Split (the pieces take its sequences) |
/// | CLUSTER_AUTHORIZATION_FAILED, TRANSACTIONAL_ID_AUTHORIZATION_FAILED, UNSUPPORTED_VERSION | | Fatal |
/// | any retriable code | | Retry (same sequence: the broker refuses later ones until it is written) |
/// | any other code | | Fail + bump (its sequences would leave a gap) |
///
/// Transactional (`transactional`, out of scope here): UNKNOWN_PRODUCER_ID with the log's head
/// gone retries from sequence 0 in Java, which this table does not model (it answers Fail);
/// sequence errors that need a bump fail the batch (the transaction must abort), and
/// INVALID_PRODUCER_EPOCH / PRODUCER_FENCED are fatal.
///
/// `UNKNOWN_PRODUCER_ID` whose log start offset is past the last acked offset (retention removed
/// the producer's batches, and with them its state) bumps too, rather than restarting the
/// sequence at 0 under the same epoch: Java's client does so since 2.5 so that no (epoch,
/// sequence) pair is ever written twice.
pub(crate) fn on_partition_answer(
    view: &PartitionView,
    batch: &AnsweredBatch,
    answer: &PartitionAnswer,
    transactional: bool,
) -> Action {
    let gap_fix = if transactional {
        Action::Fail { bump: false }
    } else {
        Action::RetryAfterBump
    };
    match answer.code {
        KafkaCode::None => Action::Complete {
            base_offset: (answer.base_offset >= 0).then_some(answer.base_offset),
        },
        KafkaCode::DuplicateSequenceNumber => Action::Complete { base_offset: None },
        KafkaCode::UnknownProducerId => {
            if answer.log_start_offset < 0 || batch.sequence_reset {
                Action::Retry
            } else {
                // Whether the log's head went (last acked < log start) or the state was lost
                // otherwise, an idempotent producer bumps; the distinction matters only to a
                // transactional one.
                gap_fix
            }
        }
        KafkaCode::OutOfOrderSequenceNumber => {
            let expected = view.last_acked_sequence.map_or(0, |s| next_sequence(s, 1));
            match view.unresolved {
                None if batch.sequence_reset || batch.base_sequence != expected => Action::Retry,
                None => gap_fix,
                Some(after) if batch.base_sequence == after => gap_fix,
                Some(_) => Action::Retry,
            }
        }
        KafkaCode::InvalidProducerEpoch | KafkaCode::ProducerFenced if transactional => Action::Fatal,
        KafkaCode::InvalidProducerEpoch if batch.sequence_reset => Action::Retry,
        KafkaCode::InvalidProducerEpoch | KafkaCode::ProducerFenced => Action::Fail { bump: true },
        // Java's Sender splits too, transactional or not; one record alone fails (below).
        KafkaCode::MessageTooLarge if batch.record_count > 1 => Action::Split,
        KafkaCode::ClusterAuthorizationFailed
        | KafkaCode::TransactionalIdAuthorizationFailed
        | KafkaCode::UnsupportedVersion => Action::Fatal,
        c if c.is_retriable() => Action::Retry,
        _ => Action::Fail { bump: !transactional },
    }
}

// ---------------------------------------------------------------------------------------------
// Per-partition state.

/// A batch that has a sequence and is not yet answered for good.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct InFlight {
    /// The caller's id for the batch.
    id: u64,
    /// What its bytes must carry when next sent.
    stamp: BatchProducer,
    /// Records in it.
    record_count: i32,
    /// Its sequence was rewritten by an epoch bump.
    reset: bool,
}

impl InFlight {
    fn last_sequence(&self) -> i32 {
        next_sequence(self.stamp.base_sequence, self.record_count - 1)
    }
}

/// One partition's sequence numbers.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Partition {
    /// The producer id and epoch its sequences count under.
    producer: ProducerIdEpoch,
    /// Base sequence of the next new batch.
    next: i32,
    /// What the table needs.
    view: PartitionView,
    /// Batches with a sequence, in sequence order.
    in_flight: Vec<InFlight>,
    /// A batch of this producer id was written under an earlier epoch
    /// ([`Sequences::reset`]): the broker holds the producer's state for the partition and
    /// refuses a new epoch's batch that does not start at sequence 0, so a later batch cannot
    /// be written ahead of the first.
    known_to_broker: bool,
}

impl Partition {
    fn new(producer: ProducerIdEpoch) -> Self {
        Partition {
            producer,
            next: 0,
            view: PartitionView::default(),
            in_flight: Vec::new(),
            known_to_broker: false,
        }
    }

    /// Whether a batch of the producer id was written here (under any epoch).
    fn written(&self) -> bool {
        self.known_to_broker
            || self.view.last_acked_sequence.is_some()
            || self.view.last_acked_offset.is_some()
    }

    /// Renumbers the in-flight batches from 0 under `producer` (after an epoch bump).
    fn restart(&mut self, producer: ProducerIdEpoch, transactional: bool) {
        let mut seq = 0;
        for b in &mut self.in_flight {
            b.stamp = BatchProducer {
                transactional,
                ..producer.batch(seq)
            };
            b.reset = true;
            seq = next_sequence(seq, b.record_count);
        }
        self.producer = producer;
        self.next = seq;
        self.view.last_acked_sequence = None;
        self.view.unresolved = None;
    }

    /// Records batch `b` as written at `base_offset` (unknown for a duplicate).
    fn acknowledge(&mut self, b: &InFlight, base_offset: Option<i64>) {
        let last = b.last_sequence();
        // Answers may come back out of order across a leader change: keep the latest.
        if self.view.last_acked_sequence.map_or(true, |s| is_later(last, s)) {
            self.view.last_acked_sequence = Some(last);
        }
        self.acknowledge_offset(b.record_count, base_offset);
    }

    /// Records that `record_count` records were written at `base_offset`, if known: the
    /// last acked offset tells a broker that lost the producer's state with the log's head
    /// from one that lost it otherwise.
    fn acknowledge_offset(&mut self, record_count: i32, base_offset: Option<i64>) {
        if let Some(o) = base_offset {
            let last = o.saturating_add(record_count as i64 - 1);
            if self.view.last_acked_offset.map_or(true, |l| last > l) {
                self.view.last_acked_offset = Some(last);
            }
        }
    }

    /// With nothing in flight, an unresolved batch is settled: written if the acks reached
    /// past it, else a gap. Returns whether a bump is needed (Java's `maybeResolveSequences`).
    fn settle(&mut self) -> bool {
        if self.view.unresolved.is_none() || !self.in_flight.is_empty() {
            return false;
        }
        self.view.unresolved = None;
        // Resolved when every sequence handed out is acknowledged: the batch given up on
        // was written after all.
        let acked_next = self.view.last_acked_sequence.map_or(0, |s| next_sequence(s, 1));
        acked_next != self.next
    }
}

/// Why [`Sequences::next_batch`] gives a new batch no sequence yet; the batch stays queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Hold {
    /// No producer id yet: InitProducerId first.
    NoProducerId,
    /// An epoch bump was asked for and not yet done.
    BumpPending,
    /// The partition still has batches in flight under an older producer id or epoch: a
    /// sequence-0 batch of the new epoch must not overtake them.
    OldEpochInFlight,
    /// A batch given up on after it was sent has an unknown fate until the batches after it
    /// are answered.
    Unresolved,
    /// [`MAX_IN_FLIGHT`] batches of the partition are already unanswered.
    InFlightFull,
}

/// What [`Sequences::resend`] says about a batch to retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Resend {
    /// Send it now with these header values; if they differ from what its bytes carry, restamp
    /// them first.
    Now(BatchProducer),
    /// An earlier batch of the partition is unanswered: send that one first, as Java's
    /// accumulator does, so a retry never overtakes the batch it depends on.
    Wait,
    /// Not a batch this state knows (completed, failed, or never given a sequence).
    Unknown,
}

/// What [`Sequences::bump_epoch`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Bump<K> {
    /// Nothing was asked for.
    NotNeeded,
    /// The epoch is one higher; these partitions' in-flight batches were renumbered from 0 and
    /// must be restamped before they are resent.
    Bumped {
        /// The new producer id and epoch.
        producer: ProducerIdEpoch,
        /// The partitions renumbered.
        restamp: Vec<K>,
    },
    /// The epoch is exhausted: send a fresh InitProducerId; [`Sequences::set_producer`]
    /// finishes the bump.
    NeedProducerId,
}

/// The idempotent producer's sequence state for every partition it writes, keyed by `K` (the
/// topic-partition type of the caller). Pure: the caller gives each batch an id, and tells
/// it what was sent and what came back.
#[derive(Debug, Clone)]
pub(crate) struct Sequences<K> {
    producer: ProducerIdEpoch,
    partitions: HashMap<K, Partition>,
    /// Partitions that asked for an epoch bump (non-empty: a bump is needed).
    bump_for: HashSet<K>,
    /// Batches carry the transactional attribute, and the table reads answers as Kafka does
    /// for a transactional producer: no local epoch bump (the coordinator owns the epoch), a
    /// sequence gap is recorded in `gap` instead and the transaction must abort.
    transactional: bool,
    /// A transactional producer's batch failed in a way that left its partition's sequence
    /// with a gap: only a new epoch from the coordinator (after the abort) repairs it.
    gap: bool,
}

impl<K: Hash + Eq + Clone> Default for Sequences<K> {
    fn default() -> Self {
        Sequences {
            producer: ProducerIdEpoch::NONE,
            partitions: HashMap::new(),
            bump_for: HashSet::new(),
            transactional: false,
            gap: false,
        }
    }
}

impl<K: Hash + Eq + Clone> Sequences<K> {
    /// No producer id yet.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// No producer id yet; batches will be transactional (see the `transactional` field).
    pub(crate) fn transactional() -> Self {
        Sequences {
            transactional: true,
            ..Self::default()
        }
    }

    /// Whether a transactional producer's partition was left with a sequence gap (cleared by
    /// [`reset`](Self::reset)).
    pub(crate) fn has_gap(&self) -> bool {
        self.gap
    }

    /// Forgets every partition's sequences and installs `producer`: a transactional producer
    /// whose coordinator handed out a new epoch (InitProducerId after an abort, or an EndTxn
    /// that bumped it) starts every partition at sequence 0. Only with nothing in flight.
    pub(crate) fn reset(&mut self, producer: ProducerIdEpoch) {
        let same_id = producer.id == self.producer.id;
        // A partition where a batch of this producer id was written keeps that knowledge: the
        // broker holds the producer's state there, so it refuses a batch of the new epoch
        // that does not start at sequence 0, and the partition may pipeline from the start.
        self.partitions.retain(|_, p| same_id && p.written());
        for p in self.partitions.values_mut() {
            *p = Partition {
                known_to_broker: true,
                ..Partition::new(producer)
            };
        }
        self.producer = producer;
        self.bump_for.clear();
        self.gap = false;
    }

    /// The current producer id and epoch.
    pub(crate) fn producer(&self) -> ProducerIdEpoch {
        self.producer
    }

    /// Installs the producer id and epoch InitProducerId gave. Partitions with batches in
    /// flight under an older one finish those first; partitions that asked for a bump while
    /// the id was being renewed are renumbered under it (and must be restamped: returned).
    pub(crate) fn set_producer(&mut self, producer: ProducerIdEpoch) -> Vec<K> {
        self.producer = producer;
        let renumbered: Vec<K> = self.bump_for.drain().collect();
        for tp in &renumbered {
            if let Some(p) = self.partitions.get_mut(tp) {
                p.restart(producer, self.transactional);
            }
        }
        renumbered
    }

    /// Gives a new batch of `record_count` records (at least 1) for `tp` its header values,
    /// and tracks it as in flight under the caller's `id` until its answer; or says why it
    /// must wait. Encode it once with these values: retries resend the same bytes.
    pub(crate) fn next_batch(&mut self, tp: &K, id: u64, record_count: i32) -> Result<BatchProducer, Hold> {
        if !self.producer.is_valid() {
            return Err(Hold::NoProducerId);
        }
        if !self.bump_for.is_empty() {
            return Err(Hold::BumpPending);
        }
        let producer = self.producer;
        let p = self
            .partitions
            .entry(tp.clone())
            .or_insert_with(|| Partition::new(producer));
        if p.producer != producer {
            if !p.in_flight.is_empty() {
                return Err(Hold::OldEpochInFlight);
            }
            let offset = p.view.last_acked_offset;
            *p = Partition::new(producer);
            p.view.last_acked_offset = offset;
        }
        if p.view.unresolved.is_some() {
            return Err(Hold::Unresolved);
        }
        if p.in_flight.len() >= MAX_IN_FLIGHT {
            return Err(Hold::InFlightFull);
        }
        let stamp = BatchProducer {
            transactional: self.transactional,
            ..producer.batch(p.next)
        };
        p.next = next_sequence(p.next, record_count.max(1));
        p.in_flight.push(InFlight {
            id,
            stamp,
            record_count: record_count.max(1),
            reset: false,
        });
        Ok(stamp)
    }

    /// The header values a retried batch must be sent with, or why it must wait.
    pub(crate) fn resend(&self, tp: &K, id: u64) -> Resend {
        let Some(p) = self.partitions.get(tp) else {
            return Resend::Unknown;
        };
        match p.in_flight.iter().position(|b| b.id == id) {
            None => Resend::Unknown,
            Some(0) => Resend::Now(p.in_flight[0].stamp),
            Some(_) => Resend::Wait,
        }
    }

    /// Applies one Produce partition answer for batch `id` of `tp`, whose attempt carried
    /// `sent`: reads the table ([`on_partition_answer`]), updates the partition (acked
    /// sequence and offset, in-flight batches, a bump request) and returns the action;
    /// [`Action::Stale`] for a batch this state does not track.
    pub(crate) fn on_answer(
        &mut self,
        tp: &K,
        id: u64,
        sent: BatchProducer,
        answer: &PartitionAnswer,
    ) -> Action {
        let Some(p) = self.partitions.get_mut(tp) else {
            return Action::Stale;
        };
        let Some(at) = p.in_flight.iter().position(|b| b.id == id) else {
            return Action::Stale;
        };
        let b = p.in_flight[at];
        // The attempt answered was sent before a bump renumbered the batch.
        let renumbered = b.stamp != sent;
        let batch = AnsweredBatch {
            base_sequence: sent.base_sequence,
            record_count: b.record_count,
            sequence_reset: b.reset || renumbered,
        };
        let action = on_partition_answer(&p.view, &batch, answer, self.transactional);
        let mut bump = false;
        match action {
            Action::Complete { base_offset } if renumbered => {
                // Written under the old epoch after the partition was renumbered as if it were
                // not: the new numbering is wrong, so renumber again with another bump.
                p.in_flight.remove(at);
                p.acknowledge_offset(b.record_count, base_offset);
                bump = true;
            }
            Action::Complete { base_offset } => {
                p.in_flight.remove(at);
                p.acknowledge(&b, base_offset);
                bump = p.settle();
            }
            Action::Retry | Action::Split | Action::Fatal | Action::Stale => {}
            Action::RetryAfterBump => bump = true,
            Action::Fail { bump: gap } => {
                p.in_flight.remove(at);
                bump = gap | p.settle();
            }
        }
        match (bump, self.transactional) {
            (true, false) => {
                self.bump_for.insert(tp.clone());
            }
            (true, true) => self.gap = true,
            (false, _) => {}
        }
        action
    }

    /// Batch `id` of `tp`, refused as too large ([`Action::Split`]), was split into `pieces`
    /// (their ids and record counts, in record order): they take its place and its sequence
    /// range, the first its base sequence and each the next after the one before, as Java's
    /// `ProducerBatch.split` numbers them. Returns their header values, in order; `None`
    /// (nothing changed) if the batch is not tracked or the counts do not add up to its.
    ///
    /// Why its range and not a bump: `MESSAGE_TOO_LARGE` means nothing of the batch was
    /// appended, so the broker still expects its base sequence, and the batches in flight
    /// after it keep theirs (the broker refuses them as out of order until the pieces are
    /// written, and the table retries them, as it does for any batch behind a pending one).
    /// The partition's sequence stays gap-free under the same epoch. [`Sequences::resend`]
    /// sends the pieces and those batches one after the other, in sequence order.
    pub(crate) fn split(&mut self, tp: &K, id: u64, pieces: &[(u64, i32)]) -> Option<Vec<BatchProducer>> {
        let p = self.partitions.get_mut(tp)?;
        let at = p.in_flight.iter().position(|b| b.id == id)?;
        let whole = p.in_flight[at];
        let total: i64 = pieces.iter().map(|(_, n)| i64::from(*n)).sum();
        if pieces.iter().any(|(_, n)| *n < 1) || total != i64::from(whole.record_count) {
            return None;
        }
        let mut seq = whole.stamp.base_sequence;
        let mut stamps = Vec::with_capacity(pieces.len());
        let entries: Vec<InFlight> = pieces
            .iter()
            .map(|&(id, record_count)| {
                let stamp = BatchProducer {
                    base_sequence: seq,
                    ..whole.stamp
                };
                seq = next_sequence(seq, record_count);
                stamps.push(stamp);
                InFlight {
                    id,
                    stamp,
                    record_count,
                    // They stand for the batch in every respect, a renumbering by a bump too.
                    reset: whole.reset,
                }
            })
            .collect();
        p.in_flight.splice(at..=at, entries);
        Some(stamps)
    }

    /// The caller gave up on batch `id` of `tp` (delivery timeout, retries exhausted) after
    /// it may have reached the broker: its fate is unknown, so no new batch of the partition
    /// gets a sequence until the batches after it tell (Java's unresolved sequences). Returns
    /// whether that already calls for an epoch bump (nothing else was in flight).
    pub(crate) fn give_up(&mut self, tp: &K, id: u64) -> bool {
        let Some(p) = self.partitions.get_mut(tp) else {
            return false;
        };
        let Some(at) = p.in_flight.iter().position(|b| b.id == id) else {
            return false;
        };
        let b = p.in_flight.remove(at);
        let after = next_sequence(b.last_sequence(), 1);
        p.view.unresolved = Some(match p.view.unresolved {
            Some(u) if is_later(u, after) => u,
            _ => after,
        });
        // Acks for later batches already passed it: it was written.
        if p.view
            .last_acked_sequence
            .is_some_and(|s| !is_later(after, next_sequence(s, 1)))
        {
            p.view.unresolved = None;
        }
        if p.settle() {
            self.bump_for.insert(tp.clone());
            return true;
        }
        false
    }

    /// Whether an epoch bump was asked for: call [`Sequences::bump_epoch`] before the next new
    /// batch.
    pub(crate) fn bump_required(&self) -> bool {
        !self.bump_for.is_empty()
    }

    /// Bumps the epoch locally, if asked for: the new epoch is one higher, and the partitions
    /// that asked have their in-flight batches renumbered from 0 (restamp them before they are
    /// resent). At `i16::MAX` the producer id itself is used up: the producer has none until
    /// [`Sequences::set_producer`] gets a fresh one from InitProducerId.
    pub(crate) fn bump_epoch(&mut self) -> Bump<K> {
        if self.bump_for.is_empty() {
            return Bump::NotNeeded;
        }
        if self.producer.epoch == i16::MAX || !self.producer.is_valid() {
            self.producer = ProducerIdEpoch::NONE;
            return Bump::NeedProducerId;
        }
        let producer = ProducerIdEpoch {
            id: self.producer.id,
            epoch: self.producer.epoch + 1,
        };
        Bump::Bumped {
            restamp: self.set_producer(producer),
            producer,
        }
    }

    /// Whether `tp` may have more than one batch in flight: once the broker has written one of
    /// its batches under the current numbering, or (after [`reset`](Self::reset) to a new
    /// epoch) one of the producer id's batches under an earlier epoch. A broker that has no
    /// state for the producer on a partition takes its first batch whatever the sequence (the
    /// state may have gone with retention), so if the first batch failed (a leader not yet
    /// elected on a new topic) while the second was in flight, the second would be written
    /// first and the first refused for ever after. One batch until the first answer closes
    /// that hole. A broker that holds the producer's state refuses a new epoch's batch that
    /// does not start at sequence 0, so there is no hole to close: a transactional producer,
    /// whose epoch changes at every end under protocol v2, keeps its batches pipelined.
    pub(crate) fn may_pipeline(&self, tp: &K) -> bool {
        self.partitions.get(tp).is_some_and(|p| {
            p.producer == self.producer && (p.view.last_acked_sequence.is_some() || p.known_to_broker)
        })
    }

    #[cfg(test)]
    /// The table's view of `tp`, for logs and tests.
    pub(crate) fn view(&self, tp: &K) -> Option<PartitionView> {
        self.partitions.get(tp).map(|p| p.view)
    }

    #[cfg(test)]
    /// Base sequence the next new batch of `tp` would get under its current numbering.
    pub(crate) fn next_sequence_of(&self, tp: &K) -> Option<i32> {
        self.partitions.get(tp).map(|p| p.next)
    }

    /// How many batches of `tp` have a sequence and await their final answer.
    pub(crate) fn in_flight(&self, tp: &K) -> usize {
        self.partitions.get(tp).map_or(0, |p| p.in_flight.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::releases;
    use crate::protocol::Message;

    const P: ProducerIdEpoch = ProducerIdEpoch { id: 1000, epoch: 0 };

    fn answer(code: KafkaCode) -> PartitionAnswer {
        PartitionAnswer {
            code,
            base_offset: 10,
            log_start_offset: 0,
        }
    }

    fn batch(base_sequence: i32) -> AnsweredBatch {
        AnsweredBatch {
            base_sequence,
            record_count: 5,
            sequence_reset: false,
        }
    }

    fn acked(last: i32) -> PartitionView {
        PartitionView {
            last_acked_sequence: Some(last),
            last_acked_offset: Some(100),
            unresolved: None,
        }
    }

    fn table(view: PartitionView, b: AnsweredBatch, a: PartitionAnswer) -> Action {
        on_partition_answer(&view, &b, &a, false)
    }

    // One test per row of the table.

    #[test]
    fn a_partition_pipelines_only_once_a_batch_of_its_numbering_was_written() {
        let mut seq: Sequences<&str> = Sequences::new();
        seq.set_producer(ProducerIdEpoch { id: 3, epoch: 0 });
        let first = seq.next_batch(&"t-0", 1, 10).unwrap();
        assert!(
            !seq.may_pipeline(&"t-0"),
            "the broker may take a later batch first"
        );
        let mut ok = answer(KafkaCode::None);
        ok.base_offset = 0;
        seq.on_answer(&"t-0", 1, first, &ok);
        assert!(seq.may_pipeline(&"t-0"));
        // A bump renumbers from 0 under a new epoch: one batch again until one is written.
        seq.next_batch(&"t-0", 2, 10).unwrap();
        seq.on_answer(
            &"t-0",
            2,
            seq.producer().batch(10),
            &answer(KafkaCode::OutOfOrderSequenceNumber),
        );
        assert!(seq.bump_required());
        seq.bump_epoch();
        assert!(!seq.may_pipeline(&"t-0"));
    }

    #[test]
    fn after_a_new_epoch_a_partition_the_broker_knows_pipelines_from_sequence_0() {
        let mut seq: Sequences<&str> = Sequences::transactional();
        let first = ProducerIdEpoch { id: 3, epoch: 1 };
        seq.reset(first);
        let written = seq.next_batch(&"t-0", 1, 10).unwrap();
        let mut ok = answer(KafkaCode::None);
        ok.base_offset = 0;
        seq.on_answer(&"t-0", 1, written, &ok);
        // Sent under the first epoch, never answered: the broker holds no state of it.
        seq.next_batch(&"t-1", 2, 10).unwrap();
        seq.give_up(&"t-1", 2);
        // The transaction ends with a new epoch (protocol v2's EndTxn, or a bump after an abort).
        let second = ProducerIdEpoch { id: 3, epoch: 2 };
        seq.reset(second);
        // The broker refuses a new epoch's batch that does not start at sequence 0 once it
        // holds the producer's state for the partition: sequences 0.. may all be in flight.
        assert!(seq.may_pipeline(&"t-0"));
        for (id, base) in (10..15).zip((0..).step_by(10)) {
            let stamp = seq.next_batch(&"t-0", id, 10).unwrap();
            assert_eq!((stamp.epoch, stamp.base_sequence), (2, base));
            assert!(seq.may_pipeline(&"t-0"));
        }
        assert_eq!(seq.next_batch(&"t-0", 15, 10), Err(Hold::InFlightFull));
        // A partition the broker may hold nothing for takes a later sequence first: one batch
        // until the first is written.
        seq.next_batch(&"t-1", 20, 10).unwrap();
        assert!(!seq.may_pipeline(&"t-1"));
        assert!(!seq.may_pipeline(&"t-2"));
        // A new producer id is unknown to every partition.
        seq.reset(ProducerIdEpoch { id: 4, epoch: 0 });
        assert!(!seq.may_pipeline(&"t-0"));
    }

    #[test]
    fn row_none_completes_with_the_offset() {
        let a = table(acked(4), batch(5), answer(KafkaCode::None));
        assert_eq!(
            a,
            Action::Complete {
                base_offset: Some(10)
            }
        );
        let unknown = PartitionAnswer {
            base_offset: -1,
            ..answer(KafkaCode::None)
        };
        assert_eq!(
            table(acked(4), batch(5), unknown),
            Action::Complete { base_offset: None }
        );
    }

    #[test]
    fn row_duplicate_sequence_is_success_without_offset() {
        let a = table(acked(9), batch(5), answer(KafkaCode::DuplicateSequenceNumber));
        assert_eq!(a, Action::Complete { base_offset: None });
    }

    #[test]
    fn row_unknown_producer_without_log_start_offset_retries() {
        let a = PartitionAnswer {
            log_start_offset: -1,
            ..answer(KafkaCode::UnknownProducerId)
        };
        assert_eq!(table(acked(4), batch(5), a), Action::Retry);
    }

    #[test]
    fn row_unknown_producer_after_a_reset_retries() {
        let b = AnsweredBatch {
            sequence_reset: true,
            ..batch(5)
        };
        assert_eq!(
            table(acked(4), b, answer(KafkaCode::UnknownProducerId)),
            Action::Retry
        );
    }

    #[test]
    fn row_unknown_producer_with_the_log_head_gone_bumps() {
        // Retention removed everything acked (last acked offset 100 < log start 500).
        let a = PartitionAnswer {
            log_start_offset: 500,
            ..answer(KafkaCode::UnknownProducerId)
        };
        assert_eq!(table(acked(4), batch(5), a), Action::RetryAfterBump);
        // Lost otherwise (log start below what was acked): bumps too.
        assert_eq!(
            table(acked(4), batch(5), answer(KafkaCode::UnknownProducerId)),
            Action::RetryAfterBump
        );
        // A transactional producer fails the batch instead (the transaction aborts).
        assert_eq!(
            on_partition_answer(&acked(4), &batch(5), &answer(KafkaCode::UnknownProducerId), true),
            Action::Fail { bump: false }
        );
    }

    #[test]
    fn row_out_of_order_after_a_reset_retries() {
        let b = AnsweredBatch {
            sequence_reset: true,
            ..batch(5)
        };
        assert_eq!(
            table(acked(4), b, answer(KafkaCode::OutOfOrderSequenceNumber)),
            Action::Retry
        );
    }

    #[test]
    fn row_out_of_order_for_a_later_batch_retries() {
        // Sequence 10 while 5..9 are not acknowledged: the earlier batch is being retried.
        assert_eq!(
            table(acked(4), batch(10), answer(KafkaCode::OutOfOrderSequenceNumber)),
            Action::Retry
        );
    }

    #[test]
    fn row_out_of_order_for_the_next_batch_is_a_gap_and_bumps() {
        assert_eq!(
            table(acked(4), batch(5), answer(KafkaCode::OutOfOrderSequenceNumber)),
            Action::RetryAfterBump
        );
        // Nothing acked yet: the next is 0.
        assert_eq!(
            table(
                PartitionView::default(),
                batch(0),
                answer(KafkaCode::OutOfOrderSequenceNumber)
            ),
            Action::RetryAfterBump
        );
        // Across the wrap: after i32::MAX comes 0.
        assert_eq!(
            table(
                acked(i32::MAX),
                batch(0),
                answer(KafkaCode::OutOfOrderSequenceNumber)
            ),
            Action::RetryAfterBump
        );
    }

    #[test]
    fn row_out_of_order_with_an_unresolved_batch() {
        let view = PartitionView {
            unresolved: Some(10),
            ..acked(4)
        };
        // The batch right after the one given up on: a real gap.
        assert_eq!(
            table(view, batch(10), answer(KafkaCode::OutOfOrderSequenceNumber)),
            Action::RetryAfterBump
        );
        // Any other: wait and see.
        assert_eq!(
            table(view, batch(15), answer(KafkaCode::OutOfOrderSequenceNumber)),
            Action::Retry
        );
        assert_eq!(
            table(view, batch(5), answer(KafkaCode::OutOfOrderSequenceNumber)),
            Action::Retry
        );
    }

    #[test]
    fn row_invalid_epoch_echo_of_a_bump_retries() {
        let b = AnsweredBatch {
            sequence_reset: true,
            ..batch(5)
        };
        assert_eq!(
            table(acked(4), b, answer(KafkaCode::InvalidProducerEpoch)),
            Action::Retry
        );
    }

    #[test]
    fn row_epoch_errors_fail_and_bump_unless_transactional() {
        for code in [KafkaCode::InvalidProducerEpoch, KafkaCode::ProducerFenced] {
            assert_eq!(
                table(acked(4), batch(5), answer(code)),
                Action::Fail { bump: true }
            );
            assert_eq!(
                on_partition_answer(&acked(4), &batch(5), &answer(code), true),
                Action::Fatal,
                "{code}"
            );
        }
    }

    #[test]
    fn row_authorization_and_version_errors_are_fatal() {
        for code in [
            KafkaCode::ClusterAuthorizationFailed,
            KafkaCode::TransactionalIdAuthorizationFailed,
            KafkaCode::UnsupportedVersion,
        ] {
            assert_eq!(table(acked(4), batch(5), answer(code)), Action::Fatal, "{code}");
        }
    }

    #[test]
    fn row_retriable_codes_retry_with_the_same_sequence() {
        for code in [
            KafkaCode::NotLeaderOrFollower,
            KafkaCode::RequestTimedOut,
            KafkaCode::NotEnoughReplicas,
            KafkaCode::UnknownTopicOrPartition,
        ] {
            assert!(code.is_retriable(), "{code}");
            assert_eq!(table(acked(4), batch(5), answer(code)), Action::Retry, "{code}");
        }
    }

    #[test]
    fn row_other_codes_fail_and_bump() {
        // MESSAGE_TOO_LARGE fails a batch of one record; a larger one is split (its own row).
        let one = AnsweredBatch {
            record_count: 1,
            ..batch(5)
        };
        assert_eq!(
            table(acked(4), one, answer(KafkaCode::MessageTooLarge)),
            Action::Fail { bump: true }
        );
        for code in [KafkaCode::InvalidRecord, KafkaCode::TopicAuthorizationFailed] {
            assert_eq!(
                table(acked(4), batch(5), answer(code)),
                Action::Fail { bump: true },
                "{code}"
            );
        }
    }

    // Sequence numbers.

    #[test]
    fn sequences_wrap_at_i32_max_to_zero() {
        assert_eq!(next_sequence(0, 5), 5);
        assert_eq!(next_sequence(i32::MAX, 1), 0);
        assert_eq!(next_sequence(i32::MAX - 1, 5), 3);
        assert!(is_later(0, i32::MAX));
        assert!(is_later(3, i32::MAX - 2));
        assert!(!is_later(i32::MAX, 0));
        assert!(!is_later(7, 7));

        let mut s = Sequences::new();
        s.set_producer(P);
        s.partitions.insert("t-0", Partition::new(P));
        s.partitions.get_mut("t-0").unwrap().next = i32::MAX - 1;
        assert_eq!(s.next_batch(&"t-0", 1, 5).unwrap().base_sequence, i32::MAX - 1);
        assert_eq!(s.next_batch(&"t-0", 2, 1).unwrap().base_sequence, 3);
        assert_eq!(
            s.on_answer(&"t-0", 1, P.batch(i32::MAX - 1), &answer(KafkaCode::None)),
            Action::Complete {
                base_offset: Some(10)
            }
        );
        assert_eq!(s.view(&"t-0").unwrap().last_acked_sequence, Some(2));
    }

    #[test]
    fn batches_get_consecutive_sequences_and_acks_advance() {
        let mut s = Sequences::new();
        assert_eq!(s.next_batch(&"t-0", 1, 3), Err(Hold::NoProducerId));
        s.set_producer(P);
        let a = s.next_batch(&"t-0", 1, 3).unwrap();
        let b = s.next_batch(&"t-0", 2, 2).unwrap();
        let other = s.next_batch(&"t-1", 3, 7).unwrap();
        assert_eq!((a.id, a.epoch, a.base_sequence), (1000, 0, 0));
        assert_eq!(b.base_sequence, 3);
        assert_eq!(other.base_sequence, 0);
        assert_eq!(s.next_sequence_of(&"t-0"), Some(5));
        assert_eq!(s.resend(&"t-0", 1), Resend::Now(a));
        // A retry of the second waits for the first.
        assert_eq!(s.resend(&"t-0", 2), Resend::Wait);

        let ok = |off| PartitionAnswer {
            base_offset: off,
            ..answer(KafkaCode::None)
        };
        assert_eq!(
            s.on_answer(&"t-0", 1, a, &ok(40)),
            Action::Complete {
                base_offset: Some(40)
            }
        );
        let v = s.view(&"t-0").unwrap();
        assert_eq!((v.last_acked_sequence, v.last_acked_offset), (Some(2), Some(42)));
        assert_eq!(s.resend(&"t-0", 2), Resend::Now(b));
        assert_eq!(
            s.on_answer(&"t-0", 2, b, &ok(43)),
            Action::Complete {
                base_offset: Some(43)
            }
        );
        assert_eq!(s.view(&"t-0").unwrap().last_acked_sequence, Some(4));
        assert_eq!(s.in_flight(&"t-0"), 0);
        // An answer arriving twice is stale the second time.
        assert_eq!(s.on_answer(&"t-0", 2, b, &ok(43)), Action::Stale);
        assert_eq!(s.resend(&"t-0", 2), Resend::Unknown);
        assert!(!s.bump_required());
    }

    #[test]
    fn a_retriable_error_keeps_the_batch_and_its_sequence() {
        let mut s = Sequences::new();
        s.set_producer(P);
        let a = s.next_batch(&"t-0", 1, 3).unwrap();
        assert_eq!(
            s.on_answer(&"t-0", 1, a, &answer(KafkaCode::NotLeaderOrFollower)),
            Action::Retry
        );
        assert_eq!(s.resend(&"t-0", 1), Resend::Now(a));
        assert_eq!(s.in_flight(&"t-0"), 1);
        assert!(!s.bump_required());
    }

    #[test]
    fn at_most_five_batches_in_flight_per_partition() {
        let mut s = Sequences::new();
        s.set_producer(P);
        for id in 0..MAX_IN_FLIGHT as u64 {
            s.next_batch(&"t-0", id, 1).unwrap();
        }
        assert_eq!(s.next_batch(&"t-0", 9, 1), Err(Hold::InFlightFull));
        assert!(s.next_batch(&"t-1", 9, 1).is_ok());
    }

    /// A gap on one partition: epoch+1, that partition's in-flight batches renumbered from 0
    /// (to be restamped), another partition finishing under the old epoch before restarting.
    #[test]
    fn a_gap_bumps_the_epoch_and_renumbers_the_partition() {
        let mut s = Sequences::new();
        s.set_producer(P);
        let a = s.next_batch(&"t-0", 1, 3).unwrap();
        let b = s.next_batch(&"t-0", 2, 2).unwrap();
        let c = s.next_batch(&"t-1", 3, 4).unwrap();
        assert_eq!(
            s.on_answer(&"t-0", 1, a, &answer(KafkaCode::OutOfOrderSequenceNumber)),
            Action::RetryAfterBump
        );
        assert!(s.bump_required());
        assert_eq!(s.next_batch(&"t-1", 4, 1), Err(Hold::BumpPending));
        let bumped = ProducerIdEpoch { id: 1000, epoch: 1 };
        assert_eq!(
            s.bump_epoch(),
            Bump::Bumped {
                producer: bumped,
                restamp: vec!["t-0"]
            }
        );
        assert!(!s.bump_required());
        assert_eq!(s.bump_epoch(), Bump::NotNeeded);
        // Renumbered under the new epoch: restamp before resending.
        assert_eq!(s.resend(&"t-0", 1), Resend::Now(bumped.batch(0)));
        assert_eq!(s.resend(&"t-0", 2), Resend::Wait);
        // The old attempt of the second batch echoes the gap: retried, not another bump.
        assert_eq!(
            s.on_answer(&"t-0", 2, b, &answer(KafkaCode::OutOfOrderSequenceNumber)),
            Action::Retry
        );
        assert!(!s.bump_required());
        assert_eq!(
            s.on_answer(&"t-0", 1, bumped.batch(0), &answer(KafkaCode::None)),
            Action::Complete {
                base_offset: Some(10)
            }
        );
        assert_eq!(s.resend(&"t-0", 2), Resend::Now(bumped.batch(3)));
        assert_eq!(s.next_batch(&"t-0", 5, 1).unwrap(), bumped.batch(5));

        // t-1 still has its old-epoch batch in flight: no new-epoch batch may overtake it.
        assert_eq!(s.next_batch(&"t-1", 6, 1), Err(Hold::OldEpochInFlight));
        assert_eq!(s.resend(&"t-1", 3), Resend::Now(c));
        s.on_answer(&"t-1", 3, c, &answer(KafkaCode::None));
        // Drained: it restarts at 0 under the new epoch.
        assert_eq!(s.next_batch(&"t-1", 6, 1).unwrap(), bumped.batch(0));
    }

    #[test]
    fn broker_lost_the_producer_state() {
        let mut s = Sequences::new();
        s.set_producer(P);
        let a = s.next_batch(&"t-0", 1, 3).unwrap();
        s.on_answer(&"t-0", 1, a, &answer(KafkaCode::None));
        let b = s.next_batch(&"t-0", 2, 3).unwrap();
        assert_eq!(b.base_sequence, 3);
        let lost = PartitionAnswer {
            code: KafkaCode::UnknownProducerId,
            base_offset: -1,
            log_start_offset: 1_000,
        };
        assert_eq!(s.on_answer(&"t-0", 2, b, &lost), Action::RetryAfterBump);
        let Bump::Bumped { producer, restamp } = s.bump_epoch() else {
            panic!()
        };
        assert_eq!(restamp, vec!["t-0"]);
        assert_eq!(s.resend(&"t-0", 2), Resend::Now(producer.batch(0)));
        // The last acked offset survives the renumbering; the acked sequence restarts.
        let v = s.view(&"t-0").unwrap();
        assert_eq!((v.last_acked_sequence, v.last_acked_offset), (None, Some(12)));
    }

    /// A renumbered batch keeps its reset mark for later attempts too (Java's
    /// `sequenceHasBeenReset`): its sequence errors do not bump again.
    #[test]
    fn a_renumbered_batch_does_not_bump_again() {
        let mut s = Sequences::new();
        s.set_producer(P);
        let a = s.next_batch(&"t-0", 1, 3).unwrap();
        s.on_answer(&"t-0", 1, a, &answer(KafkaCode::UnknownProducerId));
        let Bump::Bumped { producer, .. } = s.bump_epoch() else {
            panic!()
        };
        let again = producer.batch(0);
        assert_eq!(s.resend(&"t-0", 1), Resend::Now(again));
        for code in [KafkaCode::UnknownProducerId, KafkaCode::OutOfOrderSequenceNumber] {
            assert_eq!(
                s.on_answer(&"t-0", 1, again, &answer(code)),
                Action::Retry,
                "{code}"
            );
            assert!(!s.bump_required(), "{code}");
        }
    }

    #[test]
    fn row_message_too_large_splits_a_batch_of_more_than_one_record() {
        for b in [
            batch(5),
            AnsweredBatch {
                record_count: 2,
                ..batch(5)
            },
        ] {
            assert_eq!(
                table(acked(4), b, answer(KafkaCode::MessageTooLarge)),
                Action::Split
            );
            // Transactional too, as Java's Sender splits whatever the producer.
            assert_eq!(
                on_partition_answer(&acked(4), &b, &answer(KafkaCode::MessageTooLarge), true),
                Action::Split
            );
        }
    }

    /// A batch refused as too large with two batches in flight after it: its pieces take its
    /// sequences (no bump), the batches after it keep theirs, and everything goes out in
    /// sequence order, the later batches' out-of-order refusals retried.
    #[test]
    fn a_split_batch_gives_its_sequences_to_its_pieces_and_the_later_batches_keep_theirs() {
        let mut s = Sequences::new();
        s.set_producer(P);
        let a = s.next_batch(&"t-0", 1, 3).unwrap();
        let ok = |off| PartitionAnswer {
            base_offset: off,
            ..answer(KafkaCode::None)
        };
        s.on_answer(&"t-0", 1, a, &ok(0));
        let big = s.next_batch(&"t-0", 2, 5).unwrap();
        let after = s.next_batch(&"t-0", 3, 2).unwrap();
        let later = s.next_batch(&"t-0", 4, 1).unwrap();
        assert_eq!([big, after, later].map(|b| b.base_sequence), [3, 8, 10]);
        assert_eq!(
            s.on_answer(&"t-0", 2, big, &answer(KafkaCode::MessageTooLarge)),
            Action::Split
        );
        // Waiting for its pieces: nothing changed yet, nothing to bump.
        assert_eq!(s.in_flight(&"t-0"), 3);
        assert!(!s.bump_required());
        // Counts that are not the batch's change nothing.
        assert_eq!(s.split(&"t-0", 2, &[(5, 2), (6, 2)]), None);
        assert_eq!(s.split(&"t-0", 2, &[(5, 5), (6, 0)]), None);
        assert_eq!(s.split(&"t-0", 9, &[(5, 1)]), None);
        assert_eq!(s.in_flight(&"t-0"), 3);
        let stamps = s.split(&"t-0", 2, &[(5, 2), (6, 3)]).unwrap();
        assert_eq!(stamps, vec![P.batch(3), P.batch(5)]);
        assert_eq!(s.in_flight(&"t-0"), 4);
        assert_eq!(s.resend(&"t-0", 2), Resend::Unknown);
        // In sequence order: the first piece, then each after the one before is answered.
        assert_eq!(s.resend(&"t-0", 5), Resend::Now(P.batch(3)));
        assert_eq!(s.resend(&"t-0", 6), Resend::Wait);
        assert_eq!(s.resend(&"t-0", 3), Resend::Wait);
        // The batches after it were refused as out of order (3 was never written): retried
        // with their sequences, not a gap.
        for (id, sent) in [(3, after), (4, later)] {
            assert_eq!(
                s.on_answer(&"t-0", id, sent, &answer(KafkaCode::OutOfOrderSequenceNumber)),
                Action::Retry
            );
        }
        assert!(!s.bump_required());
        // A piece can be split again, within its own range.
        assert_eq!(
            s.on_answer(&"t-0", 6, P.batch(5), &answer(KafkaCode::MessageTooLarge)),
            Action::Split
        );
        assert_eq!(
            s.split(&"t-0", 6, &[(7, 1), (8, 2)]).unwrap(),
            vec![P.batch(5), P.batch(6)]
        );
        let mut offset = 3;
        for (id, stamp, count) in [
            (5, P.batch(3), 2),
            (7, P.batch(5), 1),
            (8, P.batch(6), 2),
            (3, after, 2),
            (4, later, 1),
        ] {
            assert_eq!(s.resend(&"t-0", id), Resend::Now(stamp), "batch {id}");
            assert_eq!(
                s.on_answer(&"t-0", id, stamp, &ok(offset)),
                Action::Complete {
                    base_offset: Some(offset)
                }
            );
            offset += count;
        }
        let v = s.view(&"t-0").unwrap();
        assert_eq!((v.last_acked_sequence, v.last_acked_offset), (Some(10), Some(10)));
        assert_eq!(s.in_flight(&"t-0"), 0);
        assert!(!s.bump_required());
        assert_eq!(s.next_batch(&"t-0", 9, 1).unwrap(), P.batch(11));
    }

    /// Pieces of a batch renumbered by a bump take its new numbering, and are renumbered
    /// with the others by a later bump.
    #[test]
    fn pieces_follow_the_numbering_of_their_batch_across_bumps() {
        let mut s = Sequences::new();
        s.set_producer(P);
        let a = s.next_batch(&"t-0", 1, 1).unwrap();
        let b = s.next_batch(&"t-0", 2, 4).unwrap();
        s.on_answer(&"t-0", 1, a, &answer(KafkaCode::UnknownProducerId));
        let Bump::Bumped { producer, .. } = s.bump_epoch() else {
            panic!()
        };
        // The old attempt of b answers after the bump: its pieces take b's new range.
        assert_eq!(
            s.on_answer(&"t-0", 2, b, &answer(KafkaCode::MessageTooLarge)),
            Action::Split
        );
        assert_eq!(
            s.split(&"t-0", 2, &[(3, 2), (4, 2)]).unwrap(),
            vec![producer.batch(1), producer.batch(3)]
        );
        // A piece's single record too large: failed, a gap, bumped; the rest renumbered.
        assert_eq!(s.resend(&"t-0", 1), Resend::Now(producer.batch(0)));
        s.on_answer(&"t-0", 1, producer.batch(0), &answer(KafkaCode::None));
        let one = s.split(&"t-0", 3, &[(5, 1), (6, 1)]).unwrap();
        assert_eq!(
            s.on_answer(&"t-0", 5, one[0], &answer(KafkaCode::MessageTooLarge)),
            Action::Fail { bump: true }
        );
        let Bump::Bumped { producer: next, .. } = s.bump_epoch() else {
            panic!()
        };
        assert_eq!(s.resend(&"t-0", 6), Resend::Now(next.batch(0)));
        assert_eq!(s.resend(&"t-0", 4), Resend::Wait);
        s.on_answer(&"t-0", 6, next.batch(0), &answer(KafkaCode::None));
        assert_eq!(s.resend(&"t-0", 4), Resend::Now(next.batch(1)));
    }

    #[test]
    fn a_failed_batch_leaves_a_gap_that_bumps() {
        let mut s = Sequences::new();
        s.set_producer(P);
        // One record: too large on its own, it fails (a larger batch would be split).
        let a = s.next_batch(&"t-0", 1, 1).unwrap();
        s.next_batch(&"t-0", 2, 3).unwrap();
        assert_eq!(
            s.on_answer(&"t-0", 1, a, &answer(KafkaCode::MessageTooLarge)),
            Action::Fail { bump: true }
        );
        assert_eq!(s.in_flight(&"t-0"), 1);
        assert!(s.bump_required());
        s.bump_epoch();
        // The survivor moves down to sequence 0.
        assert_eq!(
            s.resend(&"t-0", 2),
            Resend::Now(ProducerIdEpoch { id: 1000, epoch: 1 }.batch(0))
        );
    }

    #[test]
    fn a_success_under_the_old_numbering_renumbers_again() {
        let mut s = Sequences::new();
        s.set_producer(P);
        let a = s.next_batch(&"t-0", 1, 3).unwrap();
        let b = s.next_batch(&"t-0", 2, 3).unwrap();
        s.on_answer(&"t-0", 2, b, &answer(KafkaCode::UnknownProducerId));
        s.bump_epoch();
        // The first batch's old attempt was written after all.
        assert_eq!(
            s.on_answer(&"t-0", 1, a, &answer(KafkaCode::None)),
            Action::Complete {
                base_offset: Some(10)
            }
        );
        assert!(s.bump_required());
        s.bump_epoch();
        assert_eq!(
            s.resend(&"t-0", 2),
            Resend::Now(ProducerIdEpoch { id: 1000, epoch: 2 }.batch(0))
        );
    }

    #[test]
    fn an_exhausted_epoch_needs_a_new_producer_id() {
        let mut s = Sequences::new();
        let last = ProducerIdEpoch {
            id: 5,
            epoch: i16::MAX,
        };
        s.set_producer(last);
        let a = s.next_batch(&"t-0", 1, 1).unwrap();
        s.on_answer(&"t-0", 1, a, &answer(KafkaCode::OutOfOrderSequenceNumber));
        assert_eq!(s.bump_epoch(), Bump::NeedProducerId);
        assert_eq!(s.producer(), ProducerIdEpoch::NONE);
        assert_eq!(s.next_batch(&"t-0", 2, 1), Err(Hold::NoProducerId));
        let fresh = ProducerIdEpoch { id: 6, epoch: 0 };
        assert_eq!(s.set_producer(fresh), vec!["t-0"]);
        assert_eq!(s.resend(&"t-0", 1), Resend::Now(fresh.batch(0)));
    }

    #[test]
    fn a_batch_given_up_on_holds_the_partition_until_resolved() {
        // Later batches were written: the one given up on was too.
        let mut s = Sequences::new();
        s.set_producer(P);
        s.next_batch(&"t-0", 1, 3).unwrap();
        let b = s.next_batch(&"t-0", 2, 3).unwrap();
        assert!(!s.give_up(&"t-0", 1));
        assert_eq!(s.next_batch(&"t-0", 3, 1), Err(Hold::Unresolved));
        s.on_answer(&"t-0", 2, b, &answer(KafkaCode::None));
        assert!(!s.bump_required());
        assert_eq!(s.next_batch(&"t-0", 3, 1).unwrap().base_sequence, 6);

        // Nothing after it was written: its fate stays unknown, so bump.
        let mut s = Sequences::new();
        s.set_producer(P);
        s.next_batch(&"t-0", 1, 3).unwrap();
        assert!(s.give_up(&"t-0", 1));
        assert!(s.bump_required());
        assert!(matches!(s.bump_epoch(), Bump::Bumped { .. }));
        assert_eq!(s.next_batch(&"t-0", 2, 1).unwrap().base_sequence, 0);
    }

    // InitProducerId.

    #[test]
    fn init_request_per_version() {
        for v in 0..=5 {
            let r = init_request(v, InitPurpose::Fresh);
            assert_eq!(r.transactional_id, None);
            assert_eq!((r.producer_id, r.producer_epoch), (-1, -1));
            r.to_bytes(v).unwrap();
            let bump = init_request(v, InitPurpose::Bump(P));
            if v >= 3 {
                assert_eq!((bump.producer_id, bump.producer_epoch), (1000, 0), "v{v}");
                assert_eq!(InitPurpose::Bump(P).at_version(v), InitPurpose::Bump(P));
            } else {
                // v0-v2 cannot carry it: a new id instead.
                assert_eq!((bump.producer_id, bump.producer_epoch), (-1, -1), "v{v}");
                assert_eq!(InitPurpose::Bump(P).at_version(v), InitPurpose::Fresh);
            }
            bump.to_bytes(v).unwrap();
        }
    }

    fn init_answer(code: KafkaCode, id: i64, epoch: i16) -> InitProducerIdResponse {
        InitProducerIdResponse {
            error_code: code.code(),
            producer_id: id,
            producer_epoch: epoch,
            ..Default::default()
        }
    }

    #[test]
    fn init_answer_gives_the_id_or_says_what_to_do() {
        assert_eq!(
            read_init_answer(&init_answer(KafkaCode::None, 42, 3)).unwrap(),
            ProducerIdEpoch { id: 42, epoch: 3 }
        );
        assert!(matches!(
            read_init_answer(&init_answer(KafkaCode::None, -1, -1)),
            Err(InitFailure::Retry(_))
        ));
        for code in [
            KafkaCode::CoordinatorLoadInProgress,
            KafkaCode::CoordinatorNotAvailable,
            KafkaCode::NotCoordinator,
            KafkaCode::ConcurrentTransactions,
            KafkaCode::RequestTimedOut,
        ] {
            assert!(
                matches!(
                    read_init_answer(&init_answer(code, -1, -1)),
                    Err(InitFailure::Retry(c)) if c == code
                ),
                "{code}"
            );
        }
        for code in [
            KafkaCode::TransactionalIdAuthorizationFailed,
            KafkaCode::InvalidRequest,
            KafkaCode::ProducerFenced,
        ] {
            assert!(
                matches!(
                    read_init_answer(&init_answer(code, -1, -1)),
                    Err(InitFailure::Fatal(Error::Kafka { code: c, .. })) if c == code
                ),
                "{code}"
            );
        }
    }

    #[test]
    fn init_denied_names_the_idempotent_write_acl() {
        let Err(InitFailure::Fatal(e)) =
            read_init_answer(&init_answer(KafkaCode::ClusterAuthorizationFailed, -1, -1))
        else {
            panic!()
        };
        assert!(matches!(
            e,
            Error::Authorization {
                resource: Resource::Cluster,
                ..
            }
        ));
        let text = e.to_string();
        for part in [
            "IDEMPOTENT_WRITE",
            "the cluster",
            "InitProducerId",
            "enable.idempotence=false",
        ] {
            assert!(text.contains(part), "{text}");
        }
    }

    // Config and support.

    #[test]
    fn max_in_flight_above_five_with_idempotence_is_an_error() {
        let e = check_config(Some(true), 6, Acks::All, 3).unwrap_err();
        assert!(matches!(
            e,
            Error::Config {
                property: "max.in.flight.requests.per.connection",
                ..
            }
        ));
        assert!(e.to_string().contains("at most 5"), "{e}");
        assert_eq!(
            check_config(Some(true), 5, Acks::All, 3).unwrap(),
            Requested::Idempotent
        );
        assert_eq!(
            check_config(None, 5, Acks::All, 3).unwrap(),
            Requested::Idempotent
        );
        // Left at its default, idempotence gives way.
        assert_eq!(
            check_config(None, 6, Acks::All, 3).unwrap(),
            Requested::Not(WhyNot::Conflicts("max.in.flight.requests.per.connection"))
        );
        assert_eq!(
            check_config(Some(false), 50, Acks::None, 0).unwrap(),
            Requested::Not(WhyNot::Disabled)
        );
    }

    #[test]
    fn acks_and_retries_must_allow_idempotence() {
        for (acks, retries, property) in [(Acks::Leader, 3, "acks"), (Acks::All, 0, "retries")] {
            let e = check_config(Some(true), 5, acks, retries).unwrap_err();
            assert!(
                matches!(e, Error::Config { property: p, .. } if p == property),
                "{e}"
            );
            assert_eq!(
                check_config(None, 5, acks, retries).unwrap(),
                Requested::Not(WhyNot::Conflicts(property))
            );
        }
    }

    #[test]
    fn support_needs_kafka_0_11_and_says_why_not() {
        let new = releases::by_name("kraft-4.4").unwrap().apis.clone();
        assert_eq!(
            support(Requested::Idempotent, &new),
            Support::Idempotent { init_version: 5 }
        );
        let v0 = releases::by_name("zk-0.11.0").unwrap().apis.clone();
        assert_eq!(
            support(Requested::Idempotent, &v0),
            Support::Idempotent { init_version: 0 }
        );
        let old = releases::by_name("zk-0.10.2").unwrap().apis.clone();
        let s = support(Requested::Idempotent, &old);
        assert_eq!(s, Support::NotIdempotent(WhyNot::BrokerTooOld));
        assert!(WhyNot::BrokerTooOld.to_string().contains("0.11"));
        assert_eq!(
            support(Requested::Not(WhyNot::Disabled), &new),
            Support::NotIdempotent(WhyNot::Disabled)
        );
        assert_eq!(WhyNot::Disabled.to_string(), "enable.idempotence=false");
    }
}
