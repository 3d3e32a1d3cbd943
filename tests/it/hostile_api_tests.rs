//! Hostile input through the public API, against the real shared broker: every builder setter
//! taking a duration or a size, fed extreme values, must build or fail with `Error::Config`;
//! every call taking a timeout, given 0, 1 ns, `Duration::MAX` and `u64::MAX` seconds, must
//! return (success or error). Never a panic: each entry point runs under `catch_unwind`, and the
//! test lists every one that panicked.
//!
//! Also here: the exact paths behind those bounds that the broker cannot show by itself — a
//! Metadata answer with a broker port outside TCP's range (scripted fake broker), and retrying
//! calls that must end at their limit while every request hangs (proxy blackhole).

use crate::support::proxy::{self, Proxy};
use crate::support::scripted::{api_versions_frame, full_table, Reply, Scripted};
use crate::support::{broker, create_topic, unique_name};
use kafka_group::unstable::protocol::messages::metadata_response::MetadataResponseBroker;
use kafka_group::unstable::protocol::messages::{MetadataRequest, MetadataResponse, ResponseHeader};
use kafka_group::unstable::protocol::{ApiKey, Message, Request};
use kafka_group::MemberBuilder;
use kafka_group::TopicPartition;
use kafka_group::{
    Client, ClientBuilder, ConsumerBuilder, Error, NewTopic, OffsetReset, OffsetSpec, ProducerBuilder,
    ProducerRecord,
};
use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};

/// The durations every setter and every timeout is tried with.
const EXTREMES: [Duration; 4] = [
    Duration::ZERO,
    Duration::from_nanos(1),
    Duration::MAX,
    Duration::from_secs(u64::MAX),
];

/// Around the largest value Kafka's int-typed millisecond settings take.
const INT_MS: [Duration; 2] = [
    Duration::from_millis(i32::MAX as u64),
    Duration::from_millis(i32::MAX as u64 + 1),
];

fn durations() -> impl Iterator<Item = Duration> {
    EXTREMES.into_iter().chain(INT_MS)
}

/// The entry points that panicked (and the few calls that failed where they must succeed),
/// reported together at the end of a test.
#[derive(Default)]
struct Panics(Vec<String>);

impl Panics {
    /// Runs `f`, recording a panic under `what`; `None` if it panicked.
    fn run<T>(&mut self, what: &str, f: impl FnOnce() -> T) -> Option<T> {
        match catch_unwind(AssertUnwindSafe(f)) {
            Ok(v) => Some(v),
            Err(p) => {
                self.0.push(format!("{what}: {}", message(&*p)));
                None
            }
        }
    }

    /// A `build()` must give a value or a configuration error.
    fn build<T>(&mut self, what: &str, f: impl FnOnce() -> Result<T, Error>) -> Option<T> {
        match self.run(what, f)? {
            Ok(v) => Some(v),
            Err(Error::Config { .. }) => None,
            Err(e) => {
                self.0.push(format!("{what}: not a configuration error: {e}"));
                None
            }
        }
    }

    /// A call that must succeed; an error is listed too.
    fn expect_ok<T>(&mut self, what: &str, f: impl FnOnce() -> Result<T, Error>) {
        if let Some(Err(e)) = self.run(what, f) {
            self.0.push(format!("{what}: failed: {e}"));
        }
    }

    fn assert_none(self) {
        assert!(
            self.0.is_empty(),
            "{} entry points panicked (or failed where they must not):\n{}",
            self.0.len(),
            self.0.join("\n")
        );
    }
}

fn message(p: &dyn Any) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(non-string panic)".into())
}

fn client_builder() -> ClientBuilder {
    Client::builder().bootstrap_servers(broker::shared().bootstrap())
}

fn client() -> Client {
    client_builder().build().unwrap()
}

/// A topic with `n` records in its one partition.
fn topic_with_records(client: &Client, n: usize) -> String {
    let topic = create_topic(client, "hostile", 1, 1);
    let mut p = client.producer().build().unwrap();
    for i in 0..n {
        p.send(ProducerRecord::new(&topic, format!("v{i}"))).unwrap();
    }
    p.flush().unwrap();
    topic
}

type Setter<B, V> = (&'static str, fn(B, V) -> B);

#[test]
fn builder_setters_with_extreme_values_build_or_fail_with_config_errors() {
    let client = client();
    let mut panics = Panics::default();

    let client_durations: [Setter<ClientBuilder, Duration>; 6] = [
        ("request_timeout", ClientBuilder::request_timeout),
        ("connect_timeout", ClientBuilder::connect_timeout),
        ("api_timeout", ClientBuilder::api_timeout),
        ("retry_backoff", ClientBuilder::retry_backoff),
        ("reconnect_backoff", ClientBuilder::reconnect_backoff),
        ("reconnect_backoff_max", ClientBuilder::reconnect_backoff_max),
    ];
    for (name, set) in client_durations {
        for d in durations() {
            panics.build(&format!("ClientBuilder::{name}({d:?})"), || {
                set(client_builder(), d).build()
            });
        }
    }
    for n in [0, 1, 1023, 1024, usize::MAX] {
        panics.build(&format!("ClientBuilder::max_response_size({n})"), || {
            client_builder().max_response_size(n).build()
        });
    }
    for v in [i16::MIN, -1, 0, i16::MAX] {
        panics.build(&format!("ClientBuilder::max_api_version(Fetch, {v})"), || {
            client_builder().max_api_version(ApiKey::Fetch, v).build()
        });
    }

    let member_durations: [Setter<MemberBuilder, Duration>; 5] = [
        ("session_timeout", MemberBuilder::session_timeout),
        ("heartbeat_interval", MemberBuilder::heartbeat_interval),
        ("max_poll_interval", MemberBuilder::max_poll_interval),
        ("retry_backoff", MemberBuilder::retry_backoff),
        ("metadata_max_age", MemberBuilder::metadata_max_age),
    ];
    for (name, set) in member_durations {
        for d in durations() {
            panics.build(&format!("MemberBuilder::{name}({d:?})"), || {
                set(client.member("g").subscribe(["t"]), d).build()
            });
        }
    }

    let consumer = || client.consumer("g").subscribe(["t"]);
    let consumer_durations: [Setter<ConsumerBuilder, Duration>; 7] = [
        ("session_timeout", ConsumerBuilder::session_timeout),
        ("heartbeat_interval", ConsumerBuilder::heartbeat_interval),
        ("max_poll_interval", ConsumerBuilder::max_poll_interval),
        ("retry_backoff", ConsumerBuilder::retry_backoff),
        ("metadata_max_age", ConsumerBuilder::metadata_max_age),
        ("auto_commit_interval", ConsumerBuilder::auto_commit_interval),
        ("fetch_max_wait", ConsumerBuilder::fetch_max_wait),
    ];
    for (name, set) in consumer_durations {
        for d in durations() {
            panics.build(&format!("ConsumerBuilder::{name}({d:?})"), || {
                set(consumer(), d).build()
            });
        }
    }
    for n in [0, 1, usize::MAX] {
        panics.build(&format!("ConsumerBuilder::max_poll_records({n})"), || {
            consumer().max_poll_records(n).build()
        });
    }
    let consumer_sizes: [Setter<ConsumerBuilder, usize>; 3] = [
        ("fetch_min_bytes", ConsumerBuilder::fetch_min_bytes),
        ("fetch_max_bytes", ConsumerBuilder::fetch_max_bytes),
        (
            "max_partition_fetch_bytes",
            ConsumerBuilder::max_partition_fetch_bytes,
        ),
    ];
    for (name, set) in consumer_sizes {
        for n in [0, 1, i32::MAX as usize, i32::MAX as usize + 1, usize::MAX] {
            panics.build(&format!("ConsumerBuilder::{name}({n})"), || {
                set(consumer(), n).build()
            });
        }
    }

    let producer_durations: [Setter<ProducerBuilder, Duration>; 5] = [
        ("linger", ProducerBuilder::linger),
        ("delivery_timeout", ProducerBuilder::delivery_timeout),
        ("retry_backoff", ProducerBuilder::retry_backoff),
        ("max_block", ProducerBuilder::max_block),
        ("metadata_max_age", ProducerBuilder::metadata_max_age),
    ];
    for (name, set) in producer_durations {
        for d in durations() {
            panics.build(&format!("ProducerBuilder::{name}({d:?})"), || {
                set(client.producer(), d).build()
            });
        }
    }
    let producer_sizes: [Setter<ProducerBuilder, usize>; 2] = [
        ("batch_size", ProducerBuilder::batch_size),
        ("max_request_size", ProducerBuilder::max_request_size),
    ];
    for (name, set) in producer_sizes {
        for n in [0, 1, i32::MAX as usize, i32::MAX as usize + 1, usize::MAX] {
            panics.build(&format!("ProducerBuilder::{name}({n})"), || {
                set(client.producer(), n).build()
            });
        }
    }
    for n in [0, 1, u32::MAX] {
        panics.build(&format!("ProducerBuilder::retries({n})"), || {
            client.producer().retries(n).build()
        });
    }
    panics.assert_none();
}

/// Clients whose settings take extreme values that `build()` accepts still answer every call:
/// with an error (a 1 ns request timeout) or normally.
#[test]
fn clients_built_with_extreme_settings_return_from_every_call() {
    // The offsets topic exists before the coordinator lookups below, so none has to wait for it.
    client().find_coordinator(&unique_name("warm-up")).unwrap();
    let topic = topic_with_records(&client(), 1);
    let mut panics = Panics::default();
    let setters: [Setter<ClientBuilder, Duration>; 6] = [
        ("request_timeout", ClientBuilder::request_timeout),
        ("connect_timeout", ClientBuilder::connect_timeout),
        ("api_timeout", ClientBuilder::api_timeout),
        ("retry_backoff", ClientBuilder::retry_backoff),
        ("reconnect_backoff", ClientBuilder::reconnect_backoff),
        ("reconnect_backoff_max", ClientBuilder::reconnect_backoff_max),
    ];
    for (name, set) in setters {
        for d in durations() {
            let what = format!("ClientBuilder::{name}({d:?})");
            // A short api timeout keeps the retries of a client that can get no answer (a 1 ns
            // request timeout) short; the api timeout's own extremes override it. The max must
            // not be below the first backoff.
            let mut builder = client_builder().api_timeout(Duration::from_secs(3));
            if name == "reconnect_backoff" {
                builder = builder.reconnect_backoff_max(Duration::MAX);
            }
            let Some(c) = panics.build(&what, || set(builder, d).build()) else {
                continue;
            };
            let group = unique_name("hostile-lookup");
            panics.run(&format!("{what}: refresh_metadata"), || {
                let _ = c.refresh_metadata(None);
            });
            panics.run(&format!("{what}: find_coordinator"), || {
                let _ = c.find_coordinator(&group);
            });
            panics.run(&format!("{what}: Admin::describe_group"), || {
                let _ = c.admin().describe_group(&group);
            });
            // With a huge value, a client that works at all must also carry the calls that
            // add the setting to other durations or back off by it: a consumer's fetch, a
            // topic creation's wait for leaders. Each returns because something is ready.
            if d < INT_MS[0] || c.refresh_metadata(None).is_err() {
                continue;
            }
            // The calls' own timeouts stay finite here (their extremes have tests of their
            // own): with retry.backoff.ms = MAX, a transient error would rightly sleep them out.
            panics.expect_ok(&format!("{what}: Consumer::poll"), || {
                let mut consumer = c
                    .consumer(&group)
                    .subscribe([&topic])
                    .auto_offset_reset(OffsetReset::Earliest)
                    .enable_auto_commit(false)
                    .build()?;
                consumer.poll(Duration::from_secs(120))?;
                consumer.close()
            });
            panics.expect_ok(&format!("{what}: Admin::create_topics"), || {
                let topic = NewTopic::new(unique_name("hostile-client"), 1, 1);
                c.admin().create_topics(&[topic], Duration::from_secs(120))
            });
        }
    }
    panics.assert_none();
}

#[test]
fn consumer_poll_returns_for_every_extreme_timeout() {
    let client = client();
    // One record per poll: each `poll` below, the waiting ones included, finds one ready.
    let topic = topic_with_records(&client, EXTREMES.len() * 2);
    let mut panics = Panics::default();
    let mut consumer = client
        .consumer(&unique_name("hostile-poll"))
        .subscribe([&topic])
        .auto_offset_reset(OffsetReset::Earliest)
        .enable_auto_commit(false)
        .max_poll_records(1)
        .build()
        .unwrap();
    let mut got = 0;
    for t in EXTREMES {
        if let Some(Ok(polled)) = panics.run(&format!("Consumer::poll({t:?})"), || consumer.poll(t)) {
            got += polled.records.len();
        }
    }
    panics.assert_none();
    assert!(
        got >= 2,
        "the two unbounded polls return a record each, got {got}"
    );
    consumer.close().unwrap();
}

#[test]
fn group_member_join_and_poll_return_for_every_extreme_timeout() {
    let client = client();
    let topic = create_topic(&client, "hostile-member", 2, 1);
    let mut panics = Panics::default();
    let member = |client: &Client| {
        client
            .member(&unique_name("hostile-join"))
            .subscribe([&topic])
            .build()
            .unwrap()
    };
    // A fresh group each time: the join completes without waiting for anyone.
    for t in EXTREMES {
        let mut m = member(&client);
        panics.run(&format!("GroupMember::join({t:?}) of a fresh group"), || {
            let _ = m.join(t);
        });
        let _ = m.close();
    }
    // A fresh member's first poll joins; after that, every poll with a huge timeout has
    // something to return: a revocation once a rejoin is requested, then the new assignment.
    let mut m = member(&client);
    panics.run("GroupMember::poll(Duration::MAX) of a fresh member", || {
        let _ = m.poll(Duration::MAX);
    });
    for t in [Duration::ZERO, Duration::from_nanos(1)] {
        panics.run(&format!("GroupMember::poll({t:?})"), || {
            let _ = m.poll(t);
        });
    }
    for t in [Duration::MAX, Duration::from_secs(u64::MAX)] {
        m.request_rejoin();
        panics.run(&format!("GroupMember::poll({t:?}) with a rejoin pending"), || {
            let _ = m.poll(t);
        });
    }
    panics.run("GroupMember::join(u64::MAX s) of a joined member", || {
        let _ = m.join(Duration::from_secs(u64::MAX));
    });
    panics.assert_none();
    m.close().unwrap();
}

#[test]
fn admin_calls_return_for_every_extreme_timeout() {
    let client = client();
    let mut panics = Panics::default();
    let mut created = Vec::new();
    for t in EXTREMES {
        let admin = client.admin();
        let name = unique_name("hostile-admin");
        let topic = NewTopic::new(&name, 1, 1);
        panics.run(&format!("Admin::create_topics({t:?})"), || {
            let _ = admin.create_topics(std::slice::from_ref(&topic), t);
        });
        panics.run(&format!("Admin::create_topics_if_missing({t:?})"), || {
            let _ = admin.create_topics_if_missing(std::slice::from_ref(&topic), t);
        });
        panics.run(&format!("Admin::create_partitions({t:?})"), || {
            let _ = admin.create_partitions(&[(&name, 2)], t);
        });
        created.push(name);
    }
    // Deleting: the unbounded timeouts on topics that surely exist by now (created with one).
    for (t, name) in EXTREMES.iter().zip(created.iter().rev()) {
        panics.run(&format!("Admin::delete_topics({t:?})"), || {
            let _ = client.admin().delete_topics(&[name], *t);
        });
    }
    for (partitions, replicas) in [(i32::MIN, i16::MIN), (-5, 1), (0, 0), (1, i16::MAX)] {
        let topic = NewTopic::new(unique_name("hostile-admin"), partitions, replicas);
        panics.run(
            &format!("Admin::create_topics({partitions} partitions, {replicas} replicas)"),
            || {
                let _ = client.admin().create_topics(&[topic], Duration::from_secs(30));
            },
        );
    }
    let topic = create_topic(&client, "hostile-admin", 1, 1);
    for total in [i32::MIN, -1, 0, 1] {
        panics.run(&format!("Admin::create_partitions({total})"), || {
            let _ = client
                .admin()
                .create_partitions(&[(&topic, total)], Duration::from_secs(30));
        });
    }
    let group = unique_name("hostile-admin");
    for t in EXTREMES {
        let admin = client.admin().api_timeout(t);
        let tp = [TopicPartition::new(&topic, 0)];
        panics.run(&format!("Admin::api_timeout({t:?}).describe_group"), || {
            let _ = admin.describe_group(&group);
        });
        panics.run(&format!("Admin::api_timeout({t:?}).list_groups"), || {
            let _ = admin.list_groups();
        });
        panics.run(&format!("Admin::api_timeout({t:?}).list_offsets"), || {
            let _ = admin.list_offsets(&tp, OffsetSpec::Latest);
        });
        panics.run(&format!("Admin::api_timeout({t:?}).group_offsets"), || {
            let _ = admin.group_offsets(&group);
        });
        panics.run(&format!("Admin::api_timeout({t:?}).describe_group_lag"), || {
            let _ = admin.describe_group_lag(&group);
        });
        panics.run(&format!("Admin::api_timeout({t:?}).remove_members"), || {
            let _ = admin.remove_members(&group, &["nobody"]);
        });
    }
    panics.assert_none();
}

#[test]
fn producer_send_and_flush_return_for_every_extreme_setting() {
    let client = client();
    let topic = create_topic(&client, "hostile-produce", 2, 1);
    let mut panics = Panics::default();
    let setters: [Setter<ProducerBuilder, Duration>; 5] = [
        ("linger", ProducerBuilder::linger),
        ("delivery_timeout", ProducerBuilder::delivery_timeout),
        ("retry_backoff", ProducerBuilder::retry_backoff),
        ("max_block", ProducerBuilder::max_block),
        ("metadata_max_age", ProducerBuilder::metadata_max_age),
    ];
    for (name, set) in setters {
        for d in durations() {
            let what = format!("ProducerBuilder::{name}({d:?})");
            // Room for the largest linger.ms delivery.timeout.ms allows.
            let builder = client.producer().delivery_timeout(INT_MS[0]);
            let Some(mut p) = panics.build(&what, || set(builder, d).build()) else {
                continue;
            };
            panics.run(&format!("{what}: send + flush"), || {
                let _ = p.send(ProducerRecord::new(&topic, "v"));
                let _ = p.flush();
            });
        }
    }
    let mut p = client.producer().build().unwrap();
    for partition in [i32::MIN, -1, 2, i32::MAX] {
        panics.run(&format!("Producer::send to partition {partition}"), || {
            let _ = p.send(ProducerRecord::new(&topic, "v").partition(partition));
        });
    }
    panics.run("Producer::flush", || {
        let _ = p.flush();
    });
    panics.assert_none();
}

/// A Metadata answer naming a broker at port 65536 + p must not send requests to port p: that
/// broker is left out (and logged), the others stay usable.
#[test]
fn a_broker_port_outside_tcp_in_metadata_is_not_truncated() {
    let fake = Scripted::start(|req| {
        if req.api_key == ApiKey::ApiVersions.key() {
            return Reply::Frame(api_versions_frame(
                req.correlation_id,
                req.api_version,
                0,
                &full_table(),
            ));
        }
        assert_eq!(req.api_key, ApiKey::Metadata.key());
        let broker = |id: i32, port: i32| MetadataResponseBroker {
            node_id: id,
            host: "127.0.0.1".into(),
            port,
            ..Default::default()
        };
        let body = MetadataResponse {
            brokers: vec![broker(1, 65536 + 9092), broker(2, 9092), broker(3, -1)],
            controller_id: 2,
            ..Default::default()
        };
        let mut out = Vec::new();
        ResponseHeader {
            correlation_id: req.correlation_id,
            ..Default::default()
        }
        .encode(
            MetadataRequest::response_header_version(req.api_version),
            &mut out,
        )
        .unwrap();
        body.encode(req.api_version, &mut out).unwrap();
        Reply::Frame(out)
    });
    let client = Client::builder()
        .bootstrap_servers(fake.addr.to_string())
        .request_timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let meta = client.refresh_metadata(None).unwrap();
    assert_eq!(
        meta.brokers.keys().copied().collect::<Vec<_>>(),
        vec![2],
        "{meta:?}"
    );
    assert_eq!(meta.brokers[&2].port, 9092);
    assert_eq!(client.broker(1), None, "broker 1 would have been 127.0.0.1:9092");
}

/// Retrying calls end at their limit even when each request could wait much longer: every
/// request, and every connection set up on the way, gets only what is left of the call.
#[test]
fn retrying_calls_do_not_overshoot_their_limit_by_a_request_timeout() {
    const RELEASE: &str = "kraft-4.0";
    const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
    const LIMIT: Duration = Duration::from_secs(2);
    let proxy = Proxy::start(proxy::upstream_for(RELEASE), RELEASE);
    let client = Client::builder()
        .bootstrap_servers(proxy.bootstrap())
        .request_timeout(REQUEST_TIMEOUT)
        .build()
        .unwrap();
    client.refresh_metadata(None).unwrap();
    proxy.blackhole(true);
    type Call<'a> = Box<dyn Fn() -> Result<(), Error> + 'a>;
    let calls: [(&str, Call); 3] = [
        (
            "describe_group",
            Box::new(|| client.admin().api_timeout(LIMIT).describe_group("g").map(|_| ())),
        ),
        (
            "create_topics",
            Box::new(|| {
                client
                    .admin()
                    .create_topics(&[NewTopic::new(unique_name("never"), 1, 1)], LIMIT)
            }),
        ),
        (
            "list_offsets",
            Box::new(|| {
                client
                    .admin()
                    .api_timeout(LIMIT)
                    .list_offsets(&[TopicPartition::new("t", 0)], OffsetSpec::Latest)
                    .map(|_| ())
            }),
        ),
    ];
    for (what, call) in calls {
        let started = Instant::now();
        let result = call();
        let took = started.elapsed();
        assert!(result.is_err(), "{what} got an answer through the blackhole");
        // Far below one request timeout: without the clamp the first request alone waits 30 s.
        assert!(
            took < LIMIT + crate::support::LOAD_MARGIN,
            "{what} took {took:?} for a {LIMIT:?} limit"
        );
    }
    proxy.blackhole(false);
}
