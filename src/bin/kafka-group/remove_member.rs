//! `remove-member`: removes static members by `group.instance.id` (KIP-345, Kafka 2.4+), so
//! their partitions are reassigned now instead of after their session times out.

use crate::output::{Json, Table};
use crate::{Ctx, Failure, BROKER, NOT_FOUND};
use kafka_group::KafkaCode;

/// Remove static members from a group by group.instance.id (needs Kafka 2.4+).
///
/// Prints each id's outcome. Exits 3 if an id is not in the group, 2 for other per-member
/// errors, 4 if the broker is older than 2.4.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The group (group.id).
    group: String,
    /// A group.instance.id to remove; repeat for several.
    #[arg(long = "instance-id", value_name = "ID", required = true, num_args = 1..)]
    instance_ids: Vec<String>,
}

pub fn run(ctx: &Ctx, args: Args) -> Result<(), Failure> {
    let admin = ctx.client.admin().api_timeout(ctx.timeout);
    let ids: Vec<&str> = args.instance_ids.iter().map(String::as_str).collect();
    let outcomes = admin.remove_members(&args.group, &ids)?;
    if ctx.json {
        let results = outcomes
            .iter()
            .map(|(id, r)| {
                Json::Obj(vec![
                    ("instance_id", Json::str(id)),
                    ("removed", Json::Bool(r.is_ok())),
                    ("error", Json::opt_str(r.err().map(|c| c.name()))),
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
            table.row(vec![id.clone(), describe_outcome(*r)]);
        }
        out!("{table}");
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
