//! A fetch session with one leader (KIP-227 incremental fetch), pure: what the next Fetch
//! carries (session id, epoch, which partitions, which to forget) and what each answer teaches.
//!
//! A session lets the broker remember the partitions a client fetches, so a request names only
//! what changed since the last one and an answer carries only partitions with news. The state
//! here is what the broker holds for this client: per partition the fetch offset, the
//! partition's byte limit, the leader epoch and the topic id, all as last sent. Because the
//! broker keeps fetching a partition from the offset it holds until told otherwise, every
//! change of a position (new records consumed, a seek) must be sent, and every partition the
//! poll thread stops asking for (paused, revoked, buffered full) must be forgotten: the session
//! mirrors exactly the targets of each fetch.
//!
//! One session per leader thread (see [`super::workers`]); it is used from Fetch v7 (Kafka
//! 1.1). The transitions, as Kafka's Java client makes them (`FetchSessionHandler`):
//!
//! | state before          | event                                         | next request                       |
//! |-----------------------|-----------------------------------------------|------------------------------------|
//! | any                   | request below v7                              | full, no session (id 0, FINAL -1)  |
//! | none (id 0)           | fetch                                         | full, INITIAL (id 0, epoch 0)      |
//! | full sent             | answer with session id 0                      | full, INITIAL                      |
//! | full sent             | answer with session id S                      | incremental (S, 1)                 |
//! | incremental (S, e)    | answer with session id S                      | incremental (S, e+1; MAX wraps to 1) |
//! | incremental (S, e)    | answer with session id 0 (session closed)     | full, INITIAL                      |
//! | incremental (S, e)    | answer with another session id                | full, close and recreate (S, 0)    |
//! | any                   | FETCH_SESSION_ID_NOT_FOUND (70)               | full, INITIAL                      |
//! | any with id S         | INVALID_FETCH_SESSION_EPOCH (71), FETCH_SESSION_TOPIC_ID_ERROR (106), any other request error | full, close and recreate (S, 0) |
//! | any with id S         | request failed, connection lost               | full, close and recreate (S, 0)    |
//! | full sent             | 70, 71 or 106                                 | as above, but after the retry backoff |
//! | incremental (S, e)    | names (≤ v12) ↔ topic ids (v13+) switch       | full, close and recreate (S, 0)    |
//!
//! An incremental request sends the partitions that are new or whose offset, byte limit,
//! leader epoch or topic id changed, and forgets (by topic id from v13, by name before) those
//! no longer asked for, and the old id of a partition whose topic id changed.

use super::fetcher::FetchTarget;
use crate::group::TopicPartition;
use crate::protocol::Uuid;
use crate::KafkaCode;
use std::collections::HashMap;

/// The highest Fetch version that names topics instead of identifying them by id.
const LAST_VERSION_WITH_NAMES: i16 = 12;

/// No session (the id a client sends to create one, and a broker answers to decline one).
const NO_SESSION: i32 = 0;
/// The epoch of a full request that creates a session (or closes and recreates one).
const INITIAL_EPOCH: i32 = 0;
/// The epoch of a request that asks for no session.
const FINAL_EPOCH: i32 = -1;

/// What the broker holds for one partition of the session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Held {
    topic_id: Uuid,
    offset: i64,
    partition_max_bytes: i32,
    leader_epoch: i32,
}

/// A partition to take out of the session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Forget {
    /// The partition (its topic name is what v7–v12 send).
    pub tp: TopicPartition,
    /// Its topic id as the broker holds it (what v13+ send).
    pub topic_id: Uuid,
}

/// The session part of one Fetch request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SessionPlan {
    /// `session_id`.
    pub session_id: i32,
    /// `session_epoch`.
    pub epoch: i32,
    /// Indexes into the targets of the partitions to put in the request.
    pub send: Vec<usize>,
    /// `forgotten_topics_data`.
    pub forget: Vec<Forget>,
}

impl SessionPlan {
    /// A full fetch of `n` targets without a session (FINAL epoch).
    pub fn sessionless(n: usize) -> Self {
        SessionPlan {
            session_id: NO_SESSION,
            epoch: FINAL_EPOCH,
            send: (0..n).collect(),
            forget: Vec::new(),
        }
    }
}

/// Whether a request-level code is about the session only: the session restarts and the fetch
/// is simply sent again, without refreshing metadata.
pub(crate) fn is_session_error(code: KafkaCode) -> bool {
    matches!(
        code,
        KafkaCode::FetchSessionIdNotFound
            | KafkaCode::InvalidFetchSessionEpoch
            | KafkaCode::FetchSessionTopicIdError
    )
}

/// The epoch after `epoch`: Kafka skips 0 (INITIAL) and -1 (FINAL) when it wraps.
fn next_epoch(epoch: i32) -> i32 {
    if epoch == i32::MAX {
        1
    } else {
        epoch + 1
    }
}

/// The session with one leader.
#[derive(Debug, Default)]
pub(crate) struct FetchSession {
    /// The session id (0: none).
    id: i32,
    /// The epoch of the next request: [`INITIAL_EPOCH`] means a full one.
    epoch: i32,
    /// Whether the session was built with topic ids (v13+) rather than names.
    uses_ids: bool,
    /// What the broker holds once the last request sent was applied.
    held: HashMap<TopicPartition, Held>,
    /// The epoch of the request in flight, if it used a session.
    in_flight: Option<i32>,
}

impl FetchSession {
    /// The session part of a Fetch at `version` for `targets` (each partition limited to
    /// `partition_max_bytes`), recorded as what the broker will hold.
    pub fn plan(&mut self, version: i16, targets: &[FetchTarget], partition_max_bytes: i32) -> SessionPlan {
        if version < 7 {
            self.reset();
            self.in_flight = None;
            return SessionPlan::sessionless(targets.len());
        }
        let uses_ids = version > LAST_VERSION_WITH_NAMES;
        if uses_ids != self.uses_ids {
            // The broker keys a session by names or by ids, not both: start it over.
            self.epoch = INITIAL_EPOCH;
            self.uses_ids = uses_ids;
        }
        let wanted: HashMap<&TopicPartition, Held> = targets
            .iter()
            .map(|t| {
                let held = Held {
                    topic_id: if uses_ids { t.topic_id } else { Uuid::NIL },
                    offset: t.offset,
                    partition_max_bytes,
                    leader_epoch: if version >= 9 { t.leader_epoch } else { -1 },
                };
                (&t.tp, held)
            })
            .collect();
        let plan = if self.epoch == INITIAL_EPOCH {
            SessionPlan {
                session_id: self.id,
                epoch: INITIAL_EPOCH,
                send: (0..targets.len()).collect(),
                forget: Vec::new(),
            }
        } else {
            let mut forget = Vec::new();
            // Sorted so that a request does not depend on the map's order.
            let mut gone: Vec<(&TopicPartition, &Held)> = self.held.iter().collect();
            gone.sort_by(|a, b| a.0.cmp(b.0));
            for (tp, held) in gone {
                let keep = wanted.get(tp).is_some_and(|w| w.topic_id == held.topic_id);
                if !keep {
                    forget.push(Forget {
                        tp: tp.clone(),
                        topic_id: held.topic_id,
                    });
                }
            }
            let send = targets
                .iter()
                .enumerate()
                .filter(|(_, t)| self.held.get(&t.tp) != wanted.get(&t.tp))
                .map(|(i, _)| i)
                .collect();
            SessionPlan {
                session_id: self.id,
                epoch: self.epoch,
                send,
                forget,
            }
        };
        self.held = wanted.into_iter().map(|(tp, h)| (tp.clone(), h)).collect();
        self.in_flight = Some(plan.epoch);
        plan
    }

    /// Learns from the answer to the last planned request: its request-level `error_code` and
    /// `session_id`. True when the answer was a session error ([`is_session_error`]) to an
    /// incremental request: the fetch may be sent again at once, as a full one. A session error
    /// to a full request is the broker's problem, not the session's: retried only after the
    /// usual backoff, so that a broker answering nothing else cannot spin the fetch thread.
    pub fn answered(&mut self, error_code: i16, session_id: i32) -> bool {
        let Some(sent_epoch) = self.in_flight.take() else {
            return false; // not a session request
        };
        let code = KafkaCode::from_code(error_code);
        let retry_now = is_session_error(code) && sent_epoch != INITIAL_EPOCH;
        if code == KafkaCode::FetchSessionIdNotFound {
            self.reset();
        } else if code.is_error() {
            self.close_existing();
        } else if session_id == NO_SESSION {
            self.reset();
        } else if sent_epoch == INITIAL_EPOCH {
            self.id = session_id;
            self.epoch = 1;
        } else if session_id == self.id {
            self.epoch = next_epoch(self.epoch);
        } else {
            // Not the session asked about: what the broker holds for it is unknown.
            self.close_existing();
        }
        retry_now
    }

    /// The last planned request got no answer (failed, timed out, connection lost): what the
    /// broker applied is unknown.
    pub fn failed(&mut self) {
        self.in_flight = None;
        self.close_existing();
    }

    /// The session id (0: none), for logs and tests.
    pub fn id(&self) -> i32 {
        self.id
    }

    /// Next request full, keeping the id so the broker drops the old session for a new one.
    fn close_existing(&mut self) {
        self.epoch = INITIAL_EPOCH;
        self.held.clear();
    }

    /// No session: the next request creates one.
    fn reset(&mut self) {
        self.id = NO_SESSION;
        self.close_existing();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAXB: i32 = 1 << 20;

    fn target(topic: &str, p: i32, offset: i64) -> FetchTarget {
        FetchTarget {
            tp: TopicPartition::new(topic, p),
            topic_id: Uuid([topic.as_bytes()[0]; 16]),
            offset,
            leader_epoch: 5,
        }
    }

    fn three() -> Vec<FetchTarget> {
        vec![target("a", 0, 10), target("a", 1, 20), target("b", 0, 30)]
    }

    /// A session established at v`version` with `three()`, next epoch 1.
    fn established(version: i16) -> FetchSession {
        let mut s = FetchSession::default();
        let plan = s.plan(version, &three(), MAXB);
        assert_eq!((plan.session_id, plan.epoch), (0, 0));
        s.answered(0, 77);
        s
    }

    fn ids(plan: &SessionPlan) -> (i32, i32) {
        (plan.session_id, plan.epoch)
    }

    #[test]
    fn below_v7_no_session() {
        let mut s = established(13);
        let plan = s.plan(6, &three(), MAXB);
        assert_eq!(plan, SessionPlan::sessionless(3));
        s.answered(0, 0);
        assert_eq!(s.id(), 0);
        let plan = s.plan(13, &three(), MAXB);
        assert_eq!(ids(&plan), (0, 0));
    }

    #[test]
    fn first_fetch_is_full_initial() {
        let mut s = FetchSession::default();
        let plan = s.plan(13, &three(), MAXB);
        assert_eq!(ids(&plan), (0, 0));
        assert_eq!(plan.send, vec![0, 1, 2]);
        assert!(plan.forget.is_empty());
    }

    #[test]
    fn full_answered_without_session_stays_initial() {
        let mut s = FetchSession::default();
        s.plan(13, &three(), MAXB);
        s.answered(0, 0);
        let plan = s.plan(13, &three(), MAXB);
        assert_eq!(ids(&plan), (0, 0));
        assert_eq!(plan.send.len(), 3);
    }

    #[test]
    fn full_answered_with_session_goes_incremental() {
        let mut s = established(13);
        assert_eq!(s.id(), 77);
        let plan = s.plan(13, &three(), MAXB);
        assert_eq!(ids(&plan), (77, 1));
        assert!(plan.send.is_empty(), "nothing changed: {plan:?}");
        assert!(plan.forget.is_empty());
    }

    #[test]
    fn incremental_epochs_increase_and_wrap() {
        let mut s = established(13);
        for want in 1..=3 {
            assert_eq!(ids(&s.plan(13, &three(), MAXB)), (77, want));
            s.answered(0, 77);
        }
        s.epoch = i32::MAX;
        assert_eq!(ids(&s.plan(13, &three(), MAXB)), (77, i32::MAX));
        s.answered(0, 77);
        assert_eq!(ids(&s.plan(13, &three(), MAXB)), (77, 1));
    }

    #[test]
    fn incremental_sends_only_changes_and_forgets_the_rest() {
        let mut s = established(13);
        let mut next = three();
        next[0].offset = 11; // consumed
        next[1].leader_epoch = 6; // new leader epoch
        next.remove(2); // b-0 paused
        next.push(target("c", 3, 0)); // newly assigned
        let plan = s.plan(13, &next, MAXB);
        assert_eq!(ids(&plan), (77, 1));
        assert_eq!(plan.send, vec![0, 1, 2]);
        assert_eq!(
            plan.forget,
            vec![Forget {
                tp: TopicPartition::new("b", 0),
                topic_id: Uuid([b'b'; 16]),
            }]
        );
        s.answered(0, 77);
        // b-0 resumed: sent again; the byte limit changed for all.
        let plan = s.plan(13, &three(), MAXB / 2);
        assert_eq!(plan.send, vec![0, 1, 2]);
        assert_eq!(plan.forget.len(), 1, "c-3 forgotten: {plan:?}");
        s.answered(0, 77);
        let mut same = three();
        same[2].offset = 31;
        let plan = s.plan(13, &same, MAXB / 2);
        assert_eq!(plan.send, vec![2], "only the moved offset");
    }

    #[test]
    fn a_changed_topic_id_forgets_the_old_one() {
        let mut s = established(13);
        let mut next = three();
        next[2].topic_id = Uuid([9; 16]); // b recreated
        let plan = s.plan(13, &next, MAXB);
        assert_eq!(plan.send, vec![2]);
        assert_eq!(plan.forget[0].topic_id, Uuid([b'b'; 16]));
    }

    #[test]
    fn leader_epoch_counts_only_from_v9() {
        let mut s = established(8);
        let mut next = three();
        next[0].leader_epoch = 99; // not sent at v8, so no change
        assert!(s.plan(8, &next, MAXB).send.is_empty());
    }

    #[test]
    fn incremental_answered_without_session_goes_initial() {
        let mut s = established(13);
        s.plan(13, &three(), MAXB);
        s.answered(0, 0);
        let plan = s.plan(13, &three(), MAXB);
        assert_eq!(ids(&plan), (0, 0));
        assert_eq!(plan.send.len(), 3);
    }

    #[test]
    fn incremental_answered_with_another_session_closes() {
        let mut s = established(13);
        s.plan(13, &three(), MAXB);
        s.answered(0, 78);
        let plan = s.plan(13, &three(), MAXB);
        assert_eq!(ids(&plan), (77, 0));
        assert_eq!(plan.send.len(), 3);
    }

    #[test]
    fn session_id_not_found_goes_initial() {
        let mut s = established(13);
        s.plan(13, &three(), MAXB);
        assert!(s.answered(KafkaCode::FetchSessionIdNotFound.code(), 0));
        let plan = s.plan(13, &three(), MAXB);
        assert_eq!(ids(&plan), (0, 0));
        assert_eq!(plan.send.len(), 3);
        // Refused again, to the full request: not retried at once.
        assert!(!s.answered(KafkaCode::FetchSessionIdNotFound.code(), 0));
        assert_eq!(ids(&s.plan(13, &three(), MAXB)), (0, 0));
    }

    #[test]
    fn other_errors_close_and_recreate() {
        for code in [
            KafkaCode::InvalidFetchSessionEpoch,
            KafkaCode::FetchSessionTopicIdError,
            KafkaCode::UnknownServerError,
        ] {
            let mut s = established(13);
            s.plan(13, &three(), MAXB);
            assert_eq!(s.answered(code.code(), 0), is_session_error(code), "{code}");
            let plan = s.plan(13, &three(), MAXB);
            assert_eq!(ids(&plan), (77, 0), "{code}");
            assert_eq!(plan.send.len(), 3, "{code}");
            assert!(plan.forget.is_empty(), "{code}");
            s.answered(0, 80);
            assert_eq!(ids(&s.plan(13, &three(), MAXB)), (80, 1), "{code}");
        }
    }

    #[test]
    fn a_failed_request_closes_and_recreates() {
        let mut s = established(13);
        let mut next = three();
        next[0].offset = 12;
        s.plan(13, &next, MAXB);
        s.failed();
        let plan = s.plan(13, &next, MAXB);
        assert_eq!(ids(&plan), (77, 0));
        assert_eq!(plan.send.len(), 3);
        // Without a session, a failure leaves it INITIAL.
        let mut fresh = FetchSession::default();
        fresh.plan(13, &three(), MAXB);
        fresh.failed();
        assert_eq!(ids(&fresh.plan(13, &three(), MAXB)), (0, 0));
    }

    #[test]
    fn switching_names_and_ids_recreates() {
        let mut s = established(13);
        let plan = s.plan(12, &three(), MAXB);
        assert_eq!(ids(&plan), (77, 0));
        assert_eq!(plan.send.len(), 3);
        s.answered(0, 81);
        assert_eq!(ids(&s.plan(12, &three(), MAXB)), (81, 1));
        s.answered(0, 81);
        assert_eq!(ids(&s.plan(13, &three(), MAXB)), (81, 0));
    }

    #[test]
    fn session_errors_are_70_71_106() {
        assert!(is_session_error(KafkaCode::from_code(70)));
        assert!(is_session_error(KafkaCode::from_code(71)));
        assert!(is_session_error(KafkaCode::from_code(106)));
        assert!(!is_session_error(KafkaCode::NotLeaderOrFollower));
    }
}
