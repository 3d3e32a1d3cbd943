//! The [`Consumer`]: subscribe, poll records, commit, on top of a [`GroupMember`].
//!
//! Small modules, one job each: [`builder`] and [`config`] (settings), [`record`] (what poll
//! returns), [`positions`] (per-partition positions and the commit floor, pure), [`offsets`]
//! (OffsetCommit / OffsetFetch / ListOffsets requests and answers, pure), [`fetcher`] (Fetch
//! requests per leader and version, answers, per-partition errors), [`prefetch`] (the bounded
//! fetch-ahead buffer and the epochs that keep stale records out, pure), [`workers`] (the fetch
//! thread per leader). This file ties them to the
//! member and the network: the poll loop, offset lookups and commits.

mod builder;
mod commit;
mod config;
mod control;
mod fetch_session;
mod fetcher;
mod listener;
mod lookup;
// The admin client reuses its OffsetFetch and ListOffsets builders.
pub(crate) mod offsets;
mod positions;
mod prefetch;
mod record;
#[cfg(test)]
mod scripted;
#[cfg(test)]
mod scripted_transactions;
mod workers;

pub use builder::ConsumerBuilder;
pub use config::{IsolationLevel, OffsetReset};
pub use control::ConsumerGroupMetadata;
pub use listener::ConsumerRebalanceListener;
pub use record::{ConsumerRecord, OffsetAndMetadata, OffsetAndTimestamp, Polled};

use crate::authorization::Scope;
use crate::client::{topic_denied, Client, Metadata};
use crate::error::{Error, Result};
use crate::group::member::lookup_deadline;
use crate::group::{GroupEvent, GroupMember, TopicPartition};
use crate::protocol::{ApiKey, Uuid};
use crate::wakeup::{Wakeup, WakeupHandle};
use config::ConsumerConfig;
use fetcher::{FetchSettings, FetchTarget, PartitionFetch};
use positions::Positions;
use prefetch::FetchBuffer;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A consumer: one member of a consumer group that fetches its partitions' records.
///
/// - **Poll.** [`Consumer::poll`] first lets the member react to the group (join, rebalance,
///   coordinator moves), then returns buffered records at once, or waits for the fetches in
///   flight until records arrive or the timeout passes. At most `max.poll.records` come back
///   per call.
/// - **Fetch-ahead.** Fetches run on threads of the consumer's own, one per partition leader,
///   each over its own connection, so every leader is fetched from at the same time (the
///   broker holding each for up to `fetch.max.wait.ms` until `fetch.min.bytes` are there).
///   They go on between polls, while the application processes what it got, until
///   `queued.max.messages.kbytes` of records are buffered
///   ([`ConsumerBuilder::queued_max_messages_kbytes`]); then no fetch is sent until `poll` has
///   handed enough out. Nothing fetched for a partition before it was paused, seeked, revoked
///   or lost is ever handed out: such answers and buffered records are dropped, and the
///   partition is fetched again from its position.
/// - **Positions.** After an assignment each partition starts at its committed offset
///   (OffsetFetch); without one, or when a fetch answers OFFSET_OUT_OF_RANGE,
///   `auto.offset.reset` applies (ListOffsets at the leader, or [`Error::NoOffset`]).
///   [`Consumer::position`] is the offset of the next record `poll` returns.
/// - **Commits.** [`Consumer::commit`] commits the positions, i.e. everything `poll` has
///   returned so far; [`Consumer::commit_offsets`] commits given offsets. Both are synchronous
///   OffsetCommits to the group coordinator with the member's generation, member id and (v7+,
///   static members) `group.instance.id`. A commit the coordinator rejects because the
///   generation is over (REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID,
///   FENCED_INSTANCE_ID) is returned as [`Error::Kafka`] with `api: ApiKey::OffsetCommit` and
///   that code, never dropped: the records after the last successful commit will be delivered
///   again (to this member or another), and the application can act on that.
/// - **Committed offsets never move backwards** because of a stale commit: within one
///   assignment, an offset below what is known to be committed for the partition (what
///   OffsetFetch said at assignment, raised by every successful commit) is not sent, and a
///   warning is logged. Only an explicit [`Consumer::seek`] lowers that floor, since rewinding
///   is then the application's decision.
/// - **Rebalances (eager).** When the group rebalances, `poll` returns a [`Polled`] with a
///   [`GroupEvent::Revoked`] and no records, and rejoins only on the *next* `poll`. In between
///   the old generation is still valid (the group is preparing the rebalance), so the
///   application commits what it processed with [`Consumer::commit`]; with auto-commit on, the
///   consumer has already done so before returning. After the rejoin, the `poll` that returns
///   [`GroupEvent::Assigned`] starts each partition from its committed offset.
/// - **Rebalances (cooperative,** with [`CooperativeStickyAssignor`](crate::CooperativeStickyAssignor),
///   KIP-429**).** The consumer keeps fetching and returning its partitions while the group
///   rebalances. When the new assignment moves some away, the `poll` that gets it returns a
///   [`GroupEvent::Revoked`] with only those, a [`GroupEvent::Assigned`] with the partitions
///   added (new ones start from their committed offset, kept ones where they were), and no
///   records; commit before the next `poll` (auto-commit already did), which rejoins so that
///   their new owners get them.
/// - **Lost partitions.** When no heartbeat has been answered for `session.timeout.ms` (the
///   coordinator unreachable), the coordinator may already have given the partitions to
///   another member: `poll` returns [`GroupEvent::Lost`], drops what it had fetched for them
///   and commits nothing; the member rejoins once the coordinator answers again.
/// - **Authorization.** A call the broker's authorizer denies returns
///   [`Error::Authorization`] naming the topic or group: `poll` for a subscribed topic the
///   principal may not describe (the leader cannot assign it) or read (Fetch), `commit` for a
///   group or topic it may not read. Never retried. Denied the group itself, the consumer
///   stops for good, as when fenced.
/// - **Offsets and seeks** (Java's names): [`beginning_offsets`](Consumer::beginning_offsets),
///   [`end_offsets`](Consumer::end_offsets), [`offsets_for_times`](Consumer::offsets_for_times)
///   for any partition; [`seek`](Consumer::seek), and the lazy
///   [`seek_to_beginning`](Consumer::seek_to_beginning) / [`seek_to_end`](Consumer::seek_to_end) /
///   [`seek_to_timestamp`](Consumer::seek_to_timestamp), resolved by the next poll;
///   [`commit_records`](Consumer::commit_records) commits exactly the records a job processed.
/// - **Flow and group control**: [`pause`](Consumer::pause) / [`resume`](Consumer::resume),
///   [`leave_group`](Consumer::leave_group), [`request_rejoin`](Consumer::request_rejoin),
///   [`group_metadata`](Consumer::group_metadata), a [`ConsumerRebalanceListener`] called inside
///   poll before anything is fetched for a new assignment, and manual assignment
///   ([`ConsumerBuilder::assign`], [`Client::consumer_without_group`]).
/// - **Auto-commit** (`enable.auto.commit`, on by default as in Kafka's Java client): inside
///   `poll`, once `auto.commit.interval.ms` has passed, the positions are committed (what
///   earlier polls returned, which the application has processed by the time it polls again);
///   also before a revocation and in [`Consumer::close`]. An auto-commit that fails is logged
///   as a warning: the records since the last successful commit are delivered again, which is
///   the at-least-once contract auto-commit gives.
///
/// ```no_run
/// use kafka_group::{Client, OffsetReset};
/// use std::time::Duration;
///
/// let client = Client::builder().bootstrap_servers("localhost:9092").build()?;
/// let mut consumer = client
///     .consumer("billing")
///     .group_instance_id("billing-1")
///     .subscribe(["invoices"])
///     .auto_offset_reset(OffsetReset::Earliest)
///     .enable_auto_commit(false)
///     .build()?;
/// loop {
///     let polled = consumer.poll(Duration::from_secs(1))?;
///     if polled.revoked().is_some() {
///         // Last chance to commit with the generation that owned the partitions.
///         consumer.commit()?;
///         continue;
///     }
///     for record in &polled.records {
///         println!("{}-{}@{}: {:?}", record.topic, record.partition, record.offset, record.value);
///     }
///     consumer.commit()?;
/// }
/// # Ok::<(), kafka_group::Error>(())
/// ```
///
/// Blocking: every call runs on the caller's thread (the member's heartbeats and the fetches
/// run on threads of their own, stopped by [`close`](Self::close) or a drop); another thread can end a blocked `poll` at once with a
/// [`WakeupHandle`] ([`Consumer::wakeup_handle`]). Dropping a consumer closes it as
/// [`close`](Self::close) does, final auto-commit included (not while panicking).
///
/// Fetches use incremental fetch sessions (KIP-227) with brokers from Kafka 1.1 (Fetch v7):
/// after the first request to a leader, each names only the partitions whose position changed,
/// and each answer carries only partitions with news, so the cost of a fetch follows what moves
/// rather than how many partitions are assigned.
#[derive(Debug)]
pub struct Consumer {
    client: Client,
    /// The member's (shared), or the consumer's own without a group.
    wakeup: Wakeup,
    /// The group: `None` for a consumer without `group.id` (manual assignment, no commits).
    member: Option<GroupMember>,
    config: ConsumerConfig,
    positions: Positions,
    /// Records fetched ahead, bounded by `queued.max.messages.kbytes`.
    buffer: FetchBuffer,
    /// The fetch threads, one per leader.
    workers: workers::Workers,
    /// An error met while fetching ahead after records were handed out: the next poll returns it.
    deferred: Option<Error>,
    last_auto_commit: Instant,
    metadata_stale: bool,
    last_metadata_refresh: Option<Instant>,
    /// Rotates the partition order of fetch requests, so that with a tight `fetch.max.bytes`
    /// the partitions at the front do not starve the rest.
    rotation: usize,
    /// Topics outside the subscription that offset lookups asked about: metadata refreshes
    /// cover them too, so that their leaders stay known.
    lookup_topics: Vec<String>,
    listener: Option<listener::Listener>,
    /// A listener is running: `poll` from inside it is refused.
    in_listener: bool,
    /// `close` has run: a drop has nothing left to do.
    closed: bool,
}

impl Consumer {
    /// The group member underneath (generation, member id, state, metrics); `None` for a
    /// consumer without a group.
    pub fn member(&self) -> Option<&GroupMember> {
        self.member.as_ref()
    }

    /// The group member, or the error a call that needs a group gets on a consumer without
    /// `group.id` (as Java's `InvalidGroupIdException`).
    pub(super) fn group(&self) -> Result<&GroupMember> {
        self.member.as_ref().ok_or_else(no_group)
    }

    /// [`group`](Self::group), mutable.
    pub(super) fn group_mut(&mut self) -> Result<&mut GroupMember> {
        self.member.as_mut().ok_or_else(no_group)
    }

    /// A handle another thread can use to make a blocked [`poll`](Self::poll) return
    /// [`Error::Wakeup`] at once, or the next one if none is blocked (Java's
    /// `KafkaConsumer.wakeup()`); see [`WakeupHandle`]. A poll that has group events to report
    /// when woken (e.g. [`GroupEvent::Assigned`]) returns them, and the next poll the error.
    pub fn wakeup_handle(&self) -> WakeupHandle {
        self.wakeup.handle()
    }

    /// The subscribed topics (empty for a consumer without a group).
    pub fn subscription(&self) -> &[String] {
        self.member.as_ref().map_or(&[], GroupMember::subscription)
    }

    /// The partitions assigned to this consumer (empty before the first join and between a
    /// revocation and the next assignment).
    pub fn assignment(&self) -> Vec<TopicPartition> {
        self.positions.assignment()
    }

    /// The offset of the next record [`poll`](Self::poll) returns for `tp`: one past the last
    /// record returned, the committed offset, or the reset position. `None` while the
    /// partition is not assigned or its position is not known yet.
    pub fn position(&self, tp: &TopicPartition) -> Option<i64> {
        if !self.positions.is_assigned(tp) {
            return None;
        }
        self.positions.position(tp)
    }

    /// Makes the next [`poll`](Self::poll) return `tp`'s records from `offset` on, dropping
    /// any buffered ones. Seeking below the committed offset also allows committing below it
    /// (see the [`Consumer`] docs). Fails with [`Error::NotAssigned`] for a partition not assigned.
    pub fn seek(&mut self, tp: &TopicPartition, offset: i64) -> Result<()> {
        crate::names::check_topic("seek", &tp.topic)?;
        if offset < 0 {
            return Err(Error::Config {
                property: "seek",
                problem: format!("offset {offset} for {tp} is negative"),
            });
        }
        if !self.positions.seek(tp, offset) {
            return Err(Error::NotAssigned(tp.clone()));
        }
        self.buffer.discard(tp);
        log::info!("{}: seek {tp} to {offset}", self.ctx());
        Ok(())
    }

    /// Replaces the partitions of a consumer built with [`ConsumerBuilder::assign`] (Java
    /// `assign`). Partitions kept go on from their positions; new ones start from the committed
    /// offset (with a group) or `auto.offset.reset`. Fails with [`Error::Config`] on a
    /// subscribing consumer or for a bad topic name, before any request.
    pub fn assign(&mut self, partitions: &[TopicPartition]) -> Result<()> {
        config::check_partitions("assign", partitions)?;
        if self.config.manual.is_none() {
            return Err(Error::Config {
                property: "assign",
                problem: "this consumer subscribes to topics; the group assigns its partitions".into(),
            });
        }
        let kept: Vec<(TopicPartition, i64)> = partitions
            .iter()
            .filter_map(|tp| Some((tp.clone(), self.positions.position(tp)?)))
            .collect();
        self.positions.assign(partitions);
        for (tp, at) in kept {
            self.positions.seek(&tp, at);
        }
        self.buffer.discard_all();
        self.config.manual = Some(partitions.to_vec());
        self.metadata_stale = true;
        log::info!("{}: assigned {} partitions", self.ctx(), partitions.len());
        Ok(())
    }

    /// Makes the next [`poll`](Self::poll) start each of `partitions` at its first offset
    /// still in the log (Java `seekToBeginning`, rdkafka `seek` to `OFFSET_BEGINNING`). Lazy,
    /// as in Java: the offset is looked up (ListOffsets) by the next poll, so this works right
    /// after an assignment, before anything was fetched, and wins over the committed offset.
    /// An empty slice means every assigned partition. Like [`seek`](Self::seek), a rewind below
    /// the committed offset may then be committed. Fails with [`Error::NotAssigned`] (and
    /// changes nothing) if a partition is not assigned.
    pub fn seek_to_beginning(&mut self, partitions: &[TopicPartition]) -> Result<()> {
        self.request_reset(partitions, -2, "beginning")
    }

    /// Makes the next [`poll`](Self::poll) start each of `partitions` at the end of its log,
    /// so only records written from then on are read (Java `seekToEnd`, rdkafka `seek` to
    /// `OFFSET_END`): the high watermark, or with `isolation.level=read_committed` the last
    /// stable offset. Lazy and all-partitions-if-empty like
    /// [`seek_to_beginning`](Self::seek_to_beginning).
    pub fn seek_to_end(&mut self, partitions: &[TopicPartition]) -> Result<()> {
        self.request_reset(partitions, -1, "end")
    }

    /// Makes the next [`poll`](Self::poll) start each of `partitions` at the first record whose
    /// timestamp is at or after `timestamp_ms` (milliseconds since the epoch), or at the end of
    /// the log where no record is that recent (Java's `offsetsForTimes` + `seek`, rdkafka's
    /// `offsets_for_times`; the same rule as Kafka's `auto.offset.reset=by_duration`). Lazy and
    /// all-partitions-if-empty like [`seek_to_beginning`](Self::seek_to_beginning). Fails with
    /// [`Error::Config`] for a negative time.
    pub fn seek_to_timestamp(&mut self, partitions: &[TopicPartition], timestamp_ms: i64) -> Result<()> {
        if timestamp_ms < 0 {
            return Err(Error::Config {
                property: "seek_to_timestamp",
                problem: format!("timestamp {timestamp_ms} is negative"),
            });
        }
        self.request_reset(partitions, timestamp_ms, "timestamp")
    }

    fn request_reset(&mut self, partitions: &[TopicPartition], timestamp: i64, what: &str) -> Result<()> {
        let all = self.positions.assignment();
        let partitions = if partitions.is_empty() {
            &all[..]
        } else {
            partitions
        };
        if let Some(tp) = partitions.iter().find(|tp| !self.positions.is_assigned(tp)) {
            return Err(Error::NotAssigned(tp.clone()));
        }
        for tp in partitions {
            self.positions.request_reset(tp, timestamp);
            self.buffer.discard(tp);
        }
        log::info!(
            "{}: seek to {what} requested for {} partitions",
            self.ctx(),
            partitions.len()
        );
        Ok(())
    }

    fn ctx(&self) -> String {
        match &self.member {
            Some(m) => m.ctx(),
            None => "consumer without group".to_string(),
        }
    }

    /// Waits up to `timeout` for records, and returns within about `timeout` whatever the
    /// group is doing. Joins the group on the first call and rejoins when a rebalance is
    /// pending; a join the coordinator holds (it waits for every member) stays in flight and
    /// goes on at the next call, so keep polling. So do the lookups of positions (OffsetFetch,
    /// ListOffsets) that a broker answers more slowly than `timeout`: one call sends them and a
    /// later one takes the answer. Failures a retry can fix (a connection reset,
    /// a coordinator or leader moving) are retried within the call, not returned. When the
    /// coordinator has been unreachable for `default.api.timeout.ms`, the call returns
    /// [`Error::Timeout`](crate::Error::Timeout) with the last cause (e.g. the address and
    /// `connection refused`); the consumer keeps trying on the next call.
    ///
    /// Returns early with no records and a [`GroupEvent::Revoked`] when a rebalance starts, and
    /// with a [`GroupEvent::Lost`] when the session expired; see the [`Consumer`] docs.
    pub fn poll(&mut self, timeout: Duration) -> Result<Polled> {
        if self.in_listener {
            return Err(Error::Config {
                property: "poll",
                problem: "poll called from inside a ConsumerRebalanceListener; return from the \
                          listener and let the poll that called it go on"
                    .into(),
            });
        }
        // All of this call is a poll for `max.poll.interval.ms`, not only its member's polls.
        let _polling = self.member.as_ref().map(GroupMember::polling);
        let deadline = crate::deadline::after(timeout);
        let mut events = Vec::new();
        // A join under way gets the whole poll: asked for no time, the member would spend its
        // minimum lookup time on top of the poll's.
        let subscribed = self.config.manual.is_none();
        // What a cooperative rebalance revoked was the last poll's to commit.
        self.positions.forget_revoked();
        // A cooperative member that still has partitions keeps fetching them while it
        // rejoins: the group is polled without waiting, between fetches.
        let keeps_fetching = self.positions.assigned().next().is_some();
        let mut wait =
            if subscribed && !keeps_fetching && self.member.as_ref().is_some_and(GroupMember::rejoin_pending)
            {
                timeout
            } else {
                Duration::ZERO
            };
        loop {
            if self.wakeup.is_pending() && !events.is_empty() {
                // The group events this poll acted on go first; the next poll is woken.
                return Ok(Polled {
                    records: Vec::new(),
                    events,
                });
            }
            self.wakeup.check()?;
            // One change of the assignment a poll: the next waits for the next poll.
            let group_events = match &mut self.member {
                Some(m) if self.config.manual.is_none() && !record::changes_assignment(&events) => {
                    match m.poll(wait) {
                        // Woken after this poll got events: they go first, the wakeup next time.
                        Err(Error::Wakeup) if !events.is_empty() => {
                            self.wakeup.handle().wakeup();
                            Vec::new()
                        }
                        r => r?,
                    }
                }
                _ => {
                    self.wakeup.sleep_within(wait, deadline);
                    Vec::new()
                }
            };
            let revoked = self.on_group_events(&group_events, deadline);
            events.extend(group_events);
            if revoked {
                return Ok(Polled {
                    records: Vec::new(),
                    events,
                });
            }
            self.maybe_auto_commit(deadline);
            // Answers that came while the application worked on the last poll's records.
            while let Ok(done) = self.workers.answers().try_recv() {
                self.file_answer(done)?;
            }
            let records = self.drain();
            if !records.is_empty() {
                // The next fetches go out now, to run while the application processes these;
                // what goes wrong meanwhile is the next poll's to report.
                if let Err(e) = self.fetch_ahead(deadline) {
                    self.deferred = Some(e);
                }
                return Ok(Polled { records, events });
            }
            if let Some(e) = self.deferred.take() {
                return Err(e);
            }
            self.ensure_positions(deadline)?;
            self.fetch_ahead(deadline)?;
            let left = deadline.saturating_duration_since(Instant::now());
            wait = Duration::ZERO;
            if self.workers.any_in_flight() {
                // An answer comes within fetch.max.wait.ms; then the group gets a look again.
                let until = deadline.min(crate::deadline::after(
                    self.config.fetch_max_wait + Duration::from_millis(100),
                ));
                match self.wakeup.recv_deadline(self.workers.answers(), until) {
                    crate::wakeup::Waited::Got(done) => self.file_answer(done)?,
                    // The top of the loop reports it.
                    crate::wakeup::Waited::Woken => continue,
                    crate::wakeup::Waited::TimedOut => {}
                }
            } else if self.positions.fetch_ahead().is_empty() {
                if left.is_zero() || record::changes_assignment(&events) {
                    // Nothing to fetch, and the group is not asked again in this poll after a
                    // change: the next poll takes the group's next one without waiting here.
                    return Ok(Polled {
                        records: Vec::new(),
                        events,
                    });
                }
                // Nothing to fetch (no partitions, or all paused): wait for the group instead.
                wait = left;
                continue;
            } else if self.buffer.is_empty() {
                // Fetchable but nothing sent: leaders unknown, or backing off after a failure.
                self.pause_until(deadline);
            }
            if self.buffer.is_empty() && Instant::now() >= deadline {
                return Ok(Polled {
                    records: Vec::new(),
                    events,
                });
            }
        }
    }

    /// Applies group events; true when the poll is to return them without records: partitions
    /// were revoked (eager: all, and not yet reassigned; cooperative: some), so that the
    /// application commits them before the next poll.
    fn on_group_events(&mut self, events: &[GroupEvent], deadline: Instant) -> bool {
        let cooperative = self
            .member
            .as_ref()
            .is_some_and(|m| m.rebalance_protocol() == crate::RebalanceProtocol::Cooperative);
        let mut revoked_some = false;
        for e in events {
            match e {
                GroupEvent::Lost { partitions, .. } => {
                    // Another member may own these now: nothing fetched for them is handed
                    // out, and nothing is committed (the coordinator would reject it).
                    log::warn!(
                        "{}: {} partitions lost (session expired, or the member left on a late poll); \
                         their uncommitted records will be delivered again, possibly to another member",
                        self.ctx(),
                        partitions.len()
                    );
                    self.buffer.discard_all();
                    self.positions.revoke();
                    self.notify(listener::Change::Lost, partitions);
                }
                GroupEvent::Revoked { partitions, .. } => {
                    if self.config.enable_auto_commit && !self.positions.is_revoked() {
                        let offsets = self.positions.uncommitted();
                        if let Err(e) = self.commit_by(offsets, deadline) {
                            log::warn!(
                                "{}: auto-commit before revoking {} partitions failed: {e}; records \
                                 since the last commit will be delivered again",
                                self.ctx(),
                                partitions.len()
                            );
                        }
                    }
                    // While the old generation can still commit them (before `revoke`, which
                    // would refuse seeks and pauses the listener may make).
                    self.notify(listener::Change::Revoked, partitions);
                    if cooperative {
                        // Only these go; the others keep what was fetched for them.
                        for tp in partitions {
                            self.buffer.discard(tp);
                        }
                        self.positions.revoke_some(partitions);
                        revoked_some = true;
                    } else {
                        self.buffer.discard_all();
                        self.positions.revoke();
                    }
                }
                GroupEvent::Assigned { partitions, .. } => {
                    if cooperative {
                        // Partitions added to those kept (all of them after a loss).
                        self.positions.assign_more(partitions);
                    } else {
                        self.buffer.discard_all();
                        self.positions.assign(partitions);
                    }
                    self.metadata_stale = true;
                    self.last_auto_commit = Instant::now();
                    // Before any fetch: a seek made here wins over the committed offset.
                    self.notify(listener::Change::Assigned, partitions);
                }
                _ => {}
            }
        }
        revoked_some || self.positions.is_revoked()
    }

    /// Hands out up to `max.poll.records` buffered records, advancing the positions.
    fn drain(&mut self) -> Vec<ConsumerRecord> {
        self.buffer
            .drain(self.config.max_poll_records, &mut self.positions)
    }

    /// Metadata covering the subscribed topics, refreshed when asked to or when an assigned
    /// partition has no known leader (at most once per `retry.backoff.ms`; a refresh clears
    /// `metadata_stale`), by `deadline` (or within one `MIN_LOOKUP` when less is left: a
    /// `poll(0)` loop must still be able to learn a leader).
    fn metadata(&mut self, force: bool, deadline: Instant) -> Result<Arc<Metadata>> {
        let cached = self.client.cached_metadata();
        let recently = self
            .last_metadata_refresh
            .is_some_and(|t| t.elapsed() < self.client.retry_backoff());
        // Checked last: it looks up every assigned partition, and runs on every fetch.
        let missing = || {
            self.positions
                .assigned()
                .any(|tp| leader_of(&cached, tp).is_none())
        };
        if !recently && (force || missing()) {
            self.last_metadata_refresh = Some(Instant::now());
            let mut topics: Vec<&str> = self.subscription().iter().map(String::as_str).collect();
            for t in self
                .positions
                .assigned()
                .map(|tp| tp.topic.as_str())
                .chain(self.lookup_topics.iter().map(String::as_str))
            {
                if !topics.contains(&t) {
                    topics.push(t);
                }
            }
            let fresh = self
                .client
                .refresh_metadata_by(Some(&topics), lookup_deadline(deadline))?;
            self.metadata_stale = false;
            return Ok(fresh);
        }
        Ok(cached)
    }

    /// Sends a fetch to every idle leader for its partitions not already in flight, each
    /// asking for a share of the room the buffer has left; none while the buffer is full.
    fn fetch_ahead(&mut self, deadline: Instant) -> Result<()> {
        if self.buffer.room() == 0 {
            return Ok(());
        }
        let mut fetchable = self.positions.fetch_ahead();
        let busy = self.workers.busy();
        fetchable.retain(|(tp, _)| !busy.contains(tp));
        if fetchable.is_empty() {
            return Ok(());
        }
        let meta = match self.metadata(self.metadata_stale, deadline) {
            Ok(m) => m,
            Err(e) if e.is_transient() => {
                log::debug!("{}: metadata refresh failed: {e}", self.ctx());
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        let n = self.rotation % fetchable.len();
        fetchable.rotate_left(n);
        self.rotation = self.rotation.wrapping_add(1);
        let now = Instant::now();
        let mut by_leader: BTreeMap<i32, Vec<FetchTarget>> = BTreeMap::new();
        for (tp, offset) in fetchable {
            match leader_of(&meta, &tp) {
                Some((leader, epoch, topic_id)) => {
                    if self.workers.is_idle(leader, now) {
                        by_leader.entry(leader).or_default().push(FetchTarget {
                            tp,
                            topic_id,
                            offset,
                            leader_epoch: epoch,
                        });
                    }
                }
                None => {
                    // An assigned topic the principal may not describe never gets a leader.
                    if let Some(e) = topic_denied(&meta, &tp.topic) {
                        return Err(e);
                    }
                    self.metadata_stale = true;
                }
            }
        }
        // Each leader gets an equal share of the room, so that the first does not take it all.
        let share = self.buffer.room() / by_leader.len().max(1);
        for (leader, targets) in by_leader {
            let Some(broker) = meta.brokers.get(&leader) else {
                self.metadata_stale = true;
                continue;
            };
            let most = self
                .config
                .max_partition_fetch_bytes
                .saturating_mul(targets.len());
            let max_bytes = self.config.fetch_max_bytes.min(most).min(share).max(1);
            let as_i32 = i32::try_from(max_bytes).unwrap_or(i32::MAX);
            let settings = FetchSettings {
                // Nobody waits on this fetch but the buffer: the broker may hold it the full time.
                max_wait_ms: self.config.fetch_max_wait.as_millis().min(i32::MAX as u128) as i32,
                // Validated to fit INT32 at build.
                min_bytes: i32::try_from(self.config.fetch_min_bytes).unwrap_or(i32::MAX),
                max_bytes: as_i32,
                partition_max_bytes: i32::try_from(self.config.max_partition_fetch_bytes)
                    .unwrap_or(i32::MAX)
                    .min(as_i32),
                isolation: self.config.isolation_level,
            };
            let stamped = targets
                .into_iter()
                .map(|t| {
                    let stamp = self.buffer.stamp(&t.tp);
                    (t, stamp)
                })
                .collect();
            self.buffer.reserve(max_bytes);
            self.workers.send(broker, stamped, settings, max_bytes);
        }
        Ok(())
    }

    /// Files a fetch's answer: records into the buffer, unless their partition was paused,
    /// seeked, revoked or reassigned since the fetch was sent; per-partition verdicts (refresh
    /// metadata, reset the offset, fail) applied as they come.
    fn file_answer(&mut self, done: workers::Done) -> Result<()> {
        let workers::Done {
            leader,
            targets,
            reserved,
            outcome,
        } = done;
        self.buffer.release(reserved);
        let parts = match outcome {
            Ok(parts) => parts,
            Err(failure) => {
                // A refused fetch session restarted on its thread: fetch again at once.
                let session = matches!(failure, workers::FetchFailure::Session(_));
                let backoff = (!session).then(|| self.client.retry_backoff());
                self.workers.finished(leader, backoff);
                return match failure {
                    workers::FetchFailure::Session(code) => {
                        // The leader and the metadata are fine: no refresh.
                        log::debug!("{}: fetch session with broker {leader}: {code}", self.ctx());
                        Ok(())
                    }
                    workers::FetchFailure::Request(e) if e.is_transient() => {
                        log::debug!("{}: fetch from broker {leader} failed: {e}", self.ctx());
                        self.metadata_stale = true;
                        Ok(())
                    }
                    workers::FetchFailure::Request(e) => Err(e),
                    workers::FetchFailure::Code(code) if code.is_retriable() => {
                        log::debug!("{}: fetch from broker {leader}: {code}", self.ctx());
                        self.metadata_stale = true;
                        Ok(())
                    }
                    workers::FetchFailure::Code(code) => Err(Error::from_code_in(
                        ApiKey::Fetch,
                        code,
                        Scope::default(),
                        format!("fetch from broker {leader}"),
                    )),
                };
            }
        };
        let stamps: BTreeMap<&TopicPartition, prefetch::Stamp> =
            targets.iter().map(|(t, s)| (&t.tp, *s)).collect();
        let mut failure = None;
        let mut refresh = false;
        for (tp, outcome) in parts {
            let current = stamps.get(&tp).is_some_and(|&s| self.buffer.is_current(&tp, s))
                && self.positions.is_assigned(&tp)
                && !self.positions.is_paused(&tp);
            if !current {
                log::debug!(
                    "{}: {tp}: dropping an answer fetched before a pause, seek or rebalance",
                    self.ctx()
                );
                continue;
            }
            match outcome {
                PartitionFetch::Records {
                    from,
                    records,
                    next_offset,
                } => {
                    let last = records.last().map(|r| r.offset + 1);
                    let Some(next) = next_offset.max(last) else {
                        continue;
                    };
                    if next <= from {
                        continue;
                    }
                    if records.is_empty() && self.positions.position(&tp) == Some(from) {
                        self.positions.skip_to(&tp, from, next);
                    } else {
                        let stamp = self.buffer.stamp(&tp);
                        self.positions.fetched(&tp, from, next);
                        self.buffer.push(tp, stamp, from, records, next);
                    }
                }
                PartitionFetch::Refresh(code) => {
                    log::debug!("{}: {tp}: {code}; refreshing metadata", self.ctx());
                    self.metadata_stale = true;
                    refresh = true;
                }
                PartitionFetch::OutOfRange { from } => {
                    log::info!("{}: {tp}: offset {from} is out of range", self.ctx());
                    self.positions.out_of_range(&tp, from);
                }
                PartitionFetch::Failed { code, detail } => {
                    let context = detail.unwrap_or_else(|| tp.to_string());
                    failure.get_or_insert(Error::from_code_in(
                        ApiKey::Fetch,
                        code,
                        Scope::topic(&tp.topic),
                        context,
                    ));
                }
            }
        }
        // A leader that answers "not the leader" answers at once: without a pause, it would be
        // asked again in a tight loop until the metadata shows the new one.
        let backoff = refresh.then(|| self.client.retry_backoff());
        self.workers.finished(leader, backoff);
        match failure {
            // Records filed for other partitions stay buffered for the next poll.
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Sleeps `retry.backoff.ms`, but not past `deadline`.
    fn pause_until(&self, deadline: Instant) {
        self.wakeup.sleep_within(self.client.retry_backoff(), deadline);
    }

    /// Commits (if auto-commit is on), then closes the member: a static member keeps its
    /// partitions until its session times out, a dynamic one leaves the group. Returns the
    /// commit's error if it failed (the member is closed regardless). All of it within the
    /// member's `close_timeout` (default 30 s). Dropping the consumer does the same, logging
    /// what it cannot return, except while the thread panics: then it commits nothing (what
    /// was polled may not have been processed).
    pub fn close(mut self) -> Result<()> {
        self.shut(true)
    }

    /// [`close`](Self::close)'s work; `commit`: the final auto-commit is made.
    fn shut(&mut self, commit: bool) -> Result<()> {
        self.closed = true;
        // The final commit shares the member's close bound (`close_timeout`, default 30 s).
        let close_timeout = self
            .member
            .as_ref()
            .map_or(Duration::ZERO, GroupMember::close_timeout);
        let deadline = crate::deadline::after(close_timeout);
        let auto_commit = self.config.enable_auto_commit && self.positions.assigned().next().is_some();
        let committed = if commit && auto_commit {
            let offsets = self.positions.uncommitted();
            self.commit_by(offsets, deadline)
        } else {
            let left = self.positions.returned_uncommitted();
            if !left.is_empty() {
                let list: Vec<String> = left.iter().map(|(tp, at)| format!("{tp} at {at}")).collect();
                log::warn!(
                    "{}: closing with records returned by poll and not committed ({}): {}; they \
                     will be delivered again",
                    self.ctx(),
                    if commit {
                        "enable.auto.commit is off"
                    } else {
                        "dropped while panicking"
                    },
                    list.join(", ")
                );
            }
            Ok(())
        };
        // The fetch threads have no part in leaving the group: stop them first.
        self.workers
            .stop(deadline.min(crate::deadline::after(Duration::from_secs(1))));
        let closed = match self.member.take() {
            Some(m) => m.close_by(deadline),
            None => Ok(()),
        };
        committed.and(closed)
    }
}

impl Drop for Consumer {
    fn drop(&mut self) {
        if self.closed {
            return;
        }
        if let Err(e) = self.shut(!std::thread::panicking()) {
            log::warn!("{}: closing on drop: {e}", self.ctx());
        }
    }
}

impl Consumer {
    /// Stops like a killed process — no final commit, no leave of any kind (under the consumer
    /// protocol, not even the static leave heartbeat `close` sends) (`unstable::TestHooks`).
    pub(crate) fn crash(mut self) {
        self.closed = true;
        if let Some(m) = self.member.take() {
            m.crash();
        }
    }

    /// The group member, if the consumer is in a group (`unstable::TestHooks`).
    pub(crate) fn group_member(&self) -> Option<&GroupMember> {
        self.member.as_ref()
    }
}

fn no_group() -> Error {
    Error::Config {
        property: "group.id",
        problem: "this consumer has no group: group calls and commits need one".into(),
    }
}

/// `(leader, leader epoch, topic id)` of a partition, if the metadata knows a leader.
fn leader_of(meta: &Metadata, tp: &TopicPartition) -> Option<(i32, i32, Uuid)> {
    let topic = meta.topics.get(&tp.topic)?;
    let p = topic.partitions.iter().find(|p| p.partition == tp.partition)?;
    // A partition error with a leader (e.g. REPLICA_NOT_AVAILABLE) does not stop fetching.
    (p.leader >= 0).then_some((p.leader, p.leader_epoch, topic.id))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client() -> Client {
        Client::builder()
            .bootstrap_servers("localhost:1")
            .build()
            .unwrap()
    }

    #[test]
    fn configuration_is_checked_before_any_network_call() {
        let e = client().consumer("g").build().unwrap_err();
        assert!(
            matches!(
                e,
                Error::Config {
                    property: "subscribe",
                    ..
                }
            ),
            "{e}"
        );
        let e = client()
            .consumer("g")
            .subscribe(["t"])
            .max_poll_records(0)
            .build()
            .unwrap_err();
        assert!(
            matches!(
                e,
                Error::Config {
                    property: "max.poll.records",
                    ..
                }
            ),
            "{e}"
        );
        let e = client()
            .consumer("g")
            .subscribe(["t"])
            .group_instance_id("bad id")
            .build()
            .unwrap_err();
        assert!(
            matches!(
                e,
                Error::Config {
                    property: "group.instance.id",
                    ..
                }
            ),
            "{e}"
        );
        let c = client()
            .consumer("g")
            .subscribe(["t"])
            .metadata_max_age(Duration::from_secs(1))
            .build()
            .unwrap();
        assert_eq!(c.subscription(), ["t".to_string()]);
        assert!(c.assignment().is_empty());
        assert_eq!(c.position(&TopicPartition::new("t", 0)), None);
    }

    #[test]
    fn subscriptions_and_intervals_follow_kafka_rules() {
        let property = |b: ConsumerBuilder| match b.build() {
            Err(Error::Config { property, .. }) => property,
            other => panic!("{other:?}"),
        };
        let sub = |t: &str| client().consumer("g").subscribe(["ok", t]);
        assert_eq!(property(sub("bad topic!")), "subscribe");
        assert_eq!(property(sub(&"t".repeat(300))), "subscribe");
        assert_eq!(property(sub("..")), "subscribe");
        assert_eq!(property(sub("")), "subscribe");
        let long = Duration::from_millis(i32::MAX as u64 + 1);
        assert_eq!(
            property(sub("t").auto_commit_interval(long)),
            "auto.commit.interval.ms"
        );
        assert_eq!(
            property(sub("t").fetch_max_wait(Duration::MAX)),
            "fetch.max.wait.ms"
        );
        // Settings Kafka types as long saturate instead.
        assert!(sub("t")
            .metadata_max_age(Duration::MAX)
            .retry_backoff(Duration::MAX)
            .build()
            .is_ok());
    }

    #[test]
    fn commits_of_negative_offsets_or_bad_topics_are_refused_before_any_request() {
        let mut c = client().consumer("g").subscribe(["t"]).build().unwrap();
        for (topic, offset, says) in [("t", -5, "offset -5"), ("bad topic!", 1, "bad topic!")] {
            let offsets = BTreeMap::from([(TopicPartition::new(topic, 0), offset)]);
            let e = c.commit_offsets(&offsets).unwrap_err();
            assert!(
                matches!(&e, Error::Config { property: "commit_offsets", problem } if problem.contains(says)),
                "{e}"
            );
        }
    }

    #[test]
    fn seek_needs_an_assigned_partition() {
        let mut c = client().consumer("g").subscribe(["t"]).build().unwrap();
        let tp = TopicPartition::new("t", 0);
        assert!(matches!(c.seek(&tp, 3), Err(Error::NotAssigned(p)) if p == tp));
        c.positions.assign(std::slice::from_ref(&tp));
        c.seek(&tp, 3).unwrap();
        assert_eq!(c.position(&tp), Some(3));
        assert!(c.seek(&tp, -1).is_err());
    }

    fn record(topic: &str, partition: i32, offset: i64) -> ConsumerRecord {
        ConsumerRecord {
            topic: topic.into(),
            partition,
            offset,
            timestamp: 0,
            key: None,
            value: None,
            headers: Vec::new(),
            leader_epoch: Some(1),
        }
    }

    #[test]
    fn drain_respects_max_poll_records_and_advances_positions() {
        let mut c = client()
            .consumer("g")
            .subscribe(["t"])
            .max_poll_records(3)
            .build()
            .unwrap();
        let (a, b) = (TopicPartition::new("t", 0), TopicPartition::new("t", 1));
        c.positions.assign(&[a.clone(), b.clone()]);
        c.positions.apply_committed(&a, Some((0, None)));
        c.positions.apply_committed(&b, Some((10, None)));
        c.positions.fetched(&a, 0, 4);
        let stamp = c.buffer.stamp(&a);
        // A control record at 2-3.
        assert!(c.buffer.push(
            a.clone(),
            stamp,
            0,
            (0..2).map(|o| record("t", 0, o)).collect(),
            4
        ));
        c.positions.fetched(&b, 10, 12);
        let stamp = c.buffer.stamp(&b);
        assert!(c.buffer.push(
            b.clone(),
            stamp,
            10,
            (10..12).map(|o| record("t", 1, o)).collect(),
            12
        ));
        let first = c.drain();
        assert_eq!(first.iter().map(|r| r.offset).collect::<Vec<_>>(), vec![0, 1, 10]);
        assert_eq!(c.position(&a), Some(4), "past the control records");
        assert_eq!(c.position(&b), Some(11));
        assert_eq!(c.positions.fetchable(), vec![(a.clone(), 4)]);
        let second = c.drain();
        assert_eq!(second.len(), 1);
        assert_eq!(c.position(&b), Some(12));
        assert!(c.drain().is_empty());
        let unc = c.positions.uncommitted();
        assert_eq!(unc[&a], (4, Some(1)));
        assert_eq!(unc[&b], (12, Some(1)));
    }

    #[test]
    fn polled_helpers() {
        let p = Polled {
            records: vec![record("t", 0, 1)],
            events: vec![GroupEvent::Revoked {
                generation: 3,
                partitions: vec![TopicPartition::new("t", 0)],
            }],
        };
        assert_eq!(p.len(), 1);
        assert_eq!(p.revoked().unwrap().len(), 1);
        assert!(p.assigned().is_none());
        assert_eq!(p.into_iter().count(), 1);
    }
}
