//! `remove-member`: removes static members by `group.instance.id` (KIP-345, Kafka 2.4+), so
//! their partitions are reassigned now instead of after their session times out. Removing
//! does not stop a process: one still running rejoins at its next heartbeat (with a new member
//! id, rebalancing the whole group), which `--wait` watches for.

use crate::output::{Json, Table};
use crate::{Ctx, Failure, BROKER, CAME_BACK, NOT_FOUND};
use kafka_group::KafkaCode;
use std::time::{Duration, Instant};

/// Remove static members from a group by group.instance.id (needs Kafka 2.4+).
///
/// Prints each id's outcome. Exits 3 if an id is not in the group, 2 for other per-member
/// errors, 4 if the broker is older than 2.4. Removing does not stop the member's process: if
/// it still runs, it rejoins at its next heartbeat with a new member id and the whole group
/// rebalances. Stop the process first; `--wait SECS` watches the group that long and exits 5
/// if a removed instance comes back.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The group (group.id).
    group: String,
    /// A group.instance.id to remove; repeat for several.
    #[arg(long = "instance-id", value_name = "ID", required = true, num_args = 1..)]
    instance_ids: Vec<String>,
    /// After removing, watch the group this many seconds for a removed instance rejoining
    /// (its process still runs); exit 5 if one does.
    #[arg(long, value_name = "SECS")]
    wait: Option<u64>,
}

/// How often `--wait` describes the group.
const WATCH_EVERY: Duration = Duration::from_millis(250);

/// The removed instances that are members of `group` again within `wait`, with their new
/// member ids: DescribeGroups every [`WATCH_EVERY`] until all came back or `wait` passed. A
/// failed describe (the group rebalancing, the coordinator moving) is tried again.
fn came_back(ctx: &Ctx, group: &str, removed: &[&str], wait: Duration) -> Vec<(String, String)> {
    let admin = ctx
        .client
        .admin()
        .api_timeout(ctx.timeout.min(wait.max(WATCH_EVERY)));
    let until = Instant::now() + wait;
    let mut back: Vec<(String, String)> = Vec::new();
    loop {
        match admin.describe_group(group) {
            Ok(d) => {
                for m in &d.members {
                    if let Some(id) = m.group_instance_id.as_deref() {
                        if removed.contains(&id) && !back.iter().any(|(b, _)| b == id) {
                            back.push((id.to_string(), m.member_id.clone()));
                        }
                    }
                }
            }
            Err(e) => log::debug!("describing group {group}: {e}"),
        }
        if back.len() == removed.len() || Instant::now() + WATCH_EVERY > until {
            return back;
        }
        std::thread::sleep(WATCH_EVERY);
    }
}

pub fn run(ctx: &Ctx, args: Args) -> Result<(), Failure> {
    let admin = ctx.client.admin().api_timeout(ctx.timeout);
    let ids: Vec<&str> = args.instance_ids.iter().map(String::as_str).collect();
    let outcomes = admin.remove_members(&args.group, &ids)?;
    let removed: Vec<&str> = outcomes
        .iter()
        .filter(|(_, r)| r.is_ok())
        .map(|(id, _)| id.as_str())
        .collect();
    let back = match args.wait {
        Some(secs) if !removed.is_empty() => came_back(ctx, &args.group, &removed, Duration::from_secs(secs)),
        _ => Vec::new(),
    };
    let back_as = |id: &str| back.iter().find(|(b, _)| b == id).map(|(_, m)| m.as_str());
    if ctx.json {
        let results = outcomes
            .iter()
            .map(|(id, r)| {
                Json::Obj(vec![
                    ("instance_id", Json::str(id)),
                    ("removed", Json::Bool(r.is_ok())),
                    ("error", Json::opt_str(r.err().map(|c| c.name()))),
                    ("came_back_as", Json::opt_str(back_as(id))),
                ])
            })
            .collect();
        let doc = Json::Obj(vec![
            ("group", Json::str(&args.group)),
            ("results", Json::Arr(results)),
        ]);
        outln!("{doc}");
    } else {
        let mut table = Table::new(&["INSTANCE-ID", "RESULT"]);
        for (id, r) in &outcomes {
            let outcome = match back_as(id) {
                Some(m) => format!("removed, came back as {m}"),
                None => describe_outcome(*r),
            };
            table.row(vec![id.clone(), outcome]);
        }
        out!("{table}");
    }
    if !back.is_empty() {
        let names: Vec<&str> = back.iter().map(|(id, _)| id.as_str()).collect();
        return Err(Failure::new(
            CAME_BACK,
            format!(
                "came back to group {} (their processes still run, and the group rebalanced; stop them first): {}",
                args.group,
                names.join(", ")
            ),
        ));
    }
    if args.wait.is_none() && !removed.is_empty() {
        eprintln!(
            "warning: removing does not stop a process: an instance that still runs ({}) rejoins at its \
             next heartbeat with a new member id, and the whole group rebalances; stop it first \
             (--wait SECS checks)",
            removed.join(", ")
        );
    }
    let failed: Vec<&(String, Result<(), KafkaCode>)> = outcomes.iter().filter(|(_, r)| r.is_err()).collect();
    if failed.is_empty() {
        return Ok(());
    }
    let all_unknown = failed.iter().all(|(_, r)| *r == Err(KafkaCode::UnknownMemberId));
    let names: Vec<&str> = failed.iter().map(|(id, _)| id.as_str()).collect();
    Err(if all_unknown {
        Failure::new(
            NOT_FOUND,
            format!("not in group {}: {}", args.group, names.join(", ")),
        )
    } else {
        Failure::new(
            BROKER,
            format!("could not remove from group {}: {}", args.group, names.join(", ")),
        )
    })
}

fn describe_outcome(r: Result<(), KafkaCode>) -> String {
    match r {
        Ok(()) => "removed".into(),
        Err(KafkaCode::UnknownMemberId) => "not found (UNKNOWN_MEMBER_ID)".into(),
        Err(code) => format!("failed ({})", code.name()),
    }
}
