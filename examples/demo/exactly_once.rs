//! The demo's exactly-once story (`--exactly-once`): three static members of the
//! examples/exactly_once pipeline, each in its own process, copy an input topic to an output
//! topic in transactions. One member is SIGKILLed and restarted within the session timeout:
//! its new incarnation fences the old producer, the transaction it left open is aborted, the
//! group does not rebalance, and a `read_committed` reader finds as many output records as
//! there were input records, none twice. How a member process is started is the caller's: the
//! demo starts itself, the integration test (tests/it/demo_tests.rs) its own binary.

use kafka_group::{Client, IsolationLevel, NewTopic, OffsetReset, ProducerRecord};
use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Any error the demo reports.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The arguments of one member process, as `exactly_once` members take them.
#[derive(Debug, Clone)]
pub struct MemberArgs {
    /// `bootstrap.servers`.
    pub bootstrap: String,
    /// Group and `transactional.id` prefix.
    pub app: String,
    /// `group.instance.id`.
    pub instance: String,
    /// Topic read.
    pub input: String,
    /// Topic written.
    pub output: String,
}

const RECORDS: usize = 3000;
const STEP: Duration = Duration::from_secs(60);

/// A member process and the lines it printed.
struct Member {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Member {
    fn start(command: &dyn Fn(&MemberArgs) -> Command, args: &MemberArgs) -> Result<Member, BoxError> {
        let mut child = command(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let lines = Arc::new(Mutex::new(Vec::new()));
        let (pipe, sink) = (child.stdout.take().unwrap(), lines.clone());
        std::thread::spawn(move || {
            for l in BufReader::new(pipe).lines().map_while(Result::ok) {
                sink.lock().unwrap().push(l);
            }
        });
        Ok(Member { child, lines })
    }

    /// The generations of the assignments it printed.
    fn generations(&self) -> Vec<i32> {
        self.lines
            .lock()
            .unwrap()
            .iter()
            .filter_map(|l| {
                let rest = l.split_once("Assigned { generation: ")?.1;
                rest.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
            })
            .collect()
    }

    fn count(&self, what: &str) -> usize {
        self.lines
            .lock()
            .unwrap()
            .iter()
            .filter(|l| l.contains(what))
            .count()
    }

    fn wait(&mut self, what: &str, cond: impl Fn(&Member) -> bool) -> Result<(), BoxError> {
        let deadline = Instant::now() + STEP;
        while !cond(self) {
            if let Some(status) = self.child.try_wait()? {
                return Err(format!("a member exited ({status}) while waiting: {what}").into());
            }
            if Instant::now() >= deadline {
                let lines = self.lines.lock().unwrap();
                let tail = &lines[lines.len().saturating_sub(10)..];
                return Err(format!("waited {STEP:?}: {what}; its last lines: {tail:?}").into());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(())
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        let _ = self.child.kill(); // SIGKILL
        let _ = self.child.wait();
    }
}

/// Runs the story; `command` builds the command line of a member process.
pub fn run(
    bootstrap: &str,
    command: &dyn Fn(&MemberArgs) -> Command,
    out: &mut dyn Write,
) -> Result<(), BoxError> {
    let stamp = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let app = format!("demo-eos-{}-{stamp}", std::process::id());
    let (input, output) = (format!("{app}-in"), format!("{app}-out"));
    let client = Client::builder()
        .bootstrap_servers(bootstrap)
        .client_id("demo-setup")
        .build()?;
    client
        .admin()
        .create_topics(&[NewTopic::new(&input, 6, 1), NewTopic::new(&output, 3, 1)], STEP)?;
    writeln!(
        out,
        "exactly-once: topics {input} (6 partitions) -> {output} (3 partitions)"
    )?;
    let args = |instance: &str| MemberArgs {
        bootstrap: bootstrap.into(),
        app: app.clone(),
        instance: instance.into(),
        input: input.clone(),
        output: output.clone(),
    };
    let mut members = Vec::new();
    for name in ["demo-a", "demo-b", "demo-c"] {
        members.push(Member::start(command, &args(name))?);
    }
    for m in &mut members {
        m.wait("a member's first assignment", |m| !m.generations().is_empty())?;
    }
    writeln!(
        out,
        "exactly-once: 3 members (processes) joined generation {}",
        members[0].generations()[0]
    )?;
    // Input arrives while the members run (a chunk every 200 ms), so that the kill lands
    // mid-stream.
    let writer = {
        let (client, input) = (client.clone(), input.clone());
        std::thread::spawn(move || -> Result<(), kafka_group::Error> {
            let mut producer = client.producer().build()?;
            for i in 0..RECORDS {
                producer.send(ProducerRecord::new(&input, format!("value-{i}")).partition(i as i32 % 6))?;
                if i % 100 == 99 {
                    producer.flush()?;
                    std::thread::sleep(Duration::from_millis(200));
                }
            }
            producer.close()
        })
    };
    std::thread::sleep(Duration::from_secs(2));
    // demo-b is killed right after it wrote a batch, before it commits it.
    let before = members[1].generations().last().copied().unwrap_or(-1);
    let opened = members[1].count("transaction open");
    members[1].wait("demo-b opening a transaction", |m| {
        m.count("transaction open") > opened
    })?;
    let t = Instant::now();
    drop(members.remove(1));
    let mut again = Member::start(command, &args("demo-b"))?;
    again.wait("demo-b's assignment after its restart", |m| {
        !m.generations().is_empty()
    })?;
    let now = again.generations()[0];
    writeln!(
        out,
        "exactly-once: demo-b SIGKILLed mid-transaction and restarted: back in {} ms, rebalanced: {} (generation {before} -> {now})",
        t.elapsed().as_millis(),
        if now == before { "no" } else { "yes" }
    )?;
    members.insert(1, again);
    writer.join().map_err(|_| "the input writer panicked")??;
    let committed = read(&client, &output, IsolationLevel::ReadCommitted, RECORDS)?;
    let distinct: BTreeSet<&String> = committed.iter().collect();
    let all = read(&client, &output, IsolationLevel::ReadUncommitted, RECORDS)?;
    drop(members);
    writeln!(
        out,
        "exactly-once: input {RECORDS}, output {} (read_committed), duplicates {}; aborted records in the log (read_uncommitted): {}",
        committed.len(),
        committed.len() - distinct.len(),
        all.len().saturating_sub(committed.len())
    )?;
    Ok(())
}

/// The output's values, read until `expect` came and a poll brings nothing more (or a minute).
fn read(
    client: &Client,
    topic: &str,
    isolation: IsolationLevel,
    expect: usize,
) -> Result<Vec<String>, BoxError> {
    let mut c = client
        .consumer(&format!("{topic}-reader-{isolation:?}"))
        .subscribe([topic])
        .auto_offset_reset(OffsetReset::Earliest)
        .isolation_level(isolation)
        .enable_auto_commit(false)
        .build()?;
    let (mut values, deadline) = (Vec::new(), Instant::now() + STEP);
    let mut quiet = false;
    while Instant::now() < deadline {
        let polled = c.poll(Duration::from_millis(1000))?;
        if polled.records.is_empty() && values.len() >= expect {
            if quiet {
                break;
            }
            quiet = true;
        }
        values.extend(
            polled
                .records
                .iter()
                .map(|r| String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned()),
        );
    }
    // Committed only so that closing does not warn about records read and not committed.
    c.commit()?;
    c.close()?;
    Ok(values)
}
