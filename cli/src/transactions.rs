//! `transactions`: list and describe transactions (KIP-664) and find hanging ones, as Kafka's
//! `kafka-transactions.sh` does.

use crate::output::{Json, Table};
use crate::{Ctx, Failure, NOT_FOUND, USAGE};
use kafka_group::{
    HangingSearch, HangingTransaction, KafkaCode, TopicPartition, TransactionDescription, TransactionFilter,
    TransactionListing, TransactionState, DEFAULT_MAX_TRANSACTION_TIMEOUT,
};
use std::time::Duration;

/// List, describe and find hanging transactions (Kafka 3.0+).
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    List(ListArgs),
    Describe(DescribeArgs),
    FindHanging(FindHangingArgs),
}

/// List the transactional ids of every broker, with producer id, state and coordinator.
#[derive(Debug, clap::Args)]
struct ListArgs {
    /// Only transactions in this state (repeatable): Empty, Ongoing, PrepareCommit,
    /// PrepareAbort, CompleteCommit, CompleteAbort, Dead, PrepareEpochFence.
    #[arg(long = "state", value_name = "STATE", value_parser = parse_state)]
    states: Vec<TransactionState>,
    /// Only transactions of this producer id (repeatable).
    #[arg(long = "producer-id", value_name = "ID")]
    producer_ids: Vec<i64>,
    /// Only transactions open longer than this many milliseconds (Kafka 3.8+).
    #[arg(long, value_name = "MS")]
    open_longer_than: Option<u64>,
}

/// Describe transactional ids at their coordinators: state, producer id and epoch, timeout,
/// start time and the partitions in the transaction. Exits 3 if a coordinator does not know
/// one of the ids (the others are still shown).
#[derive(Debug, clap::Args)]
struct DescribeArgs {
    /// The transactional ids (transactional.id).
    #[arg(required = true, value_name = "ID")]
    ids: Vec<String>,
}

/// Find hanging transactions, as kafka-transactions.sh find-hanging: a partition holds a
/// producer's transaction open longer than the maximum transaction timeout, and the
/// producer's coordinator does not know the producer or does not count the partition in its
/// transaction. Exits 0 whether or not any is found.
#[derive(Debug, clap::Args)]
#[command(group = clap::ArgGroup::new("scope").required(true).args(["broker", "topic"]))]
struct FindHangingArgs {
    /// Search every partition with a replica on this broker, asking that broker.
    #[arg(long, value_name = "ID")]
    broker: Option<i32>,
    /// Search this topic's partitions, asking each leader.
    #[arg(long, value_name = "TOPIC")]
    topic: Option<String>,
    /// Only this partition of --topic.
    #[arg(long, value_name = "N")]
    partition: Option<i32>,
    /// No live transaction runs longer than this (the brokers' transaction.max.timeout.ms),
    /// in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = DEFAULT_MAX_TRANSACTION_TIMEOUT.as_millis() as u64)]
    max_transaction_timeout: u64,
}

fn parse_state(s: &str) -> Result<TransactionState, String> {
    match TransactionState::from_name(s) {
        TransactionState::Unknown(_) => Err(format!(
            "unknown state `{s}`; one of {}",
            TransactionState::KNOWN.map(|s| s.name().to_string()).join(", ")
        )),
        state => Ok(state),
    }
}

pub fn run(ctx: &Ctx, args: Args) -> Result<(), Failure> {
    let admin = ctx.client.admin().api_timeout(ctx.timeout);
    match args.command {
        Command::List(a) => {
            let filter = TransactionFilter {
                states: a.states,
                producer_ids: a.producer_ids,
                open_longer_than: a.open_longer_than.map(Duration::from_millis),
            };
            let listed = admin.list_transactions(&filter)?;
            if ctx.json {
                outln!("{}", Json::Arr(listed.iter().map(listing_json).collect()));
            } else {
                let mut t = Table::new(&["TRANSACTIONAL-ID", "PRODUCER-ID", "STATE", "COORDINATOR"]);
                for l in &listed {
                    t.row(vec![
                        l.transactional_id.clone(),
                        l.producer_id.to_string(),
                        l.state.to_string(),
                        l.coordinator.to_string(),
                    ]);
                }
                out!("{t}");
            }
            Ok(())
        }
        Command::Describe(a) => {
            let ids: Vec<&str> = a.ids.iter().map(String::as_str).collect();
            let described = admin.describe_transactions(&ids)?;
            let mut failure: Option<Failure> = None;
            let mut json = Vec::new();
            let mut table = Table::new(&[
                "TRANSACTIONAL-ID",
                "COORDINATOR",
                "STATE",
                "PRODUCER-ID",
                "EPOCH",
                "TIMEOUT-MS",
                "START-TIME-MS",
                "PARTITIONS",
            ]);
            for (id, outcome) in described {
                match outcome {
                    Ok(d) => {
                        json.push(description_json(&d));
                        table.row(description_row(&d));
                    }
                    Err(e) => {
                        let not_found = e.kafka_code() == Some(KafkaCode::TransactionalIdNotFound);
                        json.push(Json::Obj(vec![
                            ("transactional_id", Json::str(&id)),
                            ("error", Json::str(e.to_string())),
                        ]));
                        let f = Failure::from(e);
                        let code = if not_found { NOT_FOUND } else { f.code };
                        // The worst outcome decides the exit code: a broker error over a miss.
                        if failure.as_ref().map_or(true, |old| old.code == NOT_FOUND) {
                            failure = Some(Failure::new(code, f.message));
                        }
                    }
                }
            }
            if ctx.json {
                outln!("{}", Json::Arr(json));
            } else {
                out!("{table}");
            }
            failure.map_or(Ok(()), Err)
        }
        Command::FindHanging(a) => {
            let search = match (a.broker, a.topic, a.partition) {
                (_, Some(topic), Some(p)) => HangingSearch::Partition(TopicPartition::new(topic, p)),
                (_, Some(topic), None) => HangingSearch::Topic(topic),
                (_, None, Some(_)) => return Err(Failure::new(USAGE, "--partition needs --topic")),
                (Some(b), None, None) => HangingSearch::Broker(b),
                (None, None, _) => return Err(Failure::new(USAGE, "give --broker or --topic")),
            };
            let max = Duration::from_millis(a.max_transaction_timeout);
            let hanging = admin.find_hanging_transactions(&search, max)?;
            if ctx.json {
                outln!("{}", Json::Arr(hanging.iter().map(hanging_json).collect()));
            } else {
                print_hanging(&hanging);
            }
            Ok(())
        }
    }
}

fn listing_json(l: &TransactionListing) -> Json {
    Json::Obj(vec![
        ("transactional_id", Json::str(&l.transactional_id)),
        ("producer_id", Json::Int(l.producer_id)),
        ("state", Json::str(l.state.name())),
        ("coordinator", Json::Int(l.coordinator.into())),
    ])
}

fn partitions_cell(ps: &[TopicPartition]) -> String {
    if ps.is_empty() {
        "-".into()
    } else {
        ps.iter()
            .map(TopicPartition::to_string)
            .collect::<Vec<_>>()
            .join(",")
    }
}

fn description_row(d: &TransactionDescription) -> Vec<String> {
    vec![
        d.transactional_id.clone(),
        d.coordinator.to_string(),
        d.state.to_string(),
        d.producer_id.to_string(),
        d.producer_epoch.to_string(),
        d.transaction_timeout.as_millis().to_string(),
        d.start_time_ms.map_or_else(|| "-".into(), |t| t.to_string()),
        partitions_cell(&d.partitions),
    ]
}

fn description_json(d: &TransactionDescription) -> Json {
    Json::Obj(vec![
        ("transactional_id", Json::str(&d.transactional_id)),
        ("error", Json::Null),
        ("coordinator", Json::Int(d.coordinator.into())),
        ("state", Json::str(d.state.name())),
        ("producer_id", Json::Int(d.producer_id)),
        ("producer_epoch", Json::Int(d.producer_epoch.into())),
        (
            "transaction_timeout_ms",
            Json::Int(i64::try_from(d.transaction_timeout.as_millis()).unwrap_or(i64::MAX)),
        ),
        ("start_time_ms", Json::opt_int(d.start_time_ms)),
        (
            "partitions",
            Json::Arr(d.partitions.iter().map(Json::topic_partition).collect()),
        ),
    ])
}

fn hanging_json(h: &HangingTransaction) -> Json {
    let p = &h.producer;
    Json::Obj(vec![
        ("topic", Json::str(&h.partition.topic)),
        ("partition", Json::Int(h.partition.partition.into())),
        ("producer_id", Json::Int(p.producer_id)),
        ("producer_epoch", Json::Int(p.producer_epoch.into())),
        ("coordinator_epoch", Json::Int(p.coordinator_epoch.into())),
        ("start_offset", Json::opt_int(p.current_transaction_start_offset)),
        ("last_timestamp_ms", Json::Int(p.last_timestamp)),
        ("transactional_id", Json::opt_str(h.transactional_id.clone())),
    ])
}

fn print_hanging(hanging: &[HangingTransaction]) {
    let mut t = Table::new(&[
        "TOPIC",
        "PARTITION",
        "PRODUCER-ID",
        "EPOCH",
        "COORDINATOR-EPOCH",
        "START-OFFSET",
        "LAST-TIMESTAMP-MS",
        "TRANSACTIONAL-ID",
    ]);
    for h in hanging {
        let p = &h.producer;
        t.row(vec![
            h.partition.topic.clone(),
            h.partition.partition.to_string(),
            p.producer_id.to_string(),
            p.producer_epoch.to_string(),
            p.coordinator_epoch.to_string(),
            p.current_transaction_start_offset
                .map_or_else(|| "-".into(), |o| o.to_string()),
            p.last_timestamp.to_string(),
            h.transactional_id.clone().unwrap_or_else(|| "-".into()),
        ]);
    }
    out!("{t}");
}
