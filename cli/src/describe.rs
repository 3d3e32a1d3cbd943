//! `describe`: a group's state, its members with their `group.instance.id`s and assignments,
//! and the committed offset and lag of each partition.

use crate::output::{Json, Table};
use crate::{Ctx, Failure, NOT_FOUND};
use kafka_group::{Assignment, GroupProtocol, TopicPartition};
use kafka_group::{GroupDescription, MemberDescription, PartitionLag};
use std::collections::BTreeMap;

/// Show a group's state, members, assignments, committed offsets and lag.
///
/// For each member: member id, group.instance.id, client id, host and assigned partitions;
/// for each partition: committed offset, log end offset and lag. The generation is not shown:
/// DescribeGroups does not return it. Exits 3 if the group's coordinator does not know the group
/// (or reports it dead).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The group (group.id).
    group: String,
}

pub fn run(ctx: &Ctx, args: Args) -> Result<(), Failure> {
    let admin = ctx.client.admin().api_timeout(ctx.timeout);
    let (group, lag) = admin.describe_group_lag(&args.group)?;
    if group.state == "Dead" {
        return Err(Failure::new(
            NOT_FOUND,
            format!(
                "group {} does not exist (its coordinator reports it dead or unknown)",
                args.group
            ),
        ));
    }
    if ctx.json {
        outln!("{}", to_json(&group, &lag));
    } else {
        print_text(&group, &lag);
    }
    Ok(())
}

/// A member's partitions, sorted.
fn partitions(m: &MemberDescription) -> Vec<TopicPartition> {
    m.decoded_assignment
        .iter()
        .flat_map(Assignment::topic_partitions)
        .collect()
}

fn owners(group: &GroupDescription) -> BTreeMap<TopicPartition, &MemberDescription> {
    group
        .members
        .iter()
        .flat_map(|m| partitions(m).into_iter().map(move |tp| (tp, m)))
        .collect()
}

/// What a coordinator that cannot report instance ids (DescribeGroups v3 and older, Kafka 2.3)
/// still lets us infer: Kafka names a static member `<group.instance.id>-<uuid>` and a dynamic
/// one `<client.id>-<uuid>`, so a prefix other than the client id is the instance id. A static
/// member whose instance id equals its client id cannot be told apart: `None`.
fn inferred_instance_id<'a>(member_id: &'a str, client_id: &str) -> Option<&'a str> {
    // A java.util.UUID in its 36-character text form, after a '-'.
    let cut = member_id.len().checked_sub(37)?;
    let (prefix, uuid) = (member_id.get(..cut)?, member_id.get(cut..)?);
    let is_uuid = uuid.len() == 37
        && uuid.char_indices().all(|(i, c)| match i {
            0 | 9 | 14 | 19 | 24 => c == '-',
            _ => c.is_ascii_hexdigit(),
        });
    (is_uuid && !prefix.is_empty() && prefix != client_id).then_some(prefix)
}

/// The INSTANCE-ID cell: the reported id, `-` for a dynamic member, or, where the coordinator
/// cannot say, the inferred id marked as such, else `?`.
fn instance_cell(group: &GroupDescription, m: &MemberDescription) -> String {
    match (&m.group_instance_id, group.instance_ids_reported) {
        (Some(id), _) => id.clone(),
        (None, true) => "-".into(),
        (None, false) => inferred_instance_id(&m.member_id, &m.client_id)
            .map_or_else(|| "?".into(), |id| format!("{id} (inferred)")),
    }
}

fn dash(s: Option<impl ToString>) -> String {
    s.map_or_else(|| "-".to_string(), |s| s.to_string())
}

fn print_text(group: &GroupDescription, lag: &[PartitionLag]) {
    let empty = |s: &str| dash(Some(s).filter(|s| !s.is_empty()));
    outln!("Group:          {}", group.group_id);
    outln!("State:          {}", group.state);
    outln!("Group protocol: {}", group.group_protocol);
    outln!("Protocol type:  {}", empty(&group.protocol_type));
    match group.group_protocol {
        GroupProtocol::Classic => {
            outln!("Protocol:       {}", empty(&group.protocol));
            outln!("Generation:     unknown (DescribeGroups does not return it)");
        }
        GroupProtocol::Consumer => {
            outln!("Assignor:       {} (the coordinator's)", empty(&group.protocol));
            outln!(
                "Epochs:         group {}, target assignment {}",
                dash(group.group_epoch),
                dash(group.assignment_epoch)
            );
        }
    }
    outln!("Members:        {}", group.members.len());
    if !group.instance_ids_reported && !group.members.is_empty() {
        outln!(
            "Note:           this coordinator answers DescribeGroups v3 or older (Kafka 2.3 or \
             older), which carries no group.instance.id: static and dynamic members look alike. \
             INSTANCE-ID shows what the member id implies (<instance id>-<uuid>), or ?"
        );
    }
    outln!();
    let consumer = group.group_protocol == GroupProtocol::Consumer;
    let list = |ps: Vec<TopicPartition>| {
        let ps: Vec<String> = ps.iter().map(TopicPartition::to_string).collect();
        if ps.is_empty() {
            "-".into()
        } else {
            ps.join(",")
        }
    };
    let mut heads = vec!["MEMBER-ID", "INSTANCE-ID", "CLIENT-ID", "HOST", "PARTITIONS"];
    if consumer {
        // KIP-848: each member's epoch, what the coordinator wants it to own, and whether it
        // still speaks the classic protocol (a group being migrated).
        heads.extend(["EPOCH", "TARGET", "PROTOCOL"]);
    }
    let mut members = Table::new(&heads);
    for m in &group.members {
        let mut row = vec![
            m.member_id.clone(),
            instance_cell(group, m),
            m.client_id.clone(),
            m.client_host.clone(),
            list(partitions(m)),
        ];
        if consumer {
            row.push(dash(m.member_epoch));
            row.push(list(
                m.target_assignment
                    .as_ref()
                    .map(|a| a.topic_partitions())
                    .unwrap_or_default(),
            ));
            row.push(dash(m.member_protocol));
        }
        members.row(row);
    }
    out!("{members}");
    outln!();
    let owners = owners(group);
    let mut offsets = Table::new(&[
        "TOPIC",
        "PARTITION",
        "CURRENT-OFFSET",
        "LOG-END-OFFSET",
        "LAG",
        "INSTANCE-ID",
        "MEMBER-ID",
    ]);
    for l in lag {
        let owner = owners.get(&l.tp);
        offsets.row(vec![
            l.tp.topic.clone(),
            l.tp.partition.to_string(),
            dash(l.committed),
            l.log_end.to_string(),
            dash(l.lag),
            owner.map_or_else(|| "-".into(), |m| instance_cell(group, m)),
            dash(owner.map(|m| &m.member_id)),
        ]);
    }
    out!("{offsets}");
}

fn to_json(group: &GroupDescription, lag: &[PartitionLag]) -> Json {
    let members = group
        .members
        .iter()
        .map(|m| {
            let assignment = partitions(m).iter().map(Json::topic_partition).collect();
            Json::Obj(vec![
                ("member_id", Json::str(&m.member_id)),
                ("group_instance_id", Json::opt_str(m.group_instance_id.clone())),
                (
                    "inferred_group_instance_id",
                    Json::opt_str(
                        (!group.instance_ids_reported && m.group_instance_id.is_none())
                            .then(|| inferred_instance_id(&m.member_id, &m.client_id))
                            .flatten()
                            .map(String::from),
                    ),
                ),
                ("client_id", Json::str(&m.client_id)),
                ("host", Json::str(&m.client_host)),
                ("assignment", Json::Arr(assignment)),
                ("member_epoch", Json::opt_int(m.member_epoch.map(i64::from))),
                (
                    "target_assignment",
                    m.target_assignment.as_ref().map_or(Json::Null, |a| {
                        Json::Arr(a.topic_partitions().iter().map(Json::topic_partition).collect())
                    }),
                ),
                (
                    "member_protocol",
                    Json::opt_str(m.member_protocol.map(|p| p.to_string())),
                ),
            ])
        })
        .collect();
    let owners = owners(group);
    let offsets = lag
        .iter()
        .map(|l| {
            let owner = owners.get(&l.tp);
            Json::Obj(vec![
                ("topic", Json::str(&l.tp.topic)),
                ("partition", Json::Int(l.tp.partition.into())),
                ("committed", Json::opt_int(l.committed)),
                ("log_end", Json::Int(l.log_end)),
                ("lag", Json::opt_int(l.lag)),
                ("member_id", Json::opt_str(owner.map(|m| m.member_id.clone()))),
                (
                    "group_instance_id",
                    Json::opt_str(owner.and_then(|m| m.group_instance_id.clone())),
                ),
            ])
        })
        .collect();
    Json::Obj(vec![
        ("group", Json::str(&group.group_id)),
        ("state", Json::str(&group.state)),
        ("group_protocol", Json::str(group.group_protocol.to_string())),
        ("protocol_type", Json::str(&group.protocol_type)),
        ("protocol", Json::str(&group.protocol)),
        ("group_epoch", Json::opt_int(group.group_epoch.map(i64::from))),
        (
            "assignment_epoch",
            Json::opt_int(group.assignment_epoch.map(i64::from)),
        ),
        // False on Kafka 2.3 and older: group_instance_id is then null for static members too.
        ("instance_ids_reported", Json::Bool(group.instance_ids_reported)),
        // DescribeGroups does not carry the generation; null says "not known", not "none"
        // (consumer-protocol groups have epochs instead).
        ("generation", Json::Null),
        ("members", Json::Arr(members)),
        ("offsets", Json::Arr(offsets)),
    ])
}

#[cfg(test)]
mod tests {
    use super::inferred_instance_id;

    #[test]
    fn instance_id_is_inferred_from_a_static_member_id() {
        let uuid = "3f2b6c1e-9a4d-4e0f-8b7a-1c2d3e4f5a6b";
        let static_id = format!("worker-1-{uuid}");
        assert_eq!(inferred_instance_id(&static_id, "app"), Some("worker-1"));
        // A dynamic member is named after its client id: nothing to infer.
        let dynamic_id = format!("app-{uuid}");
        assert_eq!(inferred_instance_id(&dynamic_id, "app"), None);
        for odd in [
            "",
            "x",
            "worker-1",
            &format!("worker-1-{}", &uuid[1..]),
            &format!("-{uuid}"),
        ] {
            assert_eq!(inferred_instance_id(odd, "app"), None, "{odd:?}");
        }
        assert_eq!(
            inferred_instance_id(&format!("w-{}", uuid.replace('a', "g")), "app"),
            None
        );
    }
}
