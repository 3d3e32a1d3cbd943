#!/usr/bin/env python3
"""librdkafka, through PyPI's confluent-kafka wheel (librdkafka 2.16 bundled), for the interop
tests (driven by tests/it/support/rdkafka.rs) and examples/secure_bench.rs. `scripts/rdkafka
python` installs the wheel into a cached environment of its own and names the interpreter.

Every command takes librdkafka properties as -X key=value (as kcat does), prints one JSON object
on stdout and exits 0 on success, 1 on failure (the JSON then has "error"), 3 if the wheel is
missing.

  version
      {"confluent_kafka": "2.16.1", "librdkafka": "2.16.0"}
  metadata BOOTSTRAP [--topic T] [--timeout S]
      connects and asks for metadata: {"brokers": N, "topics": N}; an authentication error ends
      it at once (librdkafka would otherwise retry until the timeout). With --topic, asks for T
      alone and adds {"topic": {"partitions": N, "error": "..." or null}}.
  produce BOOTSTRAP TOPIC PARTITIONS PER_PARTITION [--timeout S]
      writes PER_PARTITION records with value "p<partition>-<i>" to each partition explicitly,
      acks=all, waits for every delivery: {"produced": N}.
  produce-transactions BOOTSTRAP TOPIC ID_A ID_B PREFIX [--timeout S]
      two transactional producers write to partition 0 values "PREFIX-..." in committed and
      aborted transactions, interleaved (the script is in cmd_produce_transactions):
      {"committed": N, "aborted": N}.
  consume BOOTSTRAP TOPIC GROUP COUNT [--timeout S]
      joins GROUP (subscribe, range assignor), reads COUNT records from the earliest offset,
      commits them synchronously and closes: {"records": [[partition, offset, value], ...]}.
  read BOOTSTRAP TOPIC COUNT [--timeout S]
      assigns every partition of TOPIC (no group) from the earliest offset and reads until COUNT
      records came and then one quiet second, or the timeout: {"values": [...]}. The isolation
      level is librdkafka's isolation.level, given with -X (its default: read_committed).
  committed BOOTSTRAP TOPIC GROUP PARTITIONS [--timeout S]
      GROUP's committed offsets of partitions 0..PARTITIONS-1 of TOPIC, without joining it:
      {"offsets": {"0": N or null, ...}, "metadata": {"0": "..." or null, ...}} (a metadata
      the wheel cannot decode is "<undecodable: ...>").
  group BOOTSTRAP TOPIC GROUP [--timeout S]
      a balanced consumer that runs until killed (or S seconds, default an hour), reading from
      the earliest offset, committing nothing. Each record is a line "partition offset value" on
      stdout, each assignment a line "# assigned partitions=0,1". With -X debug=cgrp, stderr has
      librdkafka's group log (which tells the generations it joined and whether it led them).
  bench-consume BOOTSTRAP TOPIC GROUP COUNT [--batch B] [--timeout S]
      as consume, with the batch API consume(num_messages=B), nothing decoded or committed;
      the clock starts when the first batch is back (the join is not timed) and the time is
      scaled to COUNT from the records after it, as examples/consume_bench.rs does:
      {"records": N, "bytes": N, "seconds": S, "first_batch": N}.
"""

import argparse
import json
import sys
import time

try:
    import confluent_kafka
    from confluent_kafka import Consumer, KafkaError, Producer
except ImportError as e:
    print(json.dumps({"error": f"confluent-kafka is not installed ({e}): python3 -m pip install confluent-kafka"}))
    sys.exit(3)


class Failed(Exception):
    """Ends a command with exit status 1 and its message as the JSON "error"."""


def config(args, **extra):
    conf = {"bootstrap.servers": args.bootstrap}
    for prop in args.X:
        key, sep, value = prop.partition("=")
        if not sep:
            raise Failed(f"-X {prop}: expected key=value")
        conf[key] = value
    conf.update(extra)
    return conf


class Errors:
    """librdkafka's error_cb. Most errors are transient and retried by librdkafka itself; an
    authentication failure is final for the tests (the same credentials will fail again)."""

    def __init__(self):
        self.seen = []

    def __call__(self, err):
        self.seen.append(str(err))
        if err.code() in (KafkaError._AUTHENTICATION, KafkaError._SSL) or err.fatal():
            raise Failed(f"librdkafka: {err}")


def deadline_of(args):
    return time.monotonic() + args.timeout


def cmd_version(_args):
    # version() is a (string, int) pair in older wheels, the string alone in 2.16.
    wheel = confluent_kafka.version()
    wheel = wheel[0] if isinstance(wheel, tuple) else wheel
    return {"confluent_kafka": wheel, "librdkafka": confluent_kafka.libversion()[0]}


def cmd_metadata(args):
    errors = Errors()
    p = Producer(config(args, error_cb=errors))
    deadline = deadline_of(args)
    while True:
        # poll() serves error_cb (and, for OAUTHBEARER, the token refresh) between attempts.
        p.poll(0.1)
        try:
            md = p.list_topics(topic=args.topic, timeout=1.0)
            out = {"brokers": len(md.brokers), "topics": len(md.topics)}
            if args.topic is not None:
                t = md.topics.get(args.topic)
                error = None if t is None or t.error is None else str(t.error)
                out["topic"] = {"partitions": 0 if t is None else len(t.partitions), "error": error}
            return out
        except confluent_kafka.KafkaException as e:
            if time.monotonic() > deadline:
                raise Failed(f"no metadata after {args.timeout}s: {e}; errors: {errors.seen}")


def cmd_produce(args):
    errors = Errors()
    p = Producer(config(args, error_cb=errors, acks="all"))
    failed = []

    def delivered(err, _msg):
        if err is not None:
            failed.append(str(err))

    n = 0
    for partition in range(args.partitions):
        for i in range(args.per_partition):
            p.produce(args.topic, value=f"p{partition}-{i}", partition=partition, on_delivery=delivered)
            n += 1
            p.poll(0)
    left = p.flush(args.timeout)
    if left or failed:
        raise Failed(f"{left} records undelivered after {args.timeout}s, {len(failed)} failed: {failed[:3]}")
    return {"produced": n}


def cmd_produce_transactions(args):
    """Two transactional producers (ids a and b) write to partition 0, committing and aborting:
    a commits c0..c4; a (x0..x3, aborted) and b (b0..b3, committed) interleave one record each
    in turn; a writes three batches big<r>-<j> and aborts; b commits last. Every record is
    delivered (flush) before its transaction ends, so the aborted ones are in the log."""
    errors = Errors()
    deadline = deadline_of(args)

    def left():
        return max(deadline - time.monotonic(), 0.1)

    def open_producer(tid):
        p = Producer(config(args, error_cb=errors, **{"transactional.id": tid, "linger.ms": 0}))
        p.init_transactions(left())
        return p

    failed = []

    def delivered(err, _msg):
        if err is not None:
            failed.append(str(err))

    def send(p, value):
        p.produce(args.topic, value=f"{args.prefix}-{value}", partition=0, on_delivery=delivered)
        if p.flush(left()):
            raise Failed(f"{value} undelivered after {args.timeout}s; errors: {errors.seen}")

    a, b = open_producer(args.id_a), open_producer(args.id_b)
    committed = aborted = 0
    a.begin_transaction()
    for i in range(5):
        send(a, f"c{i}")
    a.commit_transaction(left())
    committed += 5
    a.begin_transaction()
    b.begin_transaction()
    for i in range(4):
        send(a, f"x{i}")
        send(b, f"b{i}")
    a.abort_transaction(left())
    b.commit_transaction(left())
    aborted += 4
    committed += 4
    a.begin_transaction()
    for r in range(3):
        for j in range(5):
            a.produce(args.topic, value=f"{args.prefix}-big{r}-{j}", partition=0, on_delivery=delivered)
        if a.flush(left()):
            raise Failed(f"big{r} undelivered after {args.timeout}s; errors: {errors.seen}")
    a.abort_transaction(left())
    aborted += 15
    b.begin_transaction()
    send(b, "last")
    b.commit_transaction(left())
    committed += 1
    if failed:
        raise Failed(f"{len(failed)} records failed: {failed[:3]}")
    return {"committed": committed, "aborted": aborted}


def group_consumer(args, errors, **extra):
    conf = config(
        args,
        error_cb=errors,
        **{
            "group.id": args.group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "partition.assignment.strategy": "range",
        },
    )
    conf.update(extra)
    if conf.get("group.protocol") == "consumer":
        # KIP-848: the coordinator assigns; librdkafka refuses a client-side assignor with it.
        del conf["partition.assignment.strategy"]
    c = Consumer(conf)
    c.subscribe([args.topic])
    return c


def cmd_consume(args):
    errors = Errors()
    c = group_consumer(args, errors)
    deadline = deadline_of(args)
    records = []
    try:
        while len(records) < args.count:
            if time.monotonic() > deadline:
                raise Failed(f"{len(records)} of {args.count} records after {args.timeout}s; errors: {errors.seen}")
            for m in c.consume(num_messages=args.count - len(records), timeout=0.5):
                if m.error() is not None:
                    raise Failed(f"consume: {m.error()}")
                records.append([m.partition(), m.offset(), m.value().decode()])
        c.commit(asynchronous=False)
    finally:
        c.close()
    return {"records": records}


def cmd_read(args):
    errors = Errors()
    # group.id is required by the Consumer class even when nothing joins or commits.
    c = Consumer(config(args, error_cb=errors, **{"group.id": "rdkafka-read", "enable.auto.commit": False}))
    try:
        md = c.list_topics(topic=args.topic, timeout=args.timeout)
        parts = sorted(md.topics[args.topic].partitions)
        c.assign([confluent_kafka.TopicPartition(args.topic, p, confluent_kafka.OFFSET_BEGINNING) for p in parts])
        deadline = deadline_of(args)
        values, quiet_since = [], None
        while time.monotonic() < deadline:
            batch = c.consume(num_messages=1000, timeout=0.2)
            for m in batch:
                if m.error() is not None:
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        continue
                    raise Failed(f"consume: {m.error()}")
                values.append(m.value().decode())
            if len(values) >= args.count:
                if batch:
                    quiet_since = None
                elif quiet_since is None:
                    quiet_since = time.monotonic()
                elif time.monotonic() - quiet_since > 1.0:
                    break
    finally:
        c.close()
    return {"values": values}


def cmd_committed(args):
    errors = Errors()
    c = Consumer(config(args, error_cb=errors, **{"group.id": args.group, "enable.auto.commit": False}))
    try:
        tps = [confluent_kafka.TopicPartition(args.topic, p) for p in range(args.partitions)]
        got = c.committed(tps, timeout=args.timeout)
    finally:
        c.close()
    offsets, metadata = {}, {}
    for tp in got:
        if tp.error is not None:
            raise Failed(f"committed {tp.topic}-{tp.partition}: {tp.error}")
        offsets[str(tp.partition)] = tp.offset if tp.offset >= 0 else None
        try:
            metadata[str(tp.partition)] = tp.metadata
        except UnicodeDecodeError as e:
            # Seen with the 2.16 wheel for offsets committed by TxnOffsetCommit from another
            # client, while Java reads the same metadata intact: reported, not fatal.
            metadata[str(tp.partition)] = f"<undecodable: {e}>"
    return {"offsets": offsets, "metadata": metadata}


def cmd_group(args):
    errors = Errors()

    def assigned(_consumer, partitions):
        listed = ",".join(str(tp.partition) for tp in sorted(partitions, key=lambda tp: tp.partition))
        print(f"# assigned partitions={listed}", flush=True)

    conf = config(
        args,
        error_cb=errors,
        **{"group.id": args.group, "auto.offset.reset": "earliest", "enable.auto.commit": False},
    )
    c = Consumer(conf)
    c.subscribe([args.topic], on_assign=assigned)
    deadline = deadline_of(args)
    try:
        while time.monotonic() < deadline:
            for m in c.consume(num_messages=100, timeout=0.2):
                if m.error() is not None:
                    print(f"# error {m.error()}", flush=True)
                    continue
                print(f"{m.partition()} {m.offset()} {m.value().decode()}", flush=True)
    finally:
        c.close()
    return {"stopped": "timeout"}


def cmd_bench_consume(args):
    errors = Errors()
    c = group_consumer(args, errors)
    deadline = deadline_of(args)
    got = nbytes = first = 0
    started = None
    try:
        while got < args.count:
            if time.monotonic() > deadline:
                raise Failed(f"{got} of {args.count} records after {args.timeout}s; errors: {errors.seen}")
            batch = c.consume(num_messages=args.batch, timeout=1.0)
            for m in batch:
                if m.error() is not None:
                    raise Failed(f"consume: {m.error()}")
                nbytes += len(m.value())
            got += len(batch)
            if started is None and batch:
                started, first = time.monotonic(), got
        elapsed = time.monotonic() - started
    finally:
        c.close()
    timed = max(got - first, 1)
    return {"records": got, "bytes": nbytes, "seconds": elapsed * got / timed, "first_batch": first}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)

    def command(name, *positional, timeout=30.0):
        p = sub.add_parser(name)
        for arg, kind in positional:
            p.add_argument(arg, type=kind)
        p.add_argument("-X", action="append", default=[], metavar="KEY=VALUE")
        p.add_argument("--timeout", type=float, default=timeout)
        return p

    command("version")
    command("metadata", ("bootstrap", str), timeout=20.0).add_argument("--topic")
    command("produce", ("bootstrap", str), ("topic", str), ("partitions", int), ("per_partition", int))
    command(
        "produce-transactions", ("bootstrap", str), ("topic", str), ("id_a", str), ("id_b", str), ("prefix", str)
    )
    command("consume", ("bootstrap", str), ("topic", str), ("group", str), ("count", int), timeout=60.0)
    command("read", ("bootstrap", str), ("topic", str), ("count", int))
    command("committed", ("bootstrap", str), ("topic", str), ("group", str), ("partitions", int))
    command("group", ("bootstrap", str), ("topic", str), ("group", str), timeout=3600.0)
    bench = command(
        "bench-consume", ("bootstrap", str), ("topic", str), ("group", str), ("count", int), timeout=300.0
    )
    bench.add_argument("--batch", type=int, default=10000)
    args = ap.parse_args()
    run = globals()["cmd_" + args.command.replace("-", "_")]
    try:
        out, status = run(args), 0
    except Failed as e:
        out, status = {"error": str(e)}, 1
    print(json.dumps(out))
    sys.stdout.flush()
    sys.exit(status)


if __name__ == "__main__":
    main()
