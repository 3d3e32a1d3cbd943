//! What a member holds whatever group protocol it speaks: its settings and client, its state
//! machine and identity, its assignment, the coordinator session, the wakeup, the poll clock,
//! the events a failed call could not deliver, and why it stopped (fenced, denied, closed).
//! Both engines take it by `&mut` beside their own state, so neither reaches into the other.

use super::join_warnings::JoinWarnings;
use super::GroupEvent;
use crate::authorization::{Resource, Scope};
use crate::client::Client;
use crate::error::{Error, Result};
use crate::group::assignment::Assignment;
use crate::group::config::MemberConfig;
use crate::group::metrics::Metrics;
use crate::group::poll_timer::PollClock;
use crate::group::session::Session;
use crate::group::state::{Generation, GroupState, MemberState, Transition};
use crate::protocol::ApiKey;
use crate::wakeup::Wakeup;
use crate::KafkaCode;
use std::sync::Arc;
use std::time::Instant;

/// The shared part of a [`GroupMember`](super::GroupMember) (see the module docs).
#[derive(Debug)]
pub(in crate::group) struct Core {
    pub(in crate::group) client: Client,
    pub(in crate::group) config: MemberConfig,
    /// The state machine; under KIP-848 only its ends move (fenced, denied, left, closed) and
    /// its generation is the member epoch ([`GroupState::set_epoch`]).
    pub(in crate::group) state: GroupState,
    pub(in crate::group) assignment: Assignment,
    /// Whether the member joins as a static one (false after a fallback to dynamic).
    pub(in crate::group) static_member: bool,
    pub(in crate::group) warned_fallback: bool,
    pub(in crate::group) metrics: Arc<Metrics>,
    /// Lets another thread end a blocked `poll` or `join` ([`GroupMember::wakeup_handle`]).
    ///
    /// [`GroupMember::wakeup_handle`]: super::GroupMember::wakeup_handle
    pub(in crate::group) wakeup: Wakeup,
    /// The application's calls to `poll` and `join`, which the heartbeat threads hold against
    /// `max.poll.interval.ms`.
    pub(in crate::group) poll_clock: Arc<PollClock>,
    /// The coordinator and the member's own connection to it.
    pub(in crate::group) session: Session,
    /// The last error a join retried past, for the timeout a caller may get.
    pub(in crate::group) last_join_error: Option<Error>,
    /// Which join failures are worth a warning.
    pub(in crate::group) join_warnings: JoinWarnings,
    /// When the current join started (for the join-time metric).
    pub(in crate::group) join_started: Option<Instant>,
    /// Events of a call that returned an error, delivered by the next call.
    pub(in crate::group) undelivered: Vec<GroupEvent>,
    /// The request the coordinator denied the group on (`MemberState::Unauthorized`), with
    /// the code and the broker's message, to return from every later call.
    pub(in crate::group) denied: Option<(ApiKey, KafkaCode, Option<String>)>,
}

impl Core {
    /// The shared part of a member with a validated `config`, before any network call.
    pub(in crate::group) fn new(client: Client, config: MemberConfig) -> Core {
        Core {
            static_member: config.group_instance_id.is_some(),
            client,
            config,
            state: GroupState::default(),
            assignment: Assignment::default(),
            warned_fallback: false,
            metrics: Arc::new(Metrics::default()),
            wakeup: Wakeup::default(),
            poll_clock: PollClock::new(),
            session: Session::default(),
            last_join_error: None,
            join_warnings: JoinWarnings::default(),
            join_started: None,
            undelivered: Vec::new(),
            denied: None,
        }
    }

    /// The generation joined last (under KIP-848, the member epoch and member id).
    pub(in crate::group) fn generation(&self) -> Option<&Generation> {
        self.state.generation()
    }

    /// Who is speaking, for log lines: group, member id, instance id, generation.
    pub(in crate::group) fn ctx(&self) -> String {
        let member_id = self.state.member_id();
        format!(
            "group={} member={} instance={} generation={}",
            self.config.group_id,
            if member_id.is_empty() { "-" } else { member_id },
            self.config.group_instance_id.as_deref().unwrap_or("-"),
            self.generation().map_or(-1, |g| g.id)
        )
    }

    pub(in crate::group) fn transition(&mut self, t: Transition) {
        let from = self.state.state();
        match self.state.apply(t) {
            Ok(()) if from != self.state.state() => {
                log::info!("{}: {from} -> {}", self.ctx(), self.state.state())
            }
            Ok(()) => {}
            // A bug in the group code, not a runtime condition; never worth a panic.
            Err(e) => log::error!(
                "{}: invalid transition {:?} from {}",
                self.ctx(),
                e.transition,
                e.from
            ),
        }
    }

    /// The error of a member that has stopped for good, if it has.
    pub(in crate::group) fn check_usable(&self) -> Result<()> {
        match self.state.state() {
            MemberState::Fenced => Err(self.fenced_error()),
            MemberState::Unauthorized => Err(self.denied_error()),
            MemberState::Closed => Err(Error::Closed),
            _ => Ok(()),
        }
    }

    pub(in crate::group) fn fenced_error(&self) -> Error {
        Error::Fenced {
            group: self.config.group_id.clone(),
            instance_id: self.config.group_instance_id.clone().unwrap_or_default(),
        }
    }

    fn denied_error(&self) -> Error {
        let (api, code, message) =
            self.denied
                .clone()
                .unwrap_or((ApiKey::JoinGroup, KafkaCode::GroupAuthorizationFailed, None));
        Error::Authorization {
            api,
            code,
            resource: Resource::Group(self.config.group_id.clone()),
            message,
        }
    }

    /// Records that the coordinator denied the group if `e` says so (the principal may not
    /// use it): the member enters [`MemberState::Unauthorized`], drops its assignment and its
    /// connection, and every later call returns the error. The engine stops its heartbeats.
    /// Returns whether `e` was such a denial.
    pub(in crate::group) fn deny(&mut self, e: &Error) -> bool {
        let Error::Authorization {
            api,
            code,
            resource: Resource::Group(_),
            message,
        } = e
        else {
            return false;
        };
        if self.state.state() == MemberState::Unauthorized {
            // Already stopped: an error passed up through more than one layer.
            return true;
        }
        self.denied = Some((*api, *code, message.clone()));
        self.transition(Transition::Denied);
        self.assignment = Assignment::default();
        self.session.conn = None;
        log::error!("{}: {e}; stopping without rejoining", self.ctx());
        true
    }

    /// A fatal group code as an error: [`Error::Authorization`] for the group when the
    /// coordinator denied it, [`Error::Group`] otherwise.
    pub(in crate::group) fn group_error(&self, api: ApiKey, code: KafkaCode) -> Error {
        let group = &self.config.group_id;
        Error::authorization(api, code, Scope::group(group)).unwrap_or_else(|| Error::Group {
            group: group.clone(),
            code,
            during: api.name(),
        })
    }

    /// Remembers why the join had to retry, for the timeout a caller may finally get, and logs
    /// it: at warn when [`JoinWarnings`] says so, else at debug.
    pub(in crate::group) fn note_join_error(&mut self, e: Error, during: &str) {
        let unready = e
            .kafka_code()
            .is_some_and(crate::group::action::coordinator_unready);
        match self.join_warnings.failed(Instant::now(), unready) {
            Some(failures) => log::warn!(
                "{}: {during}: {e} ({failures} failure(s) since the last warning); retrying",
                self.ctx()
            ),
            None => log::debug!("{}: {during}: {e}; retrying", self.ctx()),
        }
        self.last_join_error = Some(e);
    }

    /// Sleeps `retry.backoff.ms`, or until `deadline` if that comes first; false if `deadline`
    /// has passed.
    pub(in crate::group) fn backoff(&self, deadline: Instant) -> bool {
        self.wakeup
            .sleep_within(self.config.retry_backoff(&self.client), deadline)
    }

    /// The `group.instance.id` to send: none once the member fell back to dynamic.
    pub(in crate::group) fn instance_id_to_send(&self) -> Option<String> {
        self.config
            .group_instance_id
            .clone()
            .filter(|_| self.static_member)
    }
}
