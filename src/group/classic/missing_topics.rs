//! A subscribed topic that does not exist is reported, not waited for in silence: each member
//! (not only the leader, which assigns) looks its own subscription up once per generation, in
//! the poll after its `Assigned` — never inside the join, so a static restart's join is not a
//! round trip longer. The leader's watch (`metadata_watch.rs`) is what picks the topic up when
//! it appears.

use super::Classic;
use crate::error::{Error, Result};
use crate::group::config::MissingTopicPolicy;
use crate::group::member::core::Core;
use crate::group::member::GroupEvent;
use crate::group::state::MemberState;
use std::collections::BTreeMap;
use std::time::Instant;

/// What to do about a missing topic, in every warning and error that names one.
pub(crate) fn missing_topics_hint() -> &'static str {
    "create them (kafka-topics.sh --create --topic …, or Admin::create_topics) or enable the \
     broker's auto.create.topics.enable; the group picks a topic up once it exists"
}

impl Classic {
    /// Once per generation, when due: looks the subscribed topics up and reports those that do
    /// not exist ([`GroupEvent::TopicsMissing`] and a warning, or [`Error::TopicsMissing`] with
    /// [`MissingTopicPolicy::Error`]). A failed lookup is tried again at a later poll, after
    /// `retry.backoff.ms`.
    pub(super) fn check_missing_topics(
        &mut self,
        core: &mut Core,
        deadline: Instant,
        events: &mut Vec<GroupEvent>,
    ) -> Result<()> {
        let Some(due) = self.missing_check else {
            return Ok(());
        };
        if Instant::now() < due
            || core.state.state() != MemberState::Stable
            || self.rejoin.is_some()
            || core.config.topics.is_empty()
        {
            return Ok(());
        }
        let counts =
            match self.partition_counts(core, core.config.topics.iter().map(String::as_str), deadline) {
                Ok(counts) => counts,
                Err(e) if e.is_transient() => {
                    log::debug!("{}: looking up the subscribed topics failed: {e}", core.ctx());
                    self.missing_check =
                        Some(crate::deadline::after(core.config.retry_backoff(&core.client)));
                    return Ok(());
                }
                Err(e) => {
                    self.missing_check = None;
                    return Err(e);
                }
            };
        self.missing_check = None;
        let topics = missing(&core.config.topics, &counts);
        if topics.is_empty() {
            return Ok(());
        }
        match core.config.missing_topic_policy {
            MissingTopicPolicy::Warn => {
                log::warn!(
                    "{}: subscribed topic(s) {} do not exist; {}",
                    core.ctx(),
                    topics.join(", "),
                    missing_topics_hint()
                );
                events.push(GroupEvent::TopicsMissing { topics });
                Ok(())
            }
            MissingTopicPolicy::Error => Err(Error::TopicsMissing {
                group: core.config.group_id.clone(),
                topics,
            }),
        }
    }
}

/// The subscribed topics without partitions in `counts` (which leaves out those missing, in
/// error or empty), in subscription order, each once.
fn missing(subscribed: &[String], counts: &BTreeMap<String, i32>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for t in subscribed {
        if !counts.contains_key(t) && !out.contains(t) {
            out.push(t.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topics_without_partitions_are_missing() {
        let counts = BTreeMap::from([("a".to_string(), 3)]);
        let subscribed = ["b".to_string(), "a".to_string(), "c".to_string(), "b".to_string()];
        assert_eq!(missing(&subscribed, &counts), ["b", "c"]);
        assert!(missing(&["a".to_string()], &counts).is_empty());
    }
}
