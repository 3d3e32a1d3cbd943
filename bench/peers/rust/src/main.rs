//! kafka-group peer for `scripts/bench-peers`: produce, consume or measure end-to-end latency,
//! and print one JSON line, as the librdkafka, franz-go and Java peers do.
//!
//! ```text
//! kafka-group-peer produce BOOTSTRAP TOPIC RECORDS SIZE [-X key=value]...
//! kafka-group-peer consume BOOTSTRAP TOPIC RECORDS SIZE [-X key=value]...
//! kafka-group-peer latency BOOTSTRAP TOPIC RATE SECONDS SIZE [-X key=value]...
//! kafka-group-peer produce-txn BOOTSTRAP TOPIC RECORDS SIZE [-X key=value]...
//! kafka-group-peer ctp BOOTSTRAP INPUT OUTPUT GROUP RECORDS [-X key=value]...
//! kafka-group-peer create-topics BOOTSTRAP PARTITIONS TOPIC...
//! ```
//! `-X` takes `batch.size`, `linger.ms` and `compression.type` (the producer's); everything
//! else is the crate's default, except `acks=all`. `produce-txn` sends in transactions, each
//! committed once 100 ms have passed since it began; `ctp` reads RECORDS records of INPUT in
//! GROUP (read_committed) and writes each, transformed, to OUTPUT in such transactions with the
//! consumed offsets sent in them. Both print the commit latencies' p50 and p99.

use bytes::Bytes;
use kafka_group::{
    Acks, Client, Compression, IsolationLevel, NewTopic, OffsetAndMetadata, OffsetReset, ProducerRecord,
    TopicPartition,
};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

fn cpu() -> f64 {
    // SAFETY: rusage is plain integers (all-zero is valid), and getrusage only writes the
    // struct it is given.
    let u = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut u);
        u
    };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(u.ru_utime) + tv(u.ru_stime)
}

/// Values as every peer makes them: a 16-letter alphabet drawn by xorshift64, so lz4 has work
/// but no long repeats; a pool of up to 65,536 values is cycled (a batch never sees one twice).
fn pool(n: usize, size: usize) -> Vec<Bytes> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        b"abcdefghijklmnop"[(x & 15) as usize]
    };
    (0..n)
        .map(|_| (0..size).map(|_| next()).collect::<Vec<u8>>().into())
        .collect()
}

/// The producer settings a row changes, as given (`default` when not).
struct Settings {
    batch_size: Option<usize>,
    linger_ms: Option<u64>,
    compression: Option<(String, Compression)>,
}

impl Settings {
    fn parse(args: &[String]) -> Result<Settings, BoxError> {
        let mut s = Settings {
            batch_size: None,
            linger_ms: None,
            compression: None,
        };
        for kv in args.chunks(2) {
            let (k, v) = kv
                .get(1)
                .and_then(|kv| kv.split_once('='))
                .ok_or("expected -X key=value")?;
            match k {
                "batch.size" => s.batch_size = Some(v.parse()?),
                "linger.ms" => s.linger_ms = Some(v.parse()?),
                "compression.type" => {
                    let c = match v {
                        "none" => Compression::None,
                        "gzip" => Compression::Gzip,
                        "snappy" => Compression::Snappy,
                        "lz4" => Compression::Lz4,
                        "zstd" => Compression::Zstd,
                        _ => return Err(format!("compression.type={v}").into()),
                    };
                    s.compression = Some((v.to_string(), c));
                }
                _ => return Err(format!("unknown -X {k}").into()),
            }
        }
        Ok(s)
    }

    fn producer(&self, client: &Client) -> Result<kafka_group::Producer, BoxError> {
        self.producer_with(client, None)
    }

    /// With `transactional.id` if given.
    fn producer_with(&self, client: &Client, txn: Option<String>) -> Result<kafka_group::Producer, BoxError> {
        let mut b = client.producer().acks(Acks::All);
        if let Some(id) = txn {
            b = b.transactional_id(id);
        }
        if let Some(n) = self.batch_size {
            b = b.batch_size(n);
        }
        if let Some(ms) = self.linger_ms {
            b = b.linger(Duration::from_millis(ms));
        }
        if let Some((_, c)) = self.compression {
            b = b.compression(c);
        }
        Ok(b.build()?)
    }

    fn json(&self) -> String {
        let or = |v: Option<String>| v.unwrap_or_else(|| "default".into());
        format!(
            "\"acks\":\"all\",\"batch.size\":\"{}\",\"linger.ms\":\"{}\",\"compression.type\":\"{}\"",
            or(self.batch_size.map(|n| n.to_string())),
            or(self.linger_ms.map(|n| n.to_string())),
            or(self.compression.as_ref().map(|c| c.0.clone())),
        )
    }
}

/// A consumer of every partition of `topic` from the beginning, without a group.
fn consumer(client: &Client, topic: &str) -> Result<kafka_group::Consumer, BoxError> {
    let md = client.refresh_metadata(Some(&[topic]))?;
    let t = md.topics.get(topic).ok_or("topic not in metadata")?;
    let parts = t
        .partitions
        .iter()
        .map(|p| TopicPartition::new(topic, p.partition));
    Ok(client
        .consumer_without_group()
        .assign(parts.collect::<Vec<_>>())
        .auto_offset_reset(OffsetReset::Earliest)
        .build()?)
}

fn main() -> Result<(), BoxError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 4 {
        return Err("usage: kafka-group-peer produce|consume|latency|create-topics BOOTSTRAP ...".into());
    }
    let (mode, bootstrap) = (args[0].as_str(), args[1].as_str());
    let client = Client::builder()
        .bootstrap_servers(bootstrap)
        .client_id("peer-rust")
        .build()?;
    let name = "kafka-group";
    let num = |i: usize| -> Result<f64, BoxError> { Ok(args.get(i).ok_or("missing argument")?.parse()?) };
    match mode {
        "create-topics" => {
            let partitions = num(2)? as i32;
            let topics: Vec<NewTopic> = args[3..]
                .iter()
                .map(|t| NewTopic::new(t, partitions, 1))
                .collect();
            client.admin().create_topics(&topics, Duration::from_secs(30))?;
        }
        "produce" => {
            let (topic, n, size) = (&args[2], num(3)? as usize, num(4)? as usize);
            let set = Settings::parse(&args[5..])?;
            let values = pool(n.min(65536), size);
            let mut producer = set.producer(&client)?;
            // Metadata and connections first, outside the figure.
            producer.send(ProducerRecord::new(topic.as_str(), "warm-up"))?;
            producer.flush()?;
            let (t, c) = (Instant::now(), cpu());
            for i in 0..n {
                producer.send(ProducerRecord::new(
                    topic.as_str(),
                    values[i % values.len()].clone(),
                ))?;
            }
            producer.flush()?;
            let (t, c) = (t.elapsed().as_secs_f64(), cpu() - c);
            println!(
                "{{\"client\":\"{name}\",\"mode\":\"produce\",\"records\":{n},\"bytes\":{},\"seconds\":{t:.4},\
                 \"cpu_seconds\":{c:.3},\"settings\":{{{}}}}}",
                n * size,
                set.json()
            );
            producer.close()?;
        }
        "consume" => {
            let (topic, n) = (&args[2], num(3)? as usize);
            let (t, c) = (Instant::now(), cpu());
            let mut consumer = consumer(&client, topic)?;
            let (mut got, mut bytes) = (0, 0);
            while got < n {
                for r in consumer.poll(Duration::from_secs(1))? {
                    got += 1;
                    bytes += r.value.map_or(0, |v| v.len());
                }
            }
            let (t, c) = (t.elapsed().as_secs_f64(), cpu() - c);
            println!(
                "{{\"client\":\"{name}\",\"mode\":\"consume\",\"records\":{got},\"bytes\":{bytes},\"seconds\":{t:.4},\
                 \"cpu_seconds\":{c:.3},\"settings\":{{\"max.poll.records\":\"default\",\"fetch.max.wait.ms\":\"default\"}}}}"
            );
            consumer.close()?;
        }
        "latency" => latency(&client, name, &args)?,
        "produce-txn" => produce_txn(&client, name, &args)?,
        "ctp" => ctp(&client, name, &args)?,
        _ => return Err(format!("unknown mode {mode}").into()),
    }
    Ok(())
}

/// Sends RATE records a second for SECONDS, each value starting with its send time (20 digits
/// of nanoseconds since `t0`), while a thread reads them back; prints p50/p99/max of the delay.
fn latency(client: &Client, name: &str, args: &[String]) -> Result<(), BoxError> {
    let topic = args[2].clone();
    let (rate, secs, size): (f64, f64, usize) = (args[3].parse()?, args[4].parse()?, args[5].parse()?);
    let set = Settings::parse(&args[6..])?;
    let n = (rate * secs) as usize;
    let t0 = Instant::now();
    let ready = Arc::new(AtomicBool::new(false));
    let mut consumer = consumer(client, &topic)?;
    let reader_ready = ready.clone();
    let reader = std::thread::spawn(move || -> Result<Vec<f64>, kafka_group::Error> {
        let mut lat = Vec::with_capacity(n);
        let deadline = t0 + Duration::from_secs_f64(secs + 60.0);
        while lat.len() < n && Instant::now() < deadline {
            for r in consumer.poll(Duration::from_millis(100))? {
                let v = r.value.unwrap_or_default();
                if v.first() == Some(&b'w') {
                    reader_ready.store(true, Ordering::Release);
                } else if let Some(sent) = std::str::from_utf8(&v[..20.min(v.len())])
                    .ok()
                    .and_then(|s| s.parse::<f64>().ok())
                {
                    lat.push(t0.elapsed().as_secs_f64() - sent / 1e9);
                }
            }
        }
        consumer.close()?;
        Ok(lat)
    });
    let mut producer = set.producer(client)?;
    producer.send(ProducerRecord::new(topic.as_str(), "warm-up"))?;
    producer.flush()?;
    while !ready.load(Ordering::Acquire) && !reader.is_finished() {
        std::thread::sleep(Duration::from_millis(1));
    }
    let (start, c) = (Instant::now(), cpu());
    let pad = "x".repeat(size.saturating_sub(20));
    for i in 0..n {
        let due = start + Duration::from_secs_f64(i as f64 / rate);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let v = format!("{:020}{pad}", t0.elapsed().as_nanos());
        producer.send(ProducerRecord::new(topic.as_str(), v))?;
    }
    producer.flush()?;
    let mut lat = reader.join().map_err(|_| "reader panicked")??;
    let c = cpu() - c;
    lat.sort_by(f64::total_cmp);
    let q = |p: f64| {
        lat.get(((lat.len() as f64 * p).ceil() as usize).max(1) - 1)
            .map_or(0.0, |v| v * 1e3)
    };
    println!(
        "{{\"client\":\"{name}\",\"mode\":\"latency\",\"records\":{},\"rate\":{rate},\"p50_ms\":{:.3},\
         \"p99_ms\":{:.3},\"max_ms\":{:.3},\"cpu_seconds\":{c:.3},\"settings\":{{{}}}}}",
        lat.len(),
        q(0.5),
        q(0.99),
        q(1.0),
        set.json()
    );
    producer.close()?;
    if lat.len() < n {
        return Err("not every record arrived".into());
    }
    Ok(())
}

/// How long a transaction stays open before it is committed.
const TXN_PERIOD: Duration = Duration::from_millis(100);
const TXN_CALL: Duration = Duration::from_secs(60);

/// p50 and p99 in ms of `lat` (seconds).
fn p50_p99(mut lat: Vec<f64>) -> (f64, f64) {
    lat.sort_by(f64::total_cmp);
    let q = |p: f64| {
        lat.get(((lat.len() as f64 * p).ceil() as usize).max(1) - 1)
            .map_or(0.0, |v| v * 1e3)
    };
    (q(0.5), q(0.99))
}

fn produce_txn(client: &Client, name: &str, args: &[String]) -> Result<(), BoxError> {
    let (topic, n, size): (&str, usize, usize) = (&args[2], args[3].parse()?, args[4].parse()?);
    let set = Settings::parse(&args[5..])?;
    let values = pool(n.min(65536), size);
    let mut producer = set.producer_with(client, Some(format!("peer-rust-{}", std::process::id())))?;
    producer.init_transactions(TXN_CALL)?;
    // Metadata, connections and the partitions' first AddPartitionsToTxn outside the figure.
    producer.begin_transaction()?;
    producer.send(ProducerRecord::new(topic, "warm-up"))?;
    producer.commit_transaction(TXN_CALL)?;
    let (t, c) = (Instant::now(), cpu());
    let mut commits = Vec::new();
    let mut i = 0;
    while i < n {
        producer.begin_transaction()?;
        let began = Instant::now();
        while i < n && began.elapsed() < TXN_PERIOD {
            producer.send(ProducerRecord::new(topic, values[i % values.len()].clone()))?;
            i += 1;
        }
        let at = Instant::now();
        producer.commit_transaction(TXN_CALL)?;
        commits.push(at.elapsed().as_secs_f64());
    }
    let (t, c) = (t.elapsed().as_secs_f64(), cpu() - c);
    let txns = commits.len();
    let (p50, p99) = p50_p99(commits);
    println!(
        "{{\"client\":\"{name}\",\"mode\":\"produce-txn\",\"records\":{n},\"bytes\":{},\"seconds\":{t:.4},\
         \"cpu_seconds\":{c:.3},\"transactions\":{txns},\"commit_p50_ms\":{p50:.3},\"commit_p99_ms\":{p99:.3},\
         \"settings\":{{{}}}}}",
        n * size,
        set.json()
    );
    producer.close()?;
    Ok(())
}

/// The transformation every peer applies: the value reversed.
fn transform(v: &[u8]) -> Vec<u8> {
    v.iter().rev().copied().collect()
}

fn ctp(client: &Client, name: &str, args: &[String]) -> Result<(), BoxError> {
    let (input, output, group) = (args[2].as_str(), args[3].as_str(), args[4].as_str());
    let n: usize = args[5].parse()?;
    let set = Settings::parse(&args[6..])?;
    let mut consumer = client
        .consumer(group)
        .subscribe([input])
        .isolation_level(IsolationLevel::ReadCommitted)
        .auto_offset_reset(OffsetReset::Earliest)
        .enable_auto_commit(false)
        .build()?;
    let mut producer = set.producer_with(client, Some(format!("peer-rust-ctp-{}", std::process::id())))?;
    producer.init_transactions(TXN_CALL)?;
    let mut commits = Vec::new();
    let (mut got, mut bytes) = (0usize, 0usize);
    // The clock starts at the first records (the join is not timed).
    let mut started: Option<(Instant, f64)> = None;
    let deadline = Instant::now() + Duration::from_secs(600);
    while got < n {
        if Instant::now() > deadline {
            return Err(format!("{got} of {n} records in 600 s").into());
        }
        producer.begin_transaction()?;
        let began = Instant::now();
        let mut offsets: BTreeMap<TopicPartition, OffsetAndMetadata> = BTreeMap::new();
        while got < n && began.elapsed() < TXN_PERIOD {
            for r in consumer.poll(Duration::from_millis(20))? {
                started.get_or_insert_with(|| (Instant::now(), cpu()));
                let v = r.value.as_deref().unwrap_or_default();
                bytes += v.len();
                got += 1;
                producer.send(ProducerRecord::new(output, transform(v)))?;
                offsets.insert(
                    TopicPartition::new(&*r.topic, r.partition),
                    OffsetAndMetadata::new(r.offset + 1),
                );
            }
        }
        if !offsets.is_empty() {
            let meta = consumer.group_metadata().ok_or("no group metadata")?;
            producer.send_offsets_to_transaction(&offsets, &meta, TXN_CALL)?;
        }
        let at = Instant::now();
        producer.commit_transaction(TXN_CALL)?;
        if started.is_some() {
            commits.push(at.elapsed().as_secs_f64());
        }
    }
    let (t0, c0) = started.ok_or("nothing read")?;
    let (t, c) = (t0.elapsed().as_secs_f64(), cpu() - c0);
    let txns = commits.len();
    let (p50, p99) = p50_p99(commits);
    println!(
        "{{\"client\":\"{name}\",\"mode\":\"ctp\",\"records\":{got},\"bytes\":{bytes},\"seconds\":{t:.4},\
         \"cpu_seconds\":{c:.3},\"transactions\":{txns},\"commit_p50_ms\":{p50:.3},\"commit_p99_ms\":{p99:.3},\
         \"settings\":{{{},\"isolation.level\":\"read_committed\"}}}}",
        set.json()
    );
    producer.close()?;
    consumer.close()?;
    Ok(())
}
