//! The network side of a round: each leader's requests in order, leaders in parallel.
//!
//! The two calls that put a Produce request on a connection are in [`run_work`].

use super::record::Acks;
use super::request::{magic_for, LastError};
use crate::client::Client;
use crate::error::Result;
use crate::group::TopicPartition;
use crate::net::link::Purpose;
use crate::protocol::messages::{ProduceRequest, ProduceResponse};

/// One broker's share of a round: requests in order, each with the partitions it carries.
pub(super) struct Work {
    pub(super) leader: i32,
    pub(super) version: i16,
    pub(super) requests: Vec<(ProduceRequest, Vec<TopicPartition>)>,
}

/// What became of one request, with the partitions it carries.
pub(super) enum Sent {
    /// Sent: the response (`None` for `acks=0`) or the error that stopped it.
    Answered(Vec<TopicPartition>, Result<Option<ProduceResponse>>),
    /// Not sent, because the broker's connection broke on an earlier request of the round;
    /// how it broke.
    Skipped(Vec<TopicPartition>, LastError),
}

/// Sends a broker's requests one after the other; after a broken connection the rest are
/// reported as skipped, not sent.
pub(super) fn run_work(client: &Client, acks: Acks, work: Work) -> Vec<Sent> {
    let mut out = Vec::with_capacity(work.requests.len());
    let mut broken: Option<LastError> = None;
    for (req, tps) in work.requests {
        if let Some(why) = &broken {
            out.push(Sent::Skipped(tps, why.clone()));
            continue;
        }
        let version = work.version;
        let check = move |v: i16| {
            // The version was picked from the same connection's table a moment ago; a change
            // means a reconnect to a different broker build, which the leader check after the
            // answer covers.
            if magic_for(v) != magic_for(version) {
                log::warn!("Produce version changed from v{version} to v{v} between encoding and sending");
            }
            req
        };
        let result = if acks == Acks::None {
            client
                .send_no_response_for(Purpose::Produce, work.leader, check)
                .map(|()| None)
        } else {
            client
                .send_for(Purpose::Produce, work.leader, None, check)
                .map(Some)
        };
        if let Err(e) = &result {
            if e.is_unreachable() {
                log::debug!(
                    "producer: the connection to broker {} broke ({e}); the rest of its requests \
                     this round are not sent",
                    work.leader
                );
                broken = Some(LastError::of(e));
            }
        }
        out.push(Sent::Answered(tps, result));
    }
    out
}

/// Runs each broker's requests, brokers in parallel.
pub(super) fn execute(client: &Client, acks: Acks, works: Vec<Work>) -> Vec<Sent> {
    if works.len() <= 1 {
        return works
            .into_iter()
            .flat_map(|w| run_work(client, acks, w))
            .collect();
    }
    std::thread::scope(|s| {
        let handles: Vec<_> = works
            .into_iter()
            .map(|w| s.spawn(move || run_work(client, acks, w)))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    })
}
