//! Transactions through the admin API and the CLI against a real broker: Java's transactional
//! producer leaves one transaction committed, one aborted and one open (its JVM halts without
//! ending it), and `list_transactions`, `describe_transactions`, `describe_producers` and
//! `find_hanging_transactions` must each report them as the coordinator and the partition
//! leader hold them.

use crate::group_tests::{client, topic_with_partitions};
use crate::support::{broker, java, unique_name, wait_for};
use kafka_group::{
    Client, Error, HangingSearch, KafkaCode, TopicPartition, TransactionDescription, TransactionFilter,
    TransactionListing, TransactionState,
};
use std::time::Duration;

/// Three transactional producers in one JVM: `args[3]` commits 2 records to partition 1,
/// `args[4]` aborts 2 records there, and `args[5]` writes 3 records to partition 0 inside a
/// transaction that it never ends (the JVM halts; a closing producer would abort). The open
/// transaction's timeout is 5 minutes, so the coordinator keeps it open for the whole test.
const THREE_TRANSACTIONS: &str = r#"
import java.util.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.serialization.StringSerializer;
public class ThreeTransactions {
    static KafkaProducer<String, String> producer(String bootstrap, String id) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("transactional.id", id);
        p.put("transaction.timeout.ms", "300000");
        KafkaProducer<String, String> producer =
            new KafkaProducer<>(p, new StringSerializer(), new StringSerializer());
        producer.initTransactions();
        producer.beginTransaction();
        return producer;
    }
    static void send(KafkaProducer<String, String> p, String topic, int partition, int n) throws Exception {
        for (int i = 0; i < n; i++) {
            p.send(new ProducerRecord<>(topic, partition, null, "v" + i)).get();
        }
    }
    public static void main(String[] a) throws Exception {
        KafkaProducer<String, String> committed = producer(a[0], a[2]);
        send(committed, a[1], 1, 2);
        committed.commitTransaction();
        committed.close();
        KafkaProducer<String, String> aborted = producer(a[0], a[3]);
        send(aborted, a[1], 1, 2);
        aborted.abortTransaction();
        aborted.close();
        KafkaProducer<String, String> open = producer(a[0], a[4]);
        send(open, a[1], 0, 3);
        open.flush();
        Runtime.getRuntime().halt(0);
    }
}
"#;

/// The three transactional ids, after the Java run.
struct Transactions {
    topic: String,
    committed: String,
    aborted: String,
    open: String,
}

/// A fresh 2-partition topic with the three transactions on it.
fn three_transactions(client: &Client, bootstrap: &str, version: &str) -> Transactions {
    let topic = topic_with_partitions(client, 2);
    let t = Transactions {
        committed: unique_name("txa-committed"),
        aborted: unique_name("txa-aborted"),
        open: unique_name("txa-open"),
        topic,
    };
    java::run_source(
        version,
        "ThreeTransactions",
        THREE_TRANSACTIONS,
        &[bootstrap, &t.topic, &t.committed, &t.aborted, &t.open],
    );
    t
}

fn listed<'a>(all: &'a [TransactionListing], id: &str) -> Option<&'a TransactionListing> {
    all.iter().find(|l| l.transactional_id == id)
}

fn described(client: &Client, id: &str) -> TransactionDescription {
    let mut out = client.admin().describe_transactions(&[id]).unwrap();
    assert_eq!(out.len(), 1);
    out.remove(0).1.unwrap_or_else(|e| panic!("{id}: {e}"))
}

#[test]
fn transactions_admin_lists_describes_and_tells_open_from_hanging() {
    let broker = broker::shared();
    let client = client(broker.bootstrap());
    let admin = client.admin();
    let t = three_transactions(&client, broker.bootstrap(), broker.version());
    let (tp0, tp1) = (TopicPartition::new(&t.topic, 0), TopicPartition::new(&t.topic, 1));

    // The commit and abort markers are written after EndTxn answers: wait for the complete
    // states rather than race them.
    wait_for(
        "the committed and aborted transactions to complete",
        Duration::from_secs(30),
        || {
            let all = admin.list_transactions(&TransactionFilter::default()).unwrap();
            listed(&all, &t.committed).map(|l| &l.state) == Some(&TransactionState::CompleteCommit)
                && listed(&all, &t.aborted).map(|l| &l.state) == Some(&TransactionState::CompleteAbort)
        },
    );
    let all = admin.list_transactions(&TransactionFilter::default()).unwrap();
    let open = listed(&all, &t.open)
        .expect("the open transaction is listed")
        .clone();
    assert_eq!(open.state, TransactionState::Ongoing);
    assert!(open.producer_id >= 0);

    // Filters: by state, by producer id, by how long the transaction has been open.
    let filtered = |filter: TransactionFilter| -> Vec<String> {
        let listed = admin.list_transactions(&filter).unwrap();
        [&t.committed, &t.aborted, &t.open]
            .into_iter()
            .filter(|id| listed.iter().any(|l| &&l.transactional_id == id))
            .cloned()
            .collect()
    };
    let ongoing = TransactionFilter {
        states: vec![TransactionState::Ongoing],
        ..Default::default()
    };
    assert_eq!(filtered(ongoing), vec![t.open.clone()]);
    let complete = TransactionFilter {
        states: vec![TransactionState::CompleteCommit, TransactionState::CompleteAbort],
        ..Default::default()
    };
    assert_eq!(filtered(complete), vec![t.committed.clone(), t.aborted.clone()]);
    let by_producer = TransactionFilter {
        producer_ids: vec![open.producer_id],
        ..Default::default()
    };
    assert_eq!(
        admin.list_transactions(&by_producer).unwrap(),
        vec![open.clone()],
        "exactly the open transaction's producer"
    );
    let open_a_while = |d: Duration| TransactionFilter {
        states: vec![TransactionState::Ongoing],
        open_longer_than: Some(d),
        ..Default::default()
    };
    assert_eq!(
        filtered(open_a_while(Duration::from_millis(1))),
        vec![t.open.clone()]
    );
    assert!(
        filtered(open_a_while(Duration::from_secs(3600))).is_empty(),
        "the open transaction is younger than an hour"
    );

    // Describe: each at its coordinator, with its partitions while open.
    let d = described(&client, &t.open);
    assert_eq!(d.state, TransactionState::Ongoing);
    assert_eq!(d.partitions, vec![tp0.clone()]);
    assert_eq!(d.producer_id, open.producer_id);
    assert_eq!(d.transaction_timeout, Duration::from_secs(300));
    assert!(d.start_time_ms.is_some_and(|s| s > 0), "{d:?}");
    let d = described(&client, &t.committed);
    assert_eq!(
        (d.state, d.partitions.len()),
        (TransactionState::CompleteCommit, 0)
    );
    let d = described(&client, &t.aborted);
    assert_eq!(
        (d.state, d.partitions.len()),
        (TransactionState::CompleteAbort, 0)
    );
    // An unknown id is its own outcome, named; the others are still described.
    let unknown = unique_name("txa-unknown");
    let out = admin.describe_transactions(&[&unknown, &t.open]).unwrap();
    assert_eq!(out[0].0, unknown);
    match &out[0].1 {
        Err(
            e @ Error::Kafka {
                code: KafkaCode::TransactionalIdNotFound,
                ..
            },
        ) => {
            assert!(e.to_string().contains(&unknown), "{e}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(out[1].1.as_ref().unwrap().state, TransactionState::Ongoing);

    // The leaders' producer state: the open transaction starts at offset 0 of partition 0;
    // the ended ones hold nothing open on partition 1.
    let producers = admin.describe_producers(&[tp0.clone(), tp1.clone()]).unwrap();
    let on0: Vec<_> = producers[&tp0]
        .iter()
        .filter(|p| p.producer_id == open.producer_id)
        .collect();
    assert_eq!(on0.len(), 1, "{producers:?}");
    assert_eq!(on0[0].current_transaction_start_offset, Some(0));
    assert_eq!(on0[0].last_sequence, 2, "three records, sequences 0 to 2");
    assert!(producers[&tp1].len() >= 2, "{producers:?}");
    assert!(
        producers[&tp1]
            .iter()
            .all(|p| p.current_transaction_start_offset.is_none()),
        "{producers:?}"
    );

    // Hanging: with a 1 ms maximum the open transaction is old enough to be a candidate (its
    // last write is over 1 ms ago, asserted next), but its coordinator still counts partition
    // 0 in it, so it is not hanging — by partition, topic and broker alike.
    std::thread::sleep(Duration::from_millis(5));
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    assert!(now - on0[0].last_timestamp > 1, "a candidate at 1 ms");
    let leader =
        client.refresh_metadata(Some(&[t.topic.as_str()])).unwrap().topics[&t.topic].partitions[0].leader;
    for search in [
        HangingSearch::Partition(tp0.clone()),
        HangingSearch::Topic(t.topic.clone()),
        HangingSearch::Broker(leader),
    ] {
        let hanging = admin
            .find_hanging_transactions(&search, Duration::from_millis(1))
            .unwrap();
        assert!(
            hanging.iter().all(|h| h.partition.topic != t.topic),
            "{search:?}: {hanging:?}"
        );
    }
    // The decision that would call it hanging (the coordinator not knowing the producer, or
    // not counting the partition) is unit-tested in admin::transactions: a real broker does
    // not let a client leave a partition in that state.
}

#[test]
fn transactions_admin_cli_lists_describes_and_finds_hanging() {
    use crate::cli_tests::cli;
    use serde_json::Value;
    let broker = broker::shared();
    let client = client(broker.bootstrap());
    let t = three_transactions(&client, broker.bootstrap(), broker.version());
    let bootstrap = broker.bootstrap();

    let run = cli(bootstrap, &["transactions", "list", "--state", "Ongoing"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.starts_with("TRANSACTIONAL-ID"), "{}", run.stdout);
    let line = run
        .stdout
        .lines()
        .find(|l| l.starts_with(&t.open))
        .unwrap_or_else(|| panic!("{}", run.stdout));
    assert!(line.contains("Ongoing"), "{line}");
    assert!(!run.stdout.contains(&t.committed), "{}", run.stdout);

    let run = cli(bootstrap, &["--json", "transactions", "list"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let all: Value = serde_json::from_str(&run.stdout).unwrap();
    let open = all
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["transactional_id"] == t.open.as_str())
        .unwrap_or_else(|| panic!("{all}"));
    assert_eq!(open["state"], "Ongoing");
    assert!(open["producer_id"].as_i64().unwrap() >= 0);

    let run = cli(bootstrap, &["--json", "transactions", "describe", &t.open]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let d: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(d[0]["state"], "Ongoing");
    assert_eq!(d[0]["partitions"][0]["topic"], t.topic.as_str());
    assert_eq!(d[0]["partitions"][0]["partition"], 0);
    assert_eq!(d[0]["transaction_timeout_ms"], 300_000);

    // An unknown id: the known one is still shown, the unknown named, exit 3.
    let unknown = unique_name("txa-unknown");
    let run = cli(bootstrap, &["transactions", "describe", &t.open, &unknown]);
    assert_eq!(run.code, 3, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains(&t.open) && run.stdout.contains("Ongoing"),
        "{}",
        run.stdout
    );
    assert!(
        run.stderr.contains(&unknown) && run.stderr.contains("TRANSACTIONAL_ID_NOT_FOUND"),
        "{}",
        run.stderr
    );

    let args = [
        "transactions",
        "find-hanging",
        "--topic",
        &t.topic,
        "--max-transaction-timeout",
        "1",
    ];
    let run = cli(bootstrap, &args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout.lines().count(), 1, "the header only: {}", run.stdout);
    let run = cli(bootstrap, &[&["--json"][..], &args].concat());
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout.trim(), "[]");

    // Usage: find-hanging needs a scope, --partition needs --topic.
    assert_eq!(cli(bootstrap, &["transactions", "find-hanging"]).code, 1);
    assert_eq!(
        cli(
            bootstrap,
            &[
                "transactions",
                "find-hanging",
                "--broker",
                "1",
                "--partition",
                "0"
            ]
        )
        .code,
        1
    );
    assert_eq!(
        cli(bootstrap, &["transactions", "list", "--state", "Nope"]).code,
        1
    );
}

/// A broker before Kafka 2.8 has none of the transaction admin APIs (DescribeProducers came in
/// 2.8, ListTransactions and DescribeTransactions in 3.0), and one before 3.8 no
/// duration filter: each call says which release it needs instead of sending a request the
/// broker cannot read (or dropping the filter).
#[test]
fn transactions_admin_on_too_old_brokers_names_the_release() {
    use crate::support::proxy::{self, Proxy};
    let missing = |e: Error, release: &str| match &e {
        Error::MissingCapability { since_release, .. } => {
            assert!(e.to_string().contains(&format!("Kafka {release}")), "{e}");
            assert!(since_release.is_some(), "{e:?}");
        }
        other => panic!("{other:?}"),
    };
    let old = Proxy::start(proxy::upstream_for("zk-2.7"), "zk-2.7");
    let c = client(&old.bootstrap());
    let admin = c.admin().api_timeout(Duration::from_secs(20));
    missing(
        admin
            .list_transactions(&TransactionFilter::default())
            .unwrap_err(),
        "3.0",
    );
    // The emulated 2.7 sits in front of the legacy broker: the topic must be made there.
    let topic = topic_with_partitions(&c, 1);
    let tp = TopicPartition::new(&topic, 0);
    missing(admin.describe_producers(&[tp]).unwrap_err(), "2.8");
    let out = admin.describe_transactions(&["some-id"]).unwrap();
    missing(out.into_iter().next().unwrap().1.unwrap_err(), "3.0");

    let no_duration = Proxy::start(proxy::upstream_for("kraft-3.7"), "kraft-3.7");
    let admin = client(&no_duration.bootstrap()).admin();
    admin.list_transactions(&TransactionFilter::default()).unwrap();
    let by_duration = TransactionFilter {
        open_longer_than: Some(Duration::from_secs(1)),
        ..Default::default()
    };
    missing(admin.list_transactions(&by_duration).unwrap_err(), "3.8");

    let run = crate::cli_tests::cli(&old.bootstrap(), &["transactions", "list"]);
    assert_eq!(run.code, 4, "{}{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("Kafka 3.0"), "{}", run.stderr);
}
