//! `broker-versions`: what each broker advertises, which version the client picks per API, and
//! which Kafka release the broker's table looks like — the first thing to check when a group
//! feature is refused by an old cluster.

use crate::output::{Json, Table};
use crate::{Ctx, Failure, BROKER};
use kafka_group::unstable::protocol::{ApiKey, VersionRange};
use kafka_group::unstable::releases::{self, ReleaseMatch};
use kafka_group::unstable::versions::{self, BrokerVersions};
use kafka_group::unstable::RawClient;
use kafka_group::Broker;

/// Show each broker's API versions and the Kafka release it matches.
///
/// For each broker in the cluster metadata and each API this client implements: the client's
/// version range, the broker's, and the version they agree on; then the Kafka release (from the
/// client's per-release table) the broker's versions match, or the closest one with what differs,
/// or that the broker is newer than every release known, or like none.
#[derive(Debug, clap::Args)]
pub struct Args {}

struct Row {
    api: ApiKey,
    ours: VersionRange,
    broker: Option<VersionRange>,
    chosen: Option<i16>,
}

pub fn run(ctx: &Ctx, _args: Args) -> Result<(), Failure> {
    let meta = ctx.client.refresh_metadata(Some(&[]))?;
    let config = ctx.client.connection_config();
    let mut docs = Vec::new();
    let mut failed = Vec::new();
    for (i, broker) in meta.brokers.values().enumerate() {
        let table = match ctx.client.broker_versions(broker.id) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("kafka-group: broker {} ({}): {e}", broker.id, broker.addr());
                failed.push(broker.id);
                continue;
            }
        };
        let rows: Vec<Row> = ApiKey::ALL
            .iter()
            .map(|&api| Row {
                api,
                ours: versions::ours(api, config.version_cap(api)),
                broker: table.get(&api.key()).copied(),
                chosen: config.pick_version(api, &table).ok(),
            })
            .collect();
        let release = releases::identify(&table);
        if ctx.json {
            docs.push(broker_json(broker, &table, &release, &rows));
        } else {
            if i > 0 {
                outln!();
            }
            print_broker(broker, &table, &release, &rows);
        }
    }
    if ctx.json {
        outln!("{}", Json::Obj(vec![("brokers", Json::Arr(docs))]));
    }
    if failed.is_empty() {
        Ok(())
    } else {
        let ids: Vec<String> = failed.iter().map(i32::to_string).collect();
        Err(Failure::new(
            BROKER,
            format!("no answer from broker(s) {}", ids.join(", ")),
        ))
    }
}

fn api_names(keys: &[i16]) -> Vec<String> {
    keys.iter()
        .map(|&k| ApiKey::from_key(k).map_or_else(|| format!("API key {k}"), |a| a.name().to_string()))
        .collect()
}

/// The release line: exact matches keep the wording scripts may already look for.
fn release_line(release: &ReleaseMatch) -> String {
    match release {
        ReleaseMatch::Exact(r) => format!("Newest matching release: Kafka {} ({})", r.version(), r.name),
        ReleaseMatch::Closest {
            release: r,
            differing,
        } => format!(
            "Closest release: Kafka {} ({}); no release matches exactly, differing: {}",
            r.version(),
            r.name,
            api_names(differing).join(", ")
        ),
        ReleaseMatch::Newer { than, beyond } => format!(
            "Release: newer than Kafka {} ({}), the newest this client knows (beyond it: {})",
            than.version(),
            than.name,
            api_names(beyond).join(", ")
        ),
        ReleaseMatch::Unknown => "Release: not an Apache Kafka release table".into(),
    }
}

fn match_kind(release: &ReleaseMatch) -> &'static str {
    match release {
        ReleaseMatch::Exact(_) => "exact",
        ReleaseMatch::Closest { .. } => "closest",
        ReleaseMatch::Newer { .. } => "newer",
        ReleaseMatch::Unknown => "unknown",
    }
}

fn print_broker(broker: &Broker, table: &BrokerVersions, release: &ReleaseMatch, rows: &[Row]) {
    outln!("Broker {} at {}", broker.id, broker.addr());
    outln!("{}", release_line(release));
    outln!("APIs advertised: {}", table.len());
    let mut t = Table::new(&["API", "KEY", "CLIENT", "BROKER", "CHOSEN"]);
    for r in rows {
        t.row(vec![
            r.api.name().to_string(),
            r.api.key().to_string(),
            r.ours.to_string(),
            r.broker.map_or_else(|| "-".to_string(), |b| b.to_string()),
            r.chosen
                .map_or_else(|| "unsupported".to_string(), |v| v.to_string()),
        ]);
    }
    out!("{t}");
}

fn range_json(r: VersionRange) -> Json {
    Json::Obj(vec![
        ("min", Json::Int(r.min.into())),
        ("max", Json::Int(r.max.into())),
    ])
}

fn broker_json(broker: &Broker, table: &BrokerVersions, release: &ReleaseMatch, rows: &[Row]) -> Json {
    let differing = match release {
        ReleaseMatch::Closest { differing: keys, .. } | ReleaseMatch::Newer { beyond: keys, .. } => {
            api_names(keys)
        }
        ReleaseMatch::Exact(_) | ReleaseMatch::Unknown => Vec::new(),
    };
    let named = release.release();
    let apis = rows
        .iter()
        .map(|r| {
            Json::Obj(vec![
                ("api", Json::str(r.api.name())),
                ("key", Json::Int(r.api.key().into())),
                ("client", range_json(r.ours)),
                ("broker", r.broker.map_or(Json::Null, range_json)),
                ("chosen", Json::opt_int(r.chosen.map(i64::from))),
            ])
        })
        .collect();
    Json::Obj(vec![
        ("id", Json::Int(broker.id.into())),
        ("host", Json::str(&broker.host)),
        ("port", Json::Int(broker.port.into())),
        ("rack", Json::opt_str(broker.rack.clone())),
        // For "newer", the newest release known: a lower bound.
        ("release", Json::opt_str(named.map(|r| r.name))),
        ("release_version", Json::opt_str(named.map(|r| r.version()))),
        ("release_match", Json::str(match_kind(release))),
        (
            "release_differs",
            Json::Arr(differing.iter().map(Json::str).collect()),
        ),
        ("apis_advertised", Json::Int(table.len() as i64)),
        ("apis", Json::Arr(apis)),
    ])
}
