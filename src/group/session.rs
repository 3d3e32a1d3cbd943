//! The coordinator session a member keeps whatever its group protocol: which broker
//! coordinates the group, the member's own connection to it (with the reconnect backoff of a
//! connection that failed), and the requests that go over it — the classic engine's JoinGroup,
//! SyncGroup and LeaveGroup, the KIP-848 engine's first heartbeat, and the consumer's
//! OffsetCommit and OffsetFetch.
//!
//! The connection is the member's, not the client's: a JoinGroup can be held for a whole
//! rebalance and must not hold up other members embedded in the same process. Heartbeat
//! threads keep their own.

use crate::client::Broker;
use crate::error::{Error, Result};
use crate::group::config::OldBrokerPolicy;
use crate::group::member::core::Core;
use crate::group::member::{lookup_deadline, GroupEvent};
use crate::net::link::{Link, Purpose};
use crate::net::STATIC_MEMBERSHIP;
use crate::protocol::ApiKey;
use crate::KafkaCode;
use std::time::Instant;

/// The coordinator as last found, and the member's connection to it.
#[derive(Debug, Default)]
pub(in crate::group) struct Session {
    /// The coordinator in use.
    pub(in crate::group) coordinator: Option<Broker>,
    /// The member's own connection to it.
    pub(in crate::group) conn: Option<Link>,
    /// The link whose connection attempt to the coordinator failed, kept for the next attempt
    /// so that its reconnect backoff holds (a fresh link would dial at once, every retry).
    failed_link: Option<Link>,
    /// When coordinator lookups started failing in a row.
    discovery_since: Option<Instant>,
}

impl Session {
    /// Marks the coordinator unknown, so the next request finds it again. Only the member's
    /// own connection goes: the client's to that broker (metadata, produce, its coordinator
    /// lookups) are not wrong because the group moved, and dropping them would make a producer
    /// sharing the client reconnect at every coordinator move.
    pub(in crate::group) fn forget(&mut self) {
        self.conn = None;
        self.coordinator = None;
    }
}

impl Core {
    /// Finds the coordinator and connects to it if needed, until `deadline`; checks static
    /// membership support. Returns with no connection when `deadline` passes first. Once
    /// lookups have failed for `default.api.timeout.ms` in a row, returns the retries timeout
    /// with the last cause (and starts counting again).
    pub(in crate::group) fn ensure_coordinator(&mut self, deadline: Instant) -> Result<Option<GroupEvent>> {
        let mut moved = None;
        let mut first = true;
        // At least one lookup, even when `deadline` has passed (a poll with no time left).
        while self.session.conn.is_none() {
            let since = *self.session.discovery_since.get_or_insert_with(Instant::now);
            let group = self.config.group_id.clone();
            // A call with no time left still gets one lookup of a useful length, or a poll(0)
            // loop would never find its coordinator; later attempts end at `deadline` (they
            // might otherwise sleep out a reconnect backoff past it).
            let by = if first {
                lookup_deadline(deadline)
            } else {
                deadline
            };
            first = false;
            let found = self.client.lookup_coordinator_by(&group, by).and_then(|b| {
                let mut link = self.session.failed_link.take().unwrap_or_else(|| {
                    let mut link = self.client.link(Purpose::Coordinator, b.addr());
                    link.count_reauthentications_in(self.metrics.reauthentication_counter());
                    link
                });
                // Another coordinator starts with a backoff of its own.
                link.retarget(&b.addr());
                match link.connect(Some(by)) {
                    Ok(()) => Ok((b, link)),
                    Err(e) => {
                        self.session.failed_link = Some(link);
                        Err(e)
                    }
                }
            });
            match found {
                Ok((b, conn)) => {
                    self.session.discovery_since = None;
                    self.check_static_support(&conn)?;
                    if self.session.coordinator.as_ref().is_some_and(|old| *old != b) {
                        moved = Some(GroupEvent::CoordinatorMoved {
                            coordinator: b.clone(),
                        });
                    }
                    log::debug!("{}: coordinator is broker {} at {}", self.ctx(), b.id, b.addr());
                    self.session.coordinator = Some(b);
                    self.session.conn = Some(conn);
                }
                // A queued lookup never went out: another caller of the client held its
                // connection until `deadline`. Nothing is wrong with the coordinator, and the
                // next call looks again; an error would fail a poll over a neighbour's request.
                Err(e) if e.is_coordinator_transient() || e.is_queued() => {
                    self.note_join_error(e, "finding the coordinator");
                    if since.elapsed() >= self.client.api_timeout() {
                        self.session.discovery_since = None;
                        return Err(Error::retries_timeout(
                            format!(
                                "finding the coordinator of group {} (default.api.timeout.ms {:?})",
                                self.config.group_id,
                                self.client.api_timeout()
                            ),
                            self.last_join_error.take(),
                        ));
                    }
                    if !self.backoff(deadline) {
                        return Ok(moved);
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Ok(moved)
    }

    /// Finds the coordinator and connects to it unless connected, by `deadline`: the step
    /// before a request outside of joining. Without a connection by then, returns the last
    /// error the lookups met.
    pub(in crate::group) fn ensure_connected(&mut self, deadline: Instant) -> Result<()> {
        if self.session.conn.is_none() {
            self.ensure_coordinator(deadline)?;
        }
        if self.session.conn.is_none() {
            return Err(self
                .last_join_error
                .take()
                .unwrap_or_else(|| Error::NoCoordinator {
                    group: self.config.group_id.clone(),
                }));
        }
        Ok(())
    }

    /// Sends a request over the member's connection, which
    /// [`ensure_connected`](Self::ensure_connected) has made, by `deadline`; left in flight at `deadline` and
    /// taken up again by the same request when `resumable` (see `Link::request_resumable`).
    /// A broken connection makes the coordinator unknown.
    pub(in crate::group) fn request_connected<R: crate::protocol::Request>(
        &mut self,
        deadline: Instant,
        build: impl FnOnce(i16) -> R,
        resumable: bool,
    ) -> Result<R::Response> {
        let conn = self.session.conn.as_mut().ok_or(Error::Closed)?;
        let result = match resumable {
            true => conn.request_resumable(deadline, build),
            false => conn.request(Some(deadline), build),
        };
        if let Err(e) = &result {
            if e.breaks_connection() {
                self.session.forget();
            }
        }
        result
    }

    /// A request to the coordinator while the member's connection carries its JoinGroup or
    /// SyncGroup: a commit is refused (REBALANCE_IN_PROGRESS: its generation is ending), and
    /// any other request — OffsetFetch, DescribeGroups, which no generation bounds — goes over
    /// the client's own connection to the coordinator, so that a cooperative member that
    /// rejoins while it keeps consuming can look up the committed offsets of partitions it was
    /// just given.
    pub(in crate::group) fn request_while_joining<R: crate::protocol::Request>(
        &mut self,
        deadline: Instant,
        build: impl FnOnce(i16) -> R,
        resumable: bool,
    ) -> Result<R::Response> {
        if let Some(coordinator) = self
            .session
            .coordinator
            .as_ref()
            .filter(|_| R::API_KEY != ApiKey::OffsetCommit)
        {
            return match resumable {
                true => self.client.send_to_resumable_by(coordinator.id, deadline, build),
                false => self.client.send_to_by(coordinator.id, deadline, build),
            };
        }
        Err(Error::Kafka {
            api: R::API_KEY,
            code: KafkaCode::RebalanceInProgress,
            message: Some(format!(
                "group {} is rebalancing (this member is joining)",
                self.config.group_id
            )),
        })
    }

    fn check_static_support(&mut self, conn: &Link) -> Result<()> {
        if self.config.group_instance_id.is_none() {
            return Ok(());
        }
        match conn.check(&STATIC_MEMBERSHIP) {
            Ok(()) => {
                self.static_member = true;
                Ok(())
            }
            Err(e) => match self.config.old_broker_policy {
                OldBrokerPolicy::Error => Err(e),
                OldBrokerPolicy::FallBackToDynamic => {
                    if !self.warned_fallback {
                        log::warn!(
                            "{}: {e}; joining as a dynamic member (FallBackToDynamic)",
                            self.ctx()
                        );
                        self.warned_fallback = true;
                    }
                    self.static_member = false;
                    Ok(())
                }
            },
        }
    }
}
