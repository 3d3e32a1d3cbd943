//! The one error type of the crate.
//!
//! Each variant says which thing failed in terms a caller can act on: which timeout fired,
//! which API a broker error came from, which versions did not overlap. Display texts are
//! written for an operator reading a log.

use crate::authorization::{self, Resource, Scope};
use crate::group::TopicPartition;
use crate::net::releases;
use crate::protocol::{ApiKey, DecodeError, EncodeError, VersionRange};
use crate::records::RecordsError;
use crate::KafkaCode;
use std::fmt;
use std::io;
use std::time::Duration;

/// Which timeout fired.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Timeout {
    /// TCP connect (`socket.connection.setup.timeout.ms`).
    Connect,
    /// Waiting for a response (`request.timeout.ms`, or the rebalance timeout for JoinGroup).
    Response,
    /// Writing a request.
    Write,
    /// An operation that retried until its deadline (e.g. finding a coordinator).
    Retries,
    /// Waiting for a connection busy with another caller's request (one request at a time
    /// per connection): the caller's own timeout ran out before its request could start.
    Queued,
}

/// A broker API that is too old for a capability, as found in one check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingApi {
    /// The API.
    pub api: ApiKey,
    /// The lowest version the capability needs.
    pub needed: i16,
    /// What the broker advertises, `None` if it does not have the API at all.
    pub broker: Option<VersionRange>,
}

/// A frame or response that breaks the protocol.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProtocolViolation {
    /// A response carried another request's correlation id.
    CorrelationMismatch {
        /// The id sent.
        expected: i32,
        /// The id received.
        received: i32,
    },
    /// A frame's size prefix is negative or above `max.response.size`.
    FrameSize {
        /// The size the peer announced.
        size: i64,
        /// The configured maximum.
        max: usize,
    },
    /// ApiVersions could not be agreed on (the broker kept rejecting lower versions).
    Handshake(String),
}

/// What an application must do after an [`Error::Transaction`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TransactionAction {
    /// Abort the transaction ([`Producer::abort_transaction`](crate::Producer::abort_transaction))
    /// and redo its work from the last committed offsets; the producer stays usable.
    Abort,
    /// Close the producer: it cannot be used any more (fenced, not authorized, or its state
    /// lost). A new producer with the same `transactional.id` may start over.
    Close,
}

/// Whether `e` says another producer with the same transactional id took over.
fn is_fencing(e: &Error) -> bool {
    matches!(
        e.kafka_code(),
        Some(
            KafkaCode::ProducerFenced
                | KafkaCode::InvalidProducerEpoch
                | KafkaCode::TransactionCoordinatorFenced
        )
    )
}

/// Everything that can go wrong in the client.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// Invalid configuration, found before any network call.
    Config {
        /// The Kafka property (or setter) concerned, e.g. `group.instance.id`.
        property: &'static str,
        /// What is wrong with it.
        problem: String,
    },
    /// A socket operation failed.
    Io {
        /// The broker address.
        addr: String,
        /// The underlying error.
        source: io::Error,
    },
    /// A timeout fired.
    Timeout {
        /// Which one.
        which: Timeout,
        /// What timed out: a broker address for a socket timeout, the operation for
        /// [`Timeout::Retries`] (e.g. `finding the coordinator of group billing`).
        operation: String,
        /// The last error the operation retried past before time ran out (e.g. the address and
        /// `connection refused`), so the cause is never lost behind the timeout.
        last: Option<Box<Error>>,
    },
    /// The broker answered with an error code.
    Kafka {
        /// The API the error came from.
        api: ApiKey,
        /// The error code.
        code: KafkaCode,
        /// The broker's error message, when it sent one.
        message: Option<String>,
    },
    /// The broker's authorizer denied the request: the principal has no ACL allowing what the
    /// request needed on `resource` (`TOPIC_AUTHORIZATION_FAILED`, `GROUP_AUTHORIZATION_FAILED`,
    /// `CLUSTER_AUTHORIZATION_FAILED`). Returned by the call that needed the ACL (poll, commit,
    /// join, send, an admin call) and never retried: the same request fails the same way until
    /// an ACL is added. A [`GroupMember`](crate::group::GroupMember) (and so a
    /// [`Consumer`](crate::Consumer)) denied its group stops, as when fenced: its heartbeats
    /// stop and every later call returns this error. Display names the resource and, where
    /// Kafka's ACL table says, the operation (`READ`, `WRITE`, `DESCRIBE` …) the principal needs.
    Authorization {
        /// The API that was denied.
        api: ApiKey,
        /// The broker's code (one of the three above).
        code: KafkaCode,
        /// What the ACL is missing on.
        resource: Resource,
        /// The broker's error message, when it sent one.
        message: Option<String>,
    },
    /// No version of an API is supported by both the client and the broker.
    UnsupportedVersion {
        /// The API.
        api: ApiKey,
        /// The versions this client implements (after any configured cap).
        ours: VersionRange,
        /// What the broker advertises, `None` if it lacks the API.
        broker: Option<VersionRange>,
    },
    /// The broker is too old for a capability the configuration asks for.
    MissingCapability {
        /// What was asked for, e.g. `static membership (group.instance.id)`.
        capability: &'static str,
        /// Every API that is too old.
        missing: Vec<MissingApi>,
        /// The oldest Kafka release that has the capability.
        since_release: Option<&'static str>,
        /// The release the broker's versions match best.
        broker_release: Option<&'static str>,
    },
    /// A request could not be encoded.
    Encode {
        /// The API.
        api: ApiKey,
        /// Why.
        source: EncodeError,
    },
    /// A response could not be decoded.
    Decode {
        /// The API.
        api: ApiKey,
        /// Why.
        source: DecodeError,
    },
    /// The peer broke the protocol; the connection was closed.
    Protocol {
        /// The broker address.
        addr: String,
        /// What happened.
        violation: ProtocolViolation,
    },
    /// The TLS handshake (or a TLS record) with a broker failed: an untrusted, expired or
    /// mismatched certificate, a broker that wants a client certificate, or a listener that does
    /// not speak TLS. Not retried: every broker of a cluster would answer the same.
    Tls {
        /// The broker address.
        addr: String,
        /// The TLS library's error.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A record is too large for a limit the client knows before sending it (a broker's own
    /// `MESSAGE_TOO_LARGE` answer is an [`Error::Kafka`]): it was refused at once, not sent,
    /// since no retry could make it fit.
    RecordTooLarge {
        /// The record's topic.
        topic: String,
        /// The record's estimated size in a batch, in bytes.
        size: usize,
        /// The limit, in bytes.
        max: usize,
        /// The setting the limit comes from, e.g. `max.request.size`.
        property: &'static str,
    },
    /// Records could not be written in the record format the partition's leader speaks (the
    /// legacy message sets of brokers before 0.11, magic 0 and 1, cannot carry everything a
    /// record batch can). Not retried: the same broker would need the same format again.
    NotEncodable {
        /// The partition the records were for.
        partition: TopicPartition,
        /// The record format (magic byte) the broker's Produce version needs.
        magic: i8,
        /// What the encoder refused.
        source: RecordsError,
    },
    /// Records sent since the previous [`Producer::flush`](crate::Producer::flush) failed for
    /// good (each record's own error is in its [`DeliveryHandle`](crate::DeliveryHandle)):
    /// how many, and the first failure, shared with those records' handles.
    /// [`kafka_code`](Error::kafka_code) is the first failure's.
    Delivery {
        /// Records that failed since the previous flush.
        failed: usize,
        /// The first failure among them.
        first: std::sync::Arc<Error>,
    },
    /// A transactional producer's transaction (or the producer itself) failed, and `action`
    /// says what the application must do next: the categories of Kafka's KIP-1050. Errors a
    /// retry can fix (`CONCURRENT_TRANSACTIONS`, a coordinator moving or loading) are retried
    /// inside the call's timeout and never come back as this.
    ///
    /// - [`TransactionAction::Abort`]: the transaction cannot commit (a record was not written,
    ///   the consumer group refused the offsets because this member is no longer current, the
    ///   principal may not write a topic). Call
    ///   [`abort_transaction`](crate::Producer::abort_transaction), then redo the work from the
    ///   last committed offsets (seek the consumer back to them); the producer stays usable.
    /// - [`TransactionAction::Close`]: the producer can do nothing more (another producer with
    ///   the same `transactional.id` fenced it, the principal may not use the transactional id,
    ///   the broker lost the transaction's state): close it. If it was fenced, a newer
    ///   instance has taken over and this one must stop writing.
    Transaction {
        /// `transactional.id`.
        transactional_id: String,
        /// What to do.
        action: TransactionAction,
        /// What went wrong (a broker code as [`Error::Kafka`] or [`Error::Authorization`], a
        /// record's [`Error::Delivery`] …), shared by every call that reports it.
        cause: std::sync::Arc<Error>,
    },
    /// A transactional producer's method was called in a state that does not allow it, e.g.
    /// [`send`](crate::Producer::send) before
    /// [`begin_transaction`](crate::Producer::begin_transaction) (Java's
    /// `IllegalStateException`). Nothing was sent.
    TransactionState {
        /// The method called.
        call: &'static str,
        /// The state the producer was in, e.g. `not initialized`, `in a transaction`.
        state: &'static str,
    },
    /// [`Producer::send`](crate::Producer::send) waited `max.block.ms` for room in
    /// `buffer.memory` and found none: records are sent faster than the brokers acknowledge
    /// them (Java's `BufferExhaustedException`). The record was not queued.
    BufferFull {
        /// `buffer.memory`.
        buffer_memory: usize,
        /// How long the send waited (`max.block.ms`).
        waited: std::time::Duration,
    },
    /// No leader is known for a partition a call needs one for (the producer's records, a
    /// ListOffsets): the metadata lists no such partition, or none with a leader.
    NoLeader {
        /// The partition.
        partition: TopicPartition,
    },
    /// A broker id that is neither in the cluster metadata nor a coordinator seen since.
    UnknownBroker {
        /// The broker id asked for.
        id: i32,
    },
    /// A broker address that resolved to no socket address: the host is unknown to DNS (or
    /// the name service failed), or the lookup found nothing.
    Unresolved {
        /// The address (`host:port`).
        addr: String,
        /// The resolver's error, `None` when the lookup succeeded with no address.
        source: Option<io::Error>,
    },
    /// [`ClientBuilder::property`](crate::ClientBuilder::property) was given a property name
    /// this client does not know (a typo, or a setting of another client such as
    /// `ssl.keystore.location`).
    UnknownProperty {
        /// The name as given.
        property: String,
    },
    /// There was nowhere to send a request: no broker known and no bootstrap address.
    NoBrokers,
    /// A broker's answer named another broker at an address that cannot be connected to.
    InvalidBrokerAddress {
        /// The broker id it gave.
        id: i32,
        /// The host it gave.
        host: String,
        /// The port it gave (outside 1..=65535).
        port: i32,
    },
    /// After failed connection attempts to `addr`, the next one (held back by
    /// `reconnect.backoff.ms`, doubling up to `reconnect.backoff.max.ms`) would begin after
    /// the operation's deadline, so it was not made.
    ReconnectBackoff {
        /// The broker address.
        addr: String,
        /// How long until the next attempt was allowed.
        retry_in: Duration,
        /// The failure of the last attempt (e.g. the address and `connection refused`).
        last: Option<Box<Error>>,
    },
    /// A group member found no coordinator to send to.
    NoCoordinator {
        /// The group.
        group: String,
    },
    /// Another process joined the group with this member's `group.instance.id`; the member
    /// stopped and will not rejoin (two processes sharing an instance id would otherwise fence
    /// each other forever).
    Fenced {
        /// The group.
        group: String,
        /// The instance id in use elsewhere.
        instance_id: String,
    },
    /// Under the consumer group protocol (KIP-848), the coordinator kept refusing this
    /// member's `group.instance.id` with `UNRELEASED_INSTANCE_ID` (111): a member with that
    /// instance id is still in the group and has not left. Either another process uses the
    /// same instance id — and, unlike the classic protocol, this protocol refuses the
    /// **newcomer** and leaves the running member consuming — or the previous process of this
    /// instance was stopped without its leave heartbeat and the broker has not expired it yet
    /// (`group.consumer.session.timeout.ms`). The member stopped; a new one may try again.
    InstanceInUse {
        /// The group.
        group: String,
        /// The instance id in use.
        instance_id: String,
        /// How many heartbeats were refused.
        attempts: u32,
    },
    /// JoinGroup answered `INVALID_SESSION_TIMEOUT` (26): the member's `session.timeout.ms` is
    /// outside the coordinator broker's `group.min.session.timeout.ms` and
    /// `group.max.session.timeout.ms`, read with DescribeConfigs when this happens (Java's
    /// consumer reports the code only). [`kafka_code`](Error::kafka_code) gives the code.
    InvalidSessionTimeout {
        /// The group.
        group: String,
        /// The `session.timeout.ms` that was sent.
        session_timeout: std::time::Duration,
        /// The broker's `group.min.session.timeout.ms` and `group.max.session.timeout.ms`;
        /// `None` when they could not be read.
        broker_bounds: Option<(std::time::Duration, std::time::Duration)>,
        /// Why the bounds could not be read (`None` when they were).
        bounds_unread: Option<String>,
    },
    /// Subscribed topics do not exist (with
    /// [`MissingTopicPolicy::Error`](crate::MissingTopicPolicy::Error)). The member stays in
    /// its group and picks them up once they are created.
    TopicsMissing {
        /// The group.
        group: String,
        /// The topics.
        topics: Vec<String>,
    },
    /// The group coordinator ended the member's membership with an error retrying cannot fix.
    Group {
        /// The group.
        group: String,
        /// The error code.
        code: KafkaCode,
        /// What the member was doing.
        during: &'static str,
    },
    /// `auto.offset.reset` is `none` ([`OffsetReset::Error`](crate::OffsetReset::Error)) and
    /// a consumer's partitions have no valid position. The consumer keeps returning this from
    /// `poll` until the application seeks them.
    NoOffset {
        /// Each partition with the offset found out of range, or `None` when nothing is
        /// committed for it.
        partitions: Vec<(TopicPartition, Option<i64>)>,
    },
    /// A consumer was asked to act on a partition it is not assigned.
    NotAssigned(TopicPartition),
    /// The connection or client was closed.
    Closed,
    /// Another thread called [`WakeupHandle::wakeup`](crate::WakeupHandle::wakeup): the blocked
    /// (or next) call returned at once instead of waiting. Returned once per wakeup; the consumer
    /// or member stays usable (Java's `WakeupException`).
    Wakeup,
    /// SASL authentication failed: the broker refused the credentials
    /// (`SASL_AUTHENTICATION_FAILED`, with its message), or the broker could not prove it knows
    /// the SCRAM password, or it broke the mechanism's exchange.
    Authentication {
        /// The SASL mechanism, e.g. `SCRAM-SHA-512`.
        mechanism: &'static str,
        /// What happened; never contains a password or token.
        message: String,
    },
    /// The broker does not enable the configured `sasl.mechanism`.
    UnsupportedMechanism {
        /// The mechanism configured.
        wanted: &'static str,
        /// The mechanisms the broker enables.
        enabled: Vec<String>,
    },
    /// The application's OAUTHBEARER token provider failed.
    TokenProvider {
        /// Its error.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Config { property, problem } => write!(f, "invalid configuration `{property}`: {problem}"),
            Error::Io { addr, source } => write!(f, "I/O error talking to {addr}: {source}"),
            Error::Timeout { which, operation, last } => {
                let what = match which {
                    Timeout::Connect => "connect timeout",
                    Timeout::Response => "timed out waiting for a response",
                    Timeout::Write => "timed out writing a request",
                    Timeout::Retries => "retries ran out of time",
                    Timeout::Queued => "timed out waiting for a busy connection",
                };
                write!(f, "{what} ({operation})")?;
                if let Some(last) = last {
                    write!(f, "; last error: {last}")?;
                }
                Ok(())
            }
            Error::Kafka { api, code, message } => {
                write!(f, "{} failed: {code}", api.name())?;
                if let Some(m) = message.as_deref().filter(|m| !m.is_empty()) {
                    write!(f, ": {m}")?;
                }
                Ok(())
            }
            Error::Authorization {
                api,
                code,
                resource,
                message,
            } => authorization::explain(f, *api, *code, resource, message.as_deref()),
            Error::UnsupportedVersion { api, ours, broker } => match broker {
                Some(b) => write!(
                    f,
                    "{} (API key {}): no common version; client supports {ours}, broker supports {b}",
                    api.name(),
                    api.key()
                ),
                None => write!(f, "{} (API key {}): the broker does not support this API", api.name(), api.key()),
            },
            Error::MissingCapability { capability, missing, since_release, broker_release } => {
                write!(f, "{capability} is not supported by this broker")?;
                if let Some(r) = broker_release {
                    write!(f, " (its API versions match Kafka {})", releases::number(r))?;
                }
                f.write_str(": ")?;
                for (i, m) in missing.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    match m.broker {
                        Some(b) => write!(f, "{} needs v{}+ but the broker supports {b}", m.api.name(), m.needed)?,
                        None => write!(f, "{} needs v{}+ but the broker lacks it", m.api.name(), m.needed)?,
                    }
                }
                if let Some(r) = since_release {
                    write!(f, "; it needs Kafka {} or newer", releases::number(r))?;
                }
                Ok(())
            }
            Error::Encode { api, source } => write!(f, "cannot encode {} request: {source}", api.name()),
            Error::Decode { api, source } => write!(f, "cannot decode {} response: {source}", api.name()),
            Error::Protocol { addr, violation } => match violation {
                ProtocolViolation::CorrelationMismatch { expected, received } => write!(
                    f,
                    "{addr}: response correlation id {received} does not match request {expected}; connection closed"
                ),
                ProtocolViolation::FrameSize { size, max } => write!(
                    f,
                    "{addr}: response size {size} is outside 0..={max} (is this a Kafka PLAINTEXT listener?); connection closed"
                ),
                ProtocolViolation::Handshake(m) => write!(f, "{addr}: ApiVersions handshake failed: {m}"),
            },
            Error::Tls { addr, source } => {
                write!(f, "TLS with {addr} failed: {}", tls_explanation(addr, source.as_ref()))
            }
            Error::RecordTooLarge { topic, size, max, property } => write!(
                f,
                "a record of about {size} bytes for topic {topic} does not fit in {property} {max} (with \
                 the request around it); it was not sent: raise {property} or send a smaller record"
            ),
            Error::NotEncodable { partition, magic, source } => write!(
                f,
                "{partition}: the leader's record format (magic {magic}) cannot carry these records: \
                 {source}; they were not sent"
            ),
            Error::NoLeader { partition } => write!(f, "{partition}: no leader is known for this partition"),
            Error::UnknownBroker { id } => write!(f, "broker {id} is not in the cluster metadata"),
            Error::Unresolved { addr, source: Some(e) } => write!(f, "cannot resolve {addr}: {e}"),
            Error::Unresolved { addr, source: None } => write!(f, "{addr} resolved to no address"),
            Error::UnknownProperty { property } => {
                write!(
                    f,
                    "unknown configuration property `{property}`: not a setting this client knows"
                )?;
                match crate::properties::nearest(property) {
                    Some(known) => write!(f, "; did you mean `{known}`?"),
                    None => Ok(()),
                }
            }
            Error::NoBrokers => f.write_str("no broker known and no bootstrap address to send to"),
            Error::InvalidBrokerAddress { id, host, port } => {
                write!(f, "broker {id} has an invalid address {host}:{port}")
            }
            Error::ReconnectBackoff { addr, retry_in, last } => {
                write!(
                    f,
                    "{addr}: the next connection attempt (reconnect.backoff.ms, in {retry_in:?}) is \
                     past this operation's deadline"
                )?;
                if let Some(last) = last {
                    write!(f, "; last error: {last}")?;
                }
                Ok(())
            }
            Error::NoCoordinator { group } => write!(f, "no coordinator found for group {group}"),
            Error::Fenced { group, instance_id } => write!(
                f,
                "group {group}: fenced: another process uses group.instance.id {instance_id:?}; this member \
                 stopped and will not rejoin (give each process its own instance id)"
            ),
            Error::InstanceInUse {
                group,
                instance_id,
                attempts,
            } => write!(
                f,
                "group {group}: group.instance.id {instance_id:?} is held by a member that has not left \
                 (UNRELEASED_INSTANCE_ID, {attempts} heartbeats refused): another process may be using it, \
                 and the consumer group protocol refuses the newcomer, not the running member; give each \
                 process its own instance id, or wait for the old process's session to expire"
            ),
            Error::InvalidSessionTimeout {
                group,
                session_timeout,
                broker_bounds,
                bounds_unread,
            } => {
                write!(
                    f,
                    "group {group}: JoinGroup failed: INVALID_SESSION_TIMEOUT: session.timeout.ms {} ms is ",
                    session_timeout.as_millis()
                )?;
                match (broker_bounds, bounds_unread) {
                    (Some((min, max)), _) => write!(
                        f,
                        "outside the broker's group.min.session.timeout.ms {} ms and \
                         group.max.session.timeout.ms {} ms; set a session timeout within them",
                        min.as_millis(),
                        max.as_millis()
                    ),
                    (None, why) => write!(
                        f,
                        "outside the broker's group.min.session.timeout.ms and \
                         group.max.session.timeout.ms, which could not be read ({})",
                        why.as_deref().unwrap_or("no answer")
                    ),
                }
            }
            Error::TopicsMissing { group, topics } => write!(
                f,
                "group {group}: subscribed topic(s) {} do not exist; {}",
                topics.join(", "),
                crate::group::missing_topics_hint()
            ),
            Error::Group { group, code, during } => write!(f, "group {group}: {during} failed: {code}"),
            Error::NoOffset { partitions } => {
                f.write_str("no valid offset for ")?;
                for (i, (tp, offset)) in partitions.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    match offset {
                        Some(o) => write!(f, "{tp} (offset {o} is out of range)")?,
                        None => write!(f, "{tp} (nothing committed)")?,
                    }
                }
                f.write_str(" and auto.offset.reset is none; seek these partitions")
            }
            Error::NotAssigned(tp) => write!(f, "partition {tp} is not assigned to this consumer"),
            Error::Transaction {
                transactional_id,
                action,
                cause,
            } => match action {
                TransactionAction::Abort => write!(
                    f,
                    "the transaction of transactional.id {transactional_id} cannot commit: \
                     {cause}; call abort_transaction, then redo the work from the last committed \
                     offsets"
                ),
                TransactionAction::Close if is_fencing(cause) => write!(
                    f,
                    "transactional producer {transactional_id} was fenced: another producer with \
                     the same transactional.id started (init_transactions) and took over ({cause}); \
                     close this producer"
                ),
                TransactionAction::Close => write!(
                    f,
                    "transactional producer {transactional_id} can do nothing more: {cause}; close it"
                ),
            },
            Error::TransactionState { call, state } => write!(
                f,
                "{call} is not allowed while the transactional producer is {state}"
            ),
            Error::Delivery { failed, first } => {
                write!(f, "{failed} record(s) were not delivered; the first failure: {first}")
            }
            Error::BufferFull {
                buffer_memory,
                waited,
            } => write!(
                f,
                "buffer.memory ({buffer_memory} bytes) stayed full for max.block.ms ({} ms): \
                 records are sent faster than the brokers acknowledge them",
                waited.as_millis()
            ),
            Error::Closed => f.write_str("closed"),
            Error::Wakeup => f.write_str("woken up by WakeupHandle::wakeup"),
            Error::Authentication { mechanism, message } => {
                write!(f, "SASL {mechanism} authentication failed: {message}")
            }
            Error::UnsupportedMechanism { wanted, enabled } => {
                write!(f, "SASL mechanism {wanted} is not enabled on the broker; it enables ")?;
                if enabled.is_empty() {
                    f.write_str("none")
                } else {
                    f.write_str(&enabled.join(", "))
                }
            }
            Error::TokenProvider { source } => write!(f, "the OAUTHBEARER token provider failed: {source}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            Error::Encode { source, .. } => Some(source),
            Error::Decode { source, .. } => Some(source),
            Error::NotEncodable { source, .. } => Some(source),
            Error::Timeout { last: Some(last), .. } => Some(last.as_ref()),
            Error::ReconnectBackoff { last: Some(last), .. } => Some(last.as_ref()),
            Error::Tls { source, .. } => Some(source.as_ref()),
            Error::Unresolved {
                source: Some(source), ..
            } => Some(source),
            Error::TokenProvider { source } => Some(source.as_ref()),
            Error::Delivery { first, .. } => Some(first.as_ref()),
            _ => None,
        }
    }
}

impl Error {
    /// A [`Timeout::Retries`] error for `operation`, keeping `last`, the error the retries
    /// were trying to get past. A `last` that is itself a retries timeout is unwrapped, so the
    /// chain names the real cause once rather than nesting timeouts.
    pub(crate) fn retries_timeout(operation: impl Into<String>, last: Option<Error>) -> Error {
        let last = last.map(|e| match e {
            Error::Timeout {
                which: Timeout::Retries,
                last: Some(inner),
                ..
            } => inner,
            // The backoff only held back another try: the cause is the try before it.
            Error::ReconnectBackoff {
                last: Some(inner), ..
            } => inner,
            e => Box::new(e),
        });
        Error::Timeout {
            which: Timeout::Retries,
            operation: operation.into(),
            last,
        }
    }

    /// A broker's answer `code` to `api` as an error: [`Error::Authorization`] for an
    /// authorization code whose resource `scope` names, [`Error::Kafka`] for anything else.
    /// The one constructor for codes that may be authorization failures.
    pub(crate) fn from_code(
        api: ApiKey,
        code: KafkaCode,
        scope: Scope<'_>,
        message: Option<String>,
    ) -> Error {
        match authorization::resource_for(code, scope) {
            Some(resource) => Error::Authorization {
                api,
                code,
                resource,
                message,
            },
            None => Error::Kafka { api, code, message },
        }
    }

    /// The [`Error::Authorization`] `code` means for `scope`'s resource, or `None` when `code`
    /// is not an authorization failure (the caller builds its own error then).
    pub(crate) fn authorization(api: ApiKey, code: KafkaCode, scope: Scope<'_>) -> Option<Error> {
        authorization::resource_for(code, scope).map(|resource| Error::Authorization {
            api,
            code,
            resource,
            message: None,
        })
    }

    /// [`from_code`](Self::from_code) for one item of a batch answer (a topic, a partition):
    /// a plain [`Error::Kafka`]'s message leads with `what`, then the broker's message; an
    /// authorization error names its resource itself and keeps the broker's message alone.
    pub(crate) fn from_code_about(
        api: ApiKey,
        code: KafkaCode,
        scope: Scope<'_>,
        what: &str,
        message: Option<String>,
    ) -> Error {
        let message = message.filter(|m| !m.is_empty());
        match Error::from_code(api, code, scope, message) {
            Error::Kafka { api, code, message } => Error::Kafka {
                api,
                code,
                message: Some(match message {
                    Some(m) => format!("{what}: {m}"),
                    None => what.to_string(),
                }),
            },
            e => e,
        }
    }

    /// [`from_code`](Self::from_code) for a code that came without a broker message, where the
    /// caller has `context` of its own for a plain [`Error::Kafka`] (which partitions, which
    /// broker). An authorization error names its resource itself and keeps `message` for what
    /// the broker said, so it gets none.
    pub(crate) fn from_code_in(api: ApiKey, code: KafkaCode, scope: Scope<'_>, context: String) -> Error {
        match Error::from_code(api, code, scope, None) {
            Error::Kafka { api, code, .. } => Error::Kafka {
                api,
                code,
                message: Some(context),
            },
            e => e,
        }
    }

    /// The Kafka error code, for broker errors (including authorization failures; for
    /// [`Error::Delivery`], its first failure's).
    pub fn kafka_code(&self) -> Option<KafkaCode> {
        match self {
            Error::Kafka { code, .. } | Error::Authorization { code, .. } => Some(*code),
            Error::InvalidSessionTimeout { .. } => Some(KafkaCode::InvalidSessionTimeout),
            Error::InstanceInUse { .. } => Some(KafkaCode::UnreleasedInstanceId),
            Error::Delivery { first, .. } => first.kafka_code(),
            Error::Transaction { cause, .. } => cause.kafka_code(),
            _ => None,
        }
    }

    /// Whether the connection that produced this error can no longer be used.
    pub fn breaks_connection(&self) -> bool {
        match self {
            // Neither a deadline reached between tries nor one reached waiting for another
            // caller's request to finish says anything about the connection.
            Error::Timeout { which, .. } => !matches!(which, Timeout::Retries | Timeout::Queued),
            Error::Io { .. }
            | Error::Protocol { .. }
            | Error::Decode { .. }
            | Error::Tls { .. }
            | Error::Closed => true,
            _ => false,
        }
    }

    /// Whether the broker could not be reached or its connection broke: another broker, or
    /// the same one later, may answer. A TLS failure is not among them: the certificates and
    /// settings that made it are the same for every broker and every try.
    pub(crate) fn is_unreachable(&self) -> bool {
        // A partition without a leader is the same condition seen from the metadata: wait for
        // it to show one.
        (self.breaks_connection() && !matches!(self, Error::Tls { .. }))
            || matches!(
                self,
                Error::NoLeader { .. }
                    | Error::UnknownBroker { .. }
                    | Error::Unresolved { .. }
                    | Error::NoBrokers
                    | Error::InvalidBrokerAddress { .. }
                    | Error::ReconnectBackoff { .. }
                    | Error::NoCoordinator { .. }
            )
    }

    /// Whether the same request may work later: lost connections, moving coordinators, unknown
    /// brokers, retriable codes (which include every stale-metadata code: Kafka's
    /// `InvalidMetadataException` is a `RetriableException`), and a connection another caller
    /// of the same client held until this call's time ran out (the request never went out: a
    /// poll that meets it at the end of its timeout tries again at the next poll, instead of
    /// failing the application over a neighbour's slow request).
    pub(crate) fn is_transient(&self) -> bool {
        self.is_coordinator_transient()
            || matches!(self, Error::Kafka { code, .. } if code.is_retriable())
            || self.is_queued()
    }

    /// Whether the request never went out: another caller of the same client held the
    /// connection until this call's deadline.
    pub(crate) fn is_queued(&self) -> bool {
        matches!(
            self,
            Error::Timeout {
                which: Timeout::Queued,
                ..
            }
        )
    }

    /// Whether no connection could be made at all: nothing listening, no route, a name that
    /// does not resolve, a connect timeout, the reconnect backoff still running. Nothing was
    /// sent, so a call retries these within its bound (a broker starting, a port being
    /// opened). An error after a connection was made (a handshake, a listener of another
    /// protocol) says the same on every try, and a request may have been acted on: not these.
    pub(crate) fn is_not_connected(&self) -> bool {
        use io::ErrorKind as K;
        match self {
            Error::Io { source, .. } => {
                let kind = source.kind();
                // `HostUnreachable` and `NetworkUnreachable` are named only from Rust 1.83;
                // older releases already map the OS errors to them, so their names tell them
                // apart on every Rust this crate builds on.
                matches!(kind, K::ConnectionRefused | K::AddrNotAvailable)
                    || matches!(
                        format!("{kind:?}").as_str(),
                        "HostUnreachable" | "NetworkUnreachable"
                    )
            }
            Error::Timeout { which, .. } => *which == Timeout::Connect,
            Error::Unresolved { .. } | Error::ReconnectBackoff { .. } | Error::NoBrokers => true,
            _ => false,
        }
    }

    /// Whether a request to a group coordinator failed only because the coordinator is moving,
    /// loading or unreachable, so that retrying it is right. The one rule the client, members
    /// and admin calls share; which codes count, and whether the coordinator is then found
    /// again or (while it loads) asked again, is the group table's
    /// ([`group::action`](crate::group::action)).
    pub(crate) fn is_coordinator_transient(&self) -> bool {
        match self {
            Error::Kafka { code, .. } => crate::group::action::coordinator_unready(*code),
            other => other.is_unreachable(),
        }
    }
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What a TLS failure means for the operator, with the setting to look at.
fn tls_explanation(addr: &str, e: &(dyn std::error::Error + 'static)) -> String {
    use rustls::{AlertDescription as A, CertificateError as C, Error as E};
    let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
    let Some(e) = e.downcast_ref::<E>() else {
        return e.to_string();
    };
    match e {
        E::InvalidCertificate(C::UnknownIssuer) => format!(
            "the broker's certificate is not signed by a trusted CA ({e}); set ssl.ca.location to \
             the PEM file of the CA that signed it"
        ),
        E::InvalidCertificate(C::Expired | C::ExpiredContext { .. }) => {
            format!("the broker's certificate has expired ({e})")
        }
        E::InvalidCertificate(C::NotValidForName | C::NotValidForNameContext { .. }) => format!(
            "the broker's certificate is not valid for {host:?} ({e}); connect by a name the \
             certificate has, or set ssl.endpoint.identification.algorithm=none"
        ),
        E::InvalidMessage(_) => format!(
            "the broker did not answer in TLS ({e}); is {addr} a PLAINTEXT listener? \
             (security.protocol)"
        ),
        E::AlertReceived(A::CertificateRequired | A::BadCertificate | A::HandshakeFailure | A::UnknownCA) => {
            format!(
                "the broker refused the handshake ({e}); does the listener require a client \
             certificate (ssl.certificate.location, ssl.key.location) signed by a CA it trusts?"
            )
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_connection_never_made_counts_as_not_connected() {
        let io = |kind: io::ErrorKind| Error::Io {
            addr: "b:9092".into(),
            source: kind.into(),
        };
        let timeout = |which| Error::Timeout {
            which,
            operation: "b:9092".into(),
            last: None,
        };
        for e in [
            io(io::ErrorKind::ConnectionRefused),
            io(io::ErrorKind::HostUnreachable),
            timeout(Timeout::Connect),
            Error::Unresolved {
                addr: "b:9092".into(),
                source: None,
            },
            Error::NoBrokers,
        ] {
            assert!(e.is_not_connected(), "{e}");
        }
        // Once connected, a request may have been acted on, or the peer speaks another
        // protocol: the same on every try.
        for e in [
            io(io::ErrorKind::ConnectionReset),
            io(io::ErrorKind::UnexpectedEof),
            timeout(Timeout::Response),
            timeout(Timeout::Queued),
            Error::Closed,
        ] {
            assert!(!e.is_not_connected(), "{e}");
        }
    }

    fn kafka(code: KafkaCode) -> Error {
        Error::Kafka {
            api: ApiKey::JoinGroup,
            code,
            message: None,
        }
    }

    #[test]
    fn a_wait_for_a_busy_connection_is_transient_and_leaves_the_connection_alone() {
        let e = Error::Timeout {
            which: Timeout::Queued,
            operation: "the Metadata connection stayed busy".into(),
            last: None,
        };
        assert!(e.is_transient());
        assert!(e.is_queued());
        assert!(!e.breaks_connection());
        assert!(
            !e.is_coordinator_transient(),
            "not a reason to look the coordinator up again"
        );
    }

    #[test]
    fn coordinator_codes_follow_the_group_table() {
        for code in [
            KafkaCode::CoordinatorLoadInProgress,
            KafkaCode::NotCoordinator,
            KafkaCode::CoordinatorNotAvailable,
        ] {
            assert!(kafka(code).is_coordinator_transient(), "{code}");
            assert!(kafka(code).is_transient(), "{code}");
        }
        for code in [
            KafkaCode::RebalanceInProgress,
            KafkaCode::UnknownMemberId,
            KafkaCode::RequestTimedOut,
            KafkaCode::GroupAuthorizationFailed,
        ] {
            assert!(!kafka(code).is_coordinator_transient(), "{code}");
        }
        for code in (-1..=130).map(KafkaCode::from_code) {
            assert_eq!(
                kafka(code).is_coordinator_transient(),
                crate::group::action::coordinator_unready(code),
                "{code}"
            );
        }
    }

    #[test]
    fn an_unreachable_coordinator_is_transient() {
        let refused = Error::Io {
            addr: "b:9092".into(),
            source: io::ErrorKind::ConnectionRefused.into(),
        };
        assert!(refused.is_coordinator_transient());
        assert!(Error::UnknownBroker { id: 3 }.is_coordinator_transient());
        let group = "g".to_string();
        assert!(Error::NoCoordinator { group }.is_coordinator_transient());
        let tls = Error::Tls {
            addr: "b:9093".into(),
            source: "expired".into(),
        };
        assert!(!tls.is_coordinator_transient());
    }
}
