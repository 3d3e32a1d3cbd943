//! `join`: runs one static member (a `Consumer`) in the foreground, printing its assignments and
//! records — to watch how a group rebalances, or to stand in for a member during an incident.

use crate::output::Json;
use crate::{Ctx, Failure};
use kafka_group::unstable::{classify, GroupAction};
use kafka_group::{ConsumerRecord, Error, OffsetReset};
use kafka_group::{GroupEvent, TopicPartition};
use std::collections::BTreeMap;
use std::io::{IsTerminal, Read};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Run one static group member and print its assignments and records.
///
/// Prints an `Assigned` / `Revoked` line for each rebalance and one line per record
/// (`TOPIC-PARTITION<TAB>OFFSET<TAB>KEY<TAB>VALUE`, `null` for a missing key or value),
/// committing after each poll. Runs until the --max-records / --duration limit, Ctrl-C (or
/// another signal), or, when standard input is a terminal, Ctrl-D there. Standard input that
/// is not a terminal (closed, /dev/null, a pipe, as under cron, nohup or a process runner) is
/// not read: it ending does not stop the command. Once the limit is reached, the final commit
/// and close each take at most --timeout. Ctrl-C ends the process at once: what was printed is
/// already committed, and like any static member it keeps its partitions until its session
/// times out.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The group (group.id).
    group: String,
    /// The member's group.instance.id.
    #[arg(long = "instance-id", value_name = "ID")]
    instance_id: String,
    /// A topic to subscribe to; repeat for several.
    #[arg(long = "topic", value_name = "TOPIC", required = true)]
    topics: Vec<String>,
    /// session.timeout.ms (default: 45000, the consumer's).
    #[arg(long, value_name = "MS")]
    session_timeout: Option<u64>,
    /// Start partitions without a committed offset at the beginning of the log instead of
    /// the end (auto.offset.reset=earliest).
    #[arg(long)]
    from_beginning: bool,
    /// Stop after printing this many records.
    #[arg(long, value_name = "N")]
    max_records: Option<u64>,
    /// Stop after this many seconds.
    #[arg(long, value_name = "SECS")]
    duration: Option<u64>,
}

/// How long one poll may block, so that the stop conditions are checked often.
const POLL: Duration = Duration::from_millis(500);

pub fn run(ctx: &Ctx, args: Args) -> Result<(), Failure> {
    let mut builder = ctx
        .client
        .consumer(&args.group)
        .subscribe(args.topics.iter().cloned())
        .group_instance_id(&args.instance_id)
        .enable_auto_commit(false)
        // --duration bounds the command: the close after it waits --timeout at most.
        .close_timeout(ctx.timeout);
    if let Some(ms) = args.session_timeout {
        builder = builder.session_timeout(Duration::from_millis(ms));
    }
    if args.from_beginning {
        builder = builder.auto_offset_reset(OffsetReset::Earliest);
    }
    let mut consumer = builder.build()?;
    let input_closed = watch_terminal();
    let deadline = args.duration.map(|s| {
        Instant::now()
            .checked_add(Duration::from_secs(s))
            .unwrap_or_else(|| Instant::now() + Duration::from_secs(u32::MAX as u64))
    });
    let mut printed: u64 = 0;
    let started = Instant::now();
    // A member that retries its join forever returns empty polls: without this, a command
    // that never reached a broker would end as a success.
    let mut joined = false;
    loop {
        if input_closed.load(Ordering::SeqCst) {
            log::info!("end of input on the terminal; stopping");
            break;
        }
        let wait = match deadline {
            Some(d) => match d.checked_duration_since(Instant::now()) {
                Some(left) if !left.is_zero() => left.min(POLL),
                _ => break,
            },
            None => POLL,
        };
        let polled = consumer.poll(wait)?;
        joined = joined
            || polled
                .events
                .iter()
                .any(|e| matches!(e, GroupEvent::Assigned { .. }))
            || consumer.member().is_some_and(|m| m.generation().is_some());
        for event in &polled.events {
            print_event(ctx.json, event);
        }
        let room = args.max_records.map_or(usize::MAX, |max| {
            usize::try_from(max - printed).unwrap_or(usize::MAX)
        });
        let shown = &polled.records[..polled.records.len().min(room)];
        for record in shown {
            print_record(ctx.json, record);
        }
        printed += shown.len() as u64;
        // Commit exactly what was printed: all of the poll unless --max-records cut it short.
        let committed = if shown.len() < polled.records.len() {
            let next: BTreeMap<TopicPartition, i64> = shown
                .iter()
                .map(|r| (r.topic_partition(), r.offset + 1))
                .collect();
            consumer.commit_offsets(&next)
        } else {
            consumer.commit()
        };
        if let Err(e) = committed {
            if !generation_ended(&e) {
                return Err(e.into());
            }
            // The next poll rejoins; the uncommitted records come again.
            log::warn!("commit refused ({e}); rejoining");
        }
        if args.max_records.is_some_and(|max| printed >= max) {
            break;
        }
    }
    if !joined {
        let cause = consumer
            .member()
            .and_then(|m| m.last_join_error())
            .map_or_else(|| "no answer from its coordinator".to_string(), |e| e.to_string());
        // Nothing to commit and no partitions to hand back: the close is only for tidiness.
        if let Err(e) = consumer.close() {
            log::debug!("close after a join that never succeeded: {e}");
        }
        return Err(Failure::new(
            crate::NEVER_JOINED,
            format!(
                "never joined group {} in {:.1?}: {cause}",
                args.group,
                started.elapsed()
            ),
        ));
    }
    consumer.close()?;
    Ok(())
}

/// A commit refused because the member's generation is over (the group would have it rejoin),
/// which the next poll repairs.
fn generation_ended(e: &Error) -> bool {
    e.kafka_code().is_some_and(|code| {
        matches!(
            classify(code),
            GroupAction::Rejoin | GroupAction::RejoinWithResetMemberId
        )
    })
}

/// A flag set when standard input, if it is a terminal, reaches its end (Ctrl-D) or fails,
/// read on a background thread because the standard library has no non-blocking read. Input
/// that is not a terminal never sets it: under cron or nohup it is closed from the start, and
/// treating that as "the user closed input" would end such a run after one poll.
fn watch_terminal() -> Arc<AtomicBool> {
    let closed = Arc::new(AtomicBool::new(false));
    if !std::io::stdin().is_terminal() {
        return closed;
    }
    let flag = closed.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 1024];
        let mut stdin = std::io::stdin();
        while matches!(stdin.read(&mut buf), Ok(n) if n > 0) {}
        flag.store(true, Ordering::SeqCst);
    });
    closed
}

fn partitions_text(partitions: &[TopicPartition]) -> String {
    if partitions.is_empty() {
        return "(none)".into();
    }
    let names: Vec<String> = partitions.iter().map(TopicPartition::to_string).collect();
    names.join(",")
}

fn print_event(json: bool, event: &GroupEvent) {
    let (name, generation, partitions) = match event {
        GroupEvent::Assigned {
            generation,
            partitions,
            ..
        } => ("Assigned", *generation, partitions),
        GroupEvent::Revoked {
            generation,
            partitions,
        } => ("Revoked", *generation, partitions),
        GroupEvent::Lost {
            generation,
            partitions,
        } => ("Lost", *generation, partitions),
        GroupEvent::CoordinatorMoved { coordinator } => {
            log::info!(
                "coordinator moved to broker {} ({})",
                coordinator.id,
                coordinator.addr()
            );
            return;
        }
        other => {
            log::debug!("{other:?}");
            return;
        }
    };
    if json {
        let doc = Json::Obj(vec![
            ("event", Json::str(name)),
            ("generation", Json::Int(generation.into())),
            (
                "partitions",
                Json::Arr(partitions.iter().map(Json::topic_partition).collect()),
            ),
        ]);
        outln!("{doc}");
    } else {
        outln!(
            "{name} generation={generation} partitions={}",
            partitions_text(partitions)
        );
    }
}

fn text(b: Option<&impl AsRef<[u8]>>) -> Option<String> {
    b.map(|b| String::from_utf8_lossy(b.as_ref()).into_owned())
}

fn print_record(json: bool, r: &ConsumerRecord) {
    let (key, value) = (text(r.key.as_ref()), text(r.value.as_ref()));
    if json {
        let doc = Json::Obj(vec![
            ("event", Json::str("Record")),
            ("topic", Json::str(&*r.topic)),
            ("partition", Json::Int(r.partition.into())),
            ("offset", Json::Int(r.offset)),
            ("key", Json::opt_str(key)),
            ("value", Json::opt_str(value)),
        ]);
        outln!("{doc}");
    } else {
        outln!(
            "{}-{}\t{}\t{}\t{}",
            r.topic,
            r.partition,
            r.offset,
            key.as_deref().unwrap_or("null"),
            value.as_deref().unwrap_or("null")
        );
    }
}
