//! The fetch threads: one per partition leader, each with its own connection to that leader
//! (see [`super::fetcher`]), so that every leader is fetched from at the same time and a slow
//! one (holding its fetch for `fetch.max.wait.ms`) holds up no other.
//!
//! The poll thread decides everything: which partitions, from which offsets, with how many
//! bytes (the room [`super::prefetch::FetchBuffer`] leaves). A thread only runs the fetch it
//! is given, decodes the answer and sends it back; one fetch per leader at a time, as the Java
//! consumer keeps one in flight per node. Threads stop when the consumer is closed or dropped:
//! a fetch the broker is holding is cut short by shutting its socket down.
//!
//! Each thread keeps the fetch session with its leader ([`super::fetch_session`]): it is told
//! every answer, and after a failed request or a lost connection it starts over with a full
//! fetch.

use super::config::IsolationLevel;
use super::fetch_session::FetchSession;
use super::fetcher::{self, FetchSettings, FetchTarget, Fetcher, PartitionFetch};
use super::prefetch::Stamp;
use crate::client::{Broker, Client};
use crate::error::Error;
use crate::group::TopicPartition;
use crate::records::DecodeLimits;
use crate::worker::{Stop, Worker};
use crate::KafkaCode;
use crossbeam_channel::{Receiver, Sender};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One fetch for a leader's thread.
#[derive(Debug)]
struct Job {
    broker: Broker,
    targets: Vec<(FetchTarget, Stamp)>,
    settings: FetchSettings,
    reserved: usize,
}

/// Why a fetch brought no per-partition answers.
#[derive(Debug)]
pub(crate) enum FetchFailure {
    /// The request failed (connection, timeout, version).
    Request(Error),
    /// The broker answered with a request-level error code.
    Code(KafkaCode),
    /// The broker refused the fetch session (FETCH_SESSION_ID_NOT_FOUND,
    /// INVALID_FETCH_SESSION_EPOCH, FETCH_SESSION_TOPIC_ID_ERROR): the session has restarted
    /// and the fetch may be sent again at once.
    Session(KafkaCode),
}

/// A fetch's outcome, back on the poll thread.
#[derive(Debug)]
pub(crate) struct Done {
    /// The leader asked.
    pub leader: i32,
    /// What was asked, with each partition's stamp when it was sent.
    pub targets: Vec<(FetchTarget, Stamp)>,
    /// Bytes the fetch reserved in the buffer.
    pub reserved: usize,
    /// Per-partition answers, or why there are none.
    pub outcome: Result<Vec<(TopicPartition, PartitionFetch)>, FetchFailure>,
}

/// The fetch thread of one leader.
#[derive(Debug)]
struct FetchThread {
    jobs: Sender<Job>,
    /// `None` if it could not be started: `send` finds its job channel closed and tries again.
    thread: Option<Worker>,
    /// The partitions of the fetch in flight.
    busy: Option<Vec<TopicPartition>>,
    /// After a failed fetch, no new one before this.
    retry_at: Option<Instant>,
}

/// The fetch threads, by leader id, and the channel their answers come back on.
#[derive(Debug)]
pub(crate) struct Workers {
    client: Client,
    isolation: IsolationLevel,
    limits: DecodeLimits,
    workers: HashMap<i32, FetchThread>,
    done_tx: Sender<Done>,
    done_rx: Receiver<Done>,
}

impl Workers {
    /// No threads yet: one is started at the first fetch to each leader.
    pub fn new(client: Client, isolation: IsolationLevel, limits: DecodeLimits) -> Self {
        let (done_tx, done_rx) = crossbeam_channel::unbounded();
        Workers {
            client,
            isolation,
            limits,
            workers: HashMap::new(),
            done_tx,
            done_rx,
        }
    }

    /// Where answers arrive.
    pub fn answers(&self) -> &Receiver<Done> {
        &self.done_rx
    }

    /// Every partition that is part of a fetch in flight, collected in one pass so that a poll
    /// checking each of its partitions does not scan every fetch's list per partition.
    pub fn busy(&self) -> HashSet<&TopicPartition> {
        self.workers
            .values()
            .filter_map(|w| w.busy.as_ref())
            .flatten()
            .collect()
    }

    /// Whether any fetch is in flight.
    pub fn any_in_flight(&self) -> bool {
        self.workers.values().any(|w| w.busy.is_some())
    }

    /// Whether a new fetch may go to `leader` now: none in flight, not backing off.
    pub fn is_idle(&self, leader: i32, now: Instant) -> bool {
        self.workers.get(&leader).map_or(true, |w| {
            w.busy.is_none() && w.retry_at.map_or(true, |t| t <= now)
        })
    }

    /// Sends a fetch to `broker`'s thread (starting it if needed); the stamps and `reserved`
    /// come back with the answer.
    pub fn send(
        &mut self,
        broker: &Broker,
        targets: Vec<(FetchTarget, Stamp)>,
        settings: FetchSettings,
        reserved: usize,
    ) {
        if !self.workers.contains_key(&broker.id) {
            let w = self.spawn();
            self.workers.insert(broker.id, w);
        }
        let Some(worker) = self.workers.get_mut(&broker.id) else {
            return;
        };
        worker.busy = Some(targets.iter().map(|(t, _)| t.tp.clone()).collect());
        worker.retry_at = None;
        let job = Job {
            broker: broker.clone(),
            targets,
            settings,
            reserved,
        };
        if worker.jobs.send(job).is_err() {
            // The thread is gone (it only exits when stopped): start over next time.
            self.workers.remove(&broker.id);
        }
    }

    /// An answer from `leader` arrived: it may be sent another fetch, after `backoff` if given
    /// (a failed fetch).
    pub fn finished(&mut self, leader: i32, backoff: Option<Duration>) {
        if let Some(w) = self.workers.get_mut(&leader) {
            w.busy = None;
            w.retry_at = backoff.map(|b| crate::deadline::at(Instant::now(), b));
        }
    }

    fn spawn(&self) -> FetchThread {
        let (jobs, rx) = crossbeam_channel::unbounded::<Job>();
        // It waits for its next job on `rx`: a stop closes that channel too (see `stop`).
        let stop = Arc::new(Stop::default());
        let client = self.client.clone();
        let done = self.done_tx.clone();
        let (isolation, limits) = (self.isolation, self.limits);
        let seen = stop.clone();
        let spawned = Worker::spawn("kafka-group-fetch".into(), None, stop, move || {
            run(&client, &rx, &done, &seen, isolation, &limits);
        });
        let thread = match spawned {
            Ok(w) => Some(w),
            Err(e) => {
                // `send` finds the job channel closed and tries again at the next fetch.
                log::warn!("cannot start a fetch thread: {e}");
                None
            }
        };
        FetchThread {
            jobs,
            thread,
            busy: None,
            retry_at: None,
        }
    }

    /// Stops every thread (a fetch the broker holds is cut short) and waits until `deadline`
    /// for them to exit. Answers still to come are dropped.
    pub fn stop(&mut self, deadline: Instant) {
        let mut threads = Vec::new();
        for (_, w) in self.workers.drain() {
            // A closed job channel ends the thread's wait for its next job; the stop cuts its
            // fetch in flight short.
            drop(w.jobs);
            if let Some(t) = w.thread {
                t.stop().request();
                threads.push(t);
            }
        }
        for mut t in threads {
            t.shutdown(crate::deadline::left(deadline));
        }
        while self.done_rx.try_recv().is_ok() {}
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        // Told to stop, the threads exit on their own; a drop does not wait for them.
        self.stop(Instant::now());
    }
}

/// A fetch thread: runs jobs until its job channel closes or it is stopped.
fn run(
    client: &Client,
    jobs: &Receiver<Job>,
    done: &Sender<Done>,
    stop: &Stop,
    isolation: IsolationLevel,
    limits: &DecodeLimits,
) {
    let mut fetcher = Fetcher::default();
    // The session lives as long as the thread, i.e. with the leader it fetches from.
    let mut session = FetchSession::default();
    while let Ok(job) = jobs.recv() {
        if stop.requested() {
            return;
        }
        let Job {
            broker,
            targets,
            settings,
            reserved,
        } = job;
        let plain: Vec<FetchTarget> = targets.iter().map(|(t, _)| t.clone()).collect();
        let deadline = crate::deadline::after(client.connection_config().request_timeout);
        let answer = fetcher.fetch(client, &broker, &mut session, &plain, &settings, deadline, stop);
        if stop.requested() {
            return;
        }
        let outcome = match answer {
            Ok((version, resp)) => {
                let retry_now = session.answered(resp.error_code, resp.session_id);
                fetcher::read_fetch_response(version, resp, &plain, isolation, limits).map_err(|code| {
                    if retry_now {
                        log::debug!(
                            "fetch session {} with broker {}: {code}; starting over",
                            session.id(),
                            broker.id
                        );
                        FetchFailure::Session(code)
                    } else {
                        FetchFailure::Code(code)
                    }
                })
            }
            Err(e) => {
                fetcher.disconnect(broker.id);
                // What the broker applied of the request is unknown.
                session.failed();
                Err(FetchFailure::Request(e))
            }
        };
        let sent = done.send(Done {
            leader: broker.id,
            targets,
            reserved,
            outcome,
        });
        if sent.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::client::Client;
    use crate::group::TopicPartition;
    use crate::net::script::{Answer, Script};
    use crate::protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
    use crate::protocol::messages::{FetchRequest, FetchResponse};
    use crate::KafkaCode;
    use bytes::{Bytes, BytesMut};
    use kafka_protocol::records::{
        Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    };
    use std::collections::{BTreeMap, HashMap};
    use std::time::{Duration, Instant};

    /// Records in each partition of the scripted topic `t`.
    const LOG_END: i64 = 10;

    /// Up to 3 records of partition `p` from `from`, valued `p-offset`.
    fn records(p: i32, from: i64) -> Bytes {
        let recs: Vec<Record> = (from..(from + 3).min(LOG_END))
            .map(|offset| Record {
                transactional: false,
                control: false,
                partition_leader_epoch: 0,
                producer_id: -1,
                producer_epoch: -1,
                timestamp_type: TimestampType::Creation,
                offset,
                sequence: -1,
                timestamp: 1,
                key: None,
                value: Some(Bytes::from(format!("{p}-{offset}"))),
                delete_horizon: false,
                headers: Default::default(),
            })
            .collect();
        let mut buf = BytesMut::new();
        if !recs.is_empty() {
            let opts = RecordEncodeOptions {
                version: 2,
                compression: Compression::None,
            };
            RecordBatchEncoder::encode(&mut buf, &recs, &opts).unwrap();
        }
        buf.freeze()
    }

    /// A broker's sessions, as Kafka keeps them: per session the expected epoch and, per
    /// partition, the offset last sent (an answer does not move it). Fetch number `errors[n]`
    /// (from 1) is answered with that error instead.
    #[derive(Default)]
    struct Sessions {
        next_id: i32,
        sessions: HashMap<i32, (i32, BTreeMap<i32, i64>)>,
        fetches: usize,
    }

    impl Sessions {
        fn answer(&mut self, req: &FetchRequest, errors: &HashMap<usize, KafkaCode>) -> FetchResponse {
            self.fetches += 1;
            let refuse = |code: KafkaCode| FetchResponse {
                error_code: code.code(),
                ..Default::default()
            };
            if let Some(&code) = errors.get(&self.fetches) {
                return refuse(code);
            }
            let asked = req
                .topics
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| (p.partition, p.fetch_offset)));
            let full = req.session_epoch == 0;
            let id = if full {
                self.sessions.remove(&req.session_id);
                self.next_id += 1;
                self.sessions.insert(self.next_id, (1, asked.collect()));
                self.next_id
            } else {
                let Some((epoch, held)) = self.sessions.get_mut(&req.session_id) else {
                    return refuse(KafkaCode::FetchSessionIdNotFound);
                };
                if *epoch != req.session_epoch {
                    return refuse(KafkaCode::InvalidFetchSessionEpoch);
                }
                *epoch += 1;
                held.extend(asked);
                for f in &req.forgotten_topics_data {
                    for p in f.partitions.as_slice() {
                        held.remove(p);
                    }
                }
                req.session_id
            };
            let held = &self.sessions[&id].1;
            let partitions = held
                .iter()
                .filter(|(_, &offset)| full || offset < LOG_END)
                .map(|(&p, &offset)| PartitionData {
                    partition_index: p,
                    high_watermark: LOG_END,
                    records: Some(records(p, offset)),
                    ..Default::default()
                })
                .collect();
            FetchResponse {
                session_id: id,
                responses: vec![FetchableTopicResponse {
                    topic: "t".into(),
                    // The scripted metadata gives topics ids, so the consumer fetches by id
                    // (Fetch v13+) and reads answers by id.
                    topic_id: crate::net::script::topic_id("t"),
                    partitions,
                    ..Default::default()
                }],
                ..Default::default()
            }
        }
    }

    #[test]
    fn refused_sessions_restart_with_a_full_fetch_and_lose_or_repeat_nothing() {
        let script = Script::new();
        script.cluster(&[(0, "b0", 9092)]).topic("t", 3);
        let errors: HashMap<usize, KafkaCode> = [
            (3, KafkaCode::FetchSessionIdNotFound),
            (6, KafkaCode::InvalidFetchSessionEpoch),
        ]
        .into();
        let mut broker = Sessions::default();
        script.on::<FetchRequest>(move |req, _| Answer::Reply(broker.answer(req, &errors)));
        let client = script
            .client(
                Client::builder()
                    .bootstrap_servers("b0:9092")
                    .retry_backoff(Duration::from_secs(5)),
            )
            .unwrap();
        let tps: Vec<TopicPartition> = (0..3).map(|p| TopicPartition::new("t", p)).collect();
        let mut consumer = client
            .consumer_without_group()
            .assign(tps.clone())
            .build()
            .unwrap();
        for tp in &tps {
            consumer.seek(tp, 0).unwrap();
        }
        let mut got: Vec<(i32, i64, String)> = Vec::new();
        // A session error backs off retry.backoff.ms (5 s) if it is taken for a plain error.
        let deadline = Instant::now() + Duration::from_secs(4);
        while got.len() < 3 * LOG_END as usize && Instant::now() < deadline {
            for r in consumer.poll(Duration::from_millis(100)).unwrap().records {
                let value = String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned();
                got.push((r.partition, r.offset, value));
            }
        }
        // Nothing more comes.
        for _ in 0..3 {
            assert!(consumer
                .poll(Duration::from_millis(50))
                .unwrap()
                .records
                .is_empty());
        }
        let mut want = Vec::new();
        for p in 0..3 {
            for o in 0..LOG_END {
                want.push((p, o, format!("{p}-{o}")));
            }
        }
        let mut sorted = got.clone();
        sorted.sort();
        assert_eq!(sorted, want, "every record once: {got:?}");
        let sent: Vec<(i32, i32, usize)> = script
            .requests::<FetchRequest>()
            .iter()
            .map(|r| {
                let n = r.topics.iter().map(|t| t.partitions.len()).sum();
                (r.session_id, r.session_epoch, n)
            })
            .collect();
        assert!(sent.len() >= 8, "{sent:?}");
        assert_eq!(sent[0], (0, 0, 3), "first: full INITIAL");
        assert_eq!((sent[1].0, sent[1].1), (1, 1), "{sent:?}");
        assert_eq!((sent[2].0, sent[2].1), (1, 2), "{sent:?}");
        assert_eq!(
            sent[3],
            (0, 0, 3),
            "after FETCH_SESSION_ID_NOT_FOUND: INITIAL: {sent:?}"
        );
        assert_eq!((sent[4].0, sent[4].1), (2, 1), "{sent:?}");
        assert_eq!((sent[5].0, sent[5].1), (2, 2), "{sent:?}");
        assert_eq!(
            sent[6],
            (2, 0, 3),
            "after INVALID_FETCH_SESSION_EPOCH: close and recreate: {sent:?}"
        );
        assert_eq!((sent[7].0, sent[7].1), (3, 1), "{sent:?}");
        consumer.close().unwrap();
    }
}
