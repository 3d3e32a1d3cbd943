//! The threaded server's members, against any broker: `main.rs` runs the server until its
//! standard input ends, and the integration test (tests/it/examples_tests.rs, which includes
//! this file) starts it, stops it and starts it again within the session timeout.
//!
//! `members` static members (`group.instance.id` `<prefix>-0`, `<prefix>-1`, …) each run on a
//! thread of their own: poll, process, commit. Shutdown is graceful: [`Server::stop`] wakes
//! every member's blocked poll ([`WakeupHandle`]), each commits and closes. A static member that
//! closes does not leave the group, so a restart within `session.timeout.ms` gets every member
//! its partitions back with no rebalance of the group.

use kafka_group::{Client, Consumer, Error, GroupEvent, OffsetReset, TopicPartition, WakeupHandle};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Any error the server reports.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What the server runs with.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `host:port` list to bootstrap from.
    pub bootstrap: String,
    /// `group.id`.
    pub group: String,
    /// The topic the members share.
    pub topic: String,
    /// How many members (threads).
    pub members: usize,
    /// `group.instance.id` prefix.
    pub prefix: String,
    /// `session.timeout.ms`: how long a stopped server may stay away without a rebalance.
    pub session_timeout: Duration,
}

/// What one member saw, for the operator (and the test).
#[derive(Debug, Clone, Default)]
pub struct MemberView {
    /// `group.instance.id`.
    pub instance_id: String,
    /// Generation and partitions of its latest assignment.
    pub assigned: Option<(i32, Vec<TopicPartition>)>,
    /// Whether that assignment came from a rebalance (`None`: not known, a first join).
    pub rebalanced: Option<bool>,
    /// Revocations seen.
    pub revocations: usize,
    /// Records processed.
    pub records: usize,
    /// The error that stopped it, if one did.
    pub failed: Option<String>,
}

/// A running server.
pub struct Server {
    wakeups: Vec<WakeupHandle>,
    threads: Vec<JoinHandle<()>>,
    views: Vec<Arc<Mutex<MemberView>>>,
    processed: Arc<AtomicUsize>,
}

impl Server {
    /// Starts every member's thread; returns at once.
    pub fn start(s: &Settings) -> Result<Server, BoxError> {
        let client = Client::builder().bootstrap_servers(&s.bootstrap).build()?;
        let processed = Arc::new(AtomicUsize::new(0));
        let mut server = Server {
            wakeups: Vec::new(),
            threads: Vec::new(),
            views: Vec::new(),
            processed: processed.clone(),
        };
        for i in 0..s.members {
            let instance_id = format!("{}-{i}", s.prefix);
            let consumer = client
                .consumer(&s.group)
                .group_instance_id(&instance_id)
                .subscribe([s.topic.as_str()])
                .session_timeout(s.session_timeout)
                .heartbeat_interval(s.session_timeout / 10)
                .auto_offset_reset(OffsetReset::Earliest)
                .enable_auto_commit(false)
                .build()?;
            server.wakeups.push(consumer.wakeup_handle());
            let view = Arc::new(Mutex::new(MemberView {
                instance_id,
                ..MemberView::default()
            }));
            server.views.push(view.clone());
            let processed = processed.clone();
            server
                .threads
                .push(std::thread::spawn(move || serve(consumer, &view, &processed)));
        }
        Ok(server)
    }

    /// What every member saw so far.
    pub fn views(&self) -> Vec<MemberView> {
        self.views.iter().map(|v| v.lock().unwrap().clone()).collect()
    }

    /// Records processed by all members.
    pub fn processed(&self) -> usize {
        self.processed.load(Ordering::Relaxed)
    }

    /// Waits until every member has an assignment and no member changed its generation for
    /// `settle`, or `timeout` passes; true if it settled.
    pub fn wait_settled(&self, settle: Duration, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut last = (Vec::new(), Instant::now());
        while Instant::now() < deadline {
            let now: Vec<Option<i32>> = self
                .views()
                .iter()
                .map(|v| v.assigned.as_ref().map(|a| a.0))
                .collect();
            if now != last.0 {
                last = (now, Instant::now());
            } else if last.0.iter().all(Option::is_some) && last.1.elapsed() >= settle {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }

    /// Graceful shutdown: wakes every member, which commits and closes; returns what each saw.
    pub fn stop(self) -> Vec<MemberView> {
        for w in &self.wakeups {
            w.wakeup();
        }
        for t in self.threads {
            let _ = t.join();
        }
        self.views.iter().map(|v| v.lock().unwrap().clone()).collect()
    }
}

/// One member's loop: poll, process, commit, until woken.
fn serve(mut consumer: Consumer, view: &Mutex<MemberView>, processed: &AtomicUsize) {
    let outcome = loop {
        let polled = match consumer.poll(Duration::from_secs(1)) {
            Ok(p) => p,
            Err(Error::Wakeup) => break Ok(()),
            // The coordinator unreachable for default.api.timeout.ms: poll keeps trying.
            Err(e @ Error::Timeout { .. }) => {
                log::warn!("{e}");
                continue;
            }
            Err(e) => break Err(e),
        };
        for event in &polled.events {
            let mut v = view.lock().unwrap();
            match event {
                GroupEvent::Assigned {
                    generation,
                    partitions,
                    rebalanced,
                } => {
                    v.assigned = Some((*generation, partitions.clone()));
                    v.rebalanced = *rebalanced;
                }
                GroupEvent::Revoked { .. } | GroupEvent::Lost { .. } => v.revocations += 1,
                _ => {}
            }
        }
        if polled.revoked().is_some() {
            // Commit with the generation that still owns them, before the rejoin.
            if let Err(e) = consumer.commit() {
                log::warn!("commit before revocation failed: {e}");
            }
            continue;
        }
        // The application's work on each record goes here.
        view.lock().unwrap().records += polled.records.len();
        processed.fetch_add(polled.records.len(), Ordering::Relaxed);
        if !polled.is_empty() {
            if let Err(e) = consumer.commit() {
                log::warn!("commit failed: {e}; those records will be delivered again");
            }
        }
    };
    // `close` commits nothing itself here (auto-commit is off): everything processed is
    // committed above. A static member keeps its partitions until its session times out.
    let closed = consumer.commit().and_then(|()| consumer.close());
    if let Err(e) = outcome.and(closed) {
        view.lock().unwrap().failed = Some(e.to_string());
    }
}
