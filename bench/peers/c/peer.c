/* librdkafka peer for scripts/bench-peers: produce, consume or measure end-to-end latency, and
 * print one JSON line. Usage:
 *   peer produce BOOTSTRAP TOPIC RECORDS SIZE [-X key=value]...
 *   peer consume BOOTSTRAP TOPIC RECORDS SIZE [-X key=value]...
 *   peer latency BOOTSTRAP TOPIC RATE SECONDS SIZE [-X key=value]...
 *   peer produce-txn BOOTSTRAP TOPIC RECORDS SIZE [-X key=value]...
 *   peer ctp BOOTSTRAP INPUT OUTPUT GROUP RECORDS [-X key=value]...
 *   peer version
 * -X sets a librdkafka property on the producer (produce, latency) or consumer (consume);
 * everything else is librdkafka's default, except acks=all. produce-txn sends in transactions
 * (transactional.id), each committed once 100 ms passed since it began; ctp reads RECORDS records
 * of INPUT in GROUP (isolation.level=read_committed) and writes each, reversed, to OUTPUT in such
 * transactions with rd_kafka_send_offsets_to_transaction. Both print commit p50/p99. */
#include <librdkafka/rdkafka.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static double cpu(void) {
	struct rusage u;
	getrusage(RUSAGE_SELF, &u);
	return u.ru_utime.tv_sec + u.ru_utime.tv_usec / 1e6 + u.ru_stime.tv_sec + u.ru_stime.tv_usec / 1e6;
}

static void die(const char *what, const char *why) {
	fprintf(stderr, "peer-c: %s: %s\n", what, why);
	exit(1);
}

/* Values as every peer makes them: a 16-letter alphabet drawn by xorshift64, so lz4 has work
 * but no long repeats; a pool of up to 65,536 values is cycled (a batch never sees one twice). */
static char *pool(size_t n, size_t size) {
	char *p = malloc(n * size);
	unsigned long long x = 0x9e3779b97f4a7c15ULL;
	for (size_t i = 0; i < n * size; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		p[i] = "abcdefghijklmnop"[x & 15];
	}
	return p;
}

static char **xs;
static int nx;

static rd_kafka_conf_t *conf(const char *bootstrap, int producer) {
	rd_kafka_conf_t *c = rd_kafka_conf_new();
	char err[512];
	if (rd_kafka_conf_set(c, "bootstrap.servers", bootstrap, err, sizeof err) ||
	    (producer && rd_kafka_conf_set(c, "acks", "all", err, sizeof err)))
		die("conf", err);
	for (int i = 0; i < nx; i++) {
		char kv[512], *eq;
		snprintf(kv, sizeof kv, "%s", xs[i]);
		if (!(eq = strchr(kv, '=')))
			die("-X", "expected key=value");
		*eq = 0;
		if (rd_kafka_conf_set(c, kv, eq + 1, err, sizeof err))
			die(kv, err);
	}
	return c;
}

/* The settings that decide the rows, as librdkafka resolved them. */
static void settings(rd_kafka_conf_t *c, const char **keys, char *out, size_t len) {
	size_t at = 0;
	for (; *keys; keys++) {
		char v[256];
		size_t vl = sizeof v;
		if (rd_kafka_conf_get(c, *keys, v, &vl) != RD_KAFKA_CONF_OK)
			snprintf(v, sizeof v, "?");
		at += snprintf(out + at, len - at, "%s\"%s\":\"%s\"", at ? "," : "", *keys, v);
	}
}

static const char *pkeys[] = {"acks", "batch.size", "batch.num.messages", "linger.ms", "compression.type", NULL};
static const char *ckeys[] = {"fetch.wait.max.ms", "fetch.min.bytes", "queued.min.messages", "fetch.queue.backoff.ms", NULL};
static long delivered, failed;

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
	(void)rk, (void)opaque;
	if (m->err)
		failed++;
	else
		delivered++;
}

static rd_kafka_t *producer(const char *bootstrap, char *set, size_t len) {
	rd_kafka_conf_t *c = conf(bootstrap, 1);
	char err[512];
	rd_kafka_conf_set_dr_msg_cb(c, on_delivery);
	settings(c, pkeys, set, len);
	rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, c, err, sizeof err);
	if (!rk)
		die("producer", err);
	return rk;
}

static void send1(rd_kafka_t *rk, const char *topic, const void *v, size_t len) {
	rd_kafka_resp_err_t e;
	while ((e = rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_VALUE((void *)v, len),
	                              RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END)) ==
	       RD_KAFKA_RESP_ERR__QUEUE_FULL)
		rd_kafka_poll(rk, 1); /* the queue's limit: wait for deliveries, as an application would */
	if (e)
		die("produce", rd_kafka_err2str(e));
}

/* A consumer of every partition of TOPIC from the beginning (no group membership). */
static rd_kafka_t *consumer(const char *bootstrap, const char *topic, char *set, size_t len) {
	rd_kafka_conf_t *c = conf(bootstrap, 0);
	char err[512], group[64];
	snprintf(group, sizeof group, "peer-c-%ld", (long)time(NULL) ^ (long)getpid());
	rd_kafka_conf_set(c, "group.id", group, err, sizeof err); /* required, never joined */
	rd_kafka_conf_set(c, "enable.auto.commit", "false", err, sizeof err);
	settings(c, ckeys, set, len);
	rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, c, err, sizeof err);
	if (!rk)
		die("consumer", err);
	rd_kafka_topic_t *t = rd_kafka_topic_new(rk, topic, NULL);
	const struct rd_kafka_metadata *md;
	rd_kafka_resp_err_t e = rd_kafka_metadata(rk, 0, t, &md, 10000);
	if (e || md->topic_cnt != 1 || md->topics[0].err)
		die("metadata", rd_kafka_err2str(e ? e : md->topics[0].err));
	rd_kafka_topic_partition_list_t *parts = rd_kafka_topic_partition_list_new(md->topics[0].partition_cnt);
	for (int i = 0; i < md->topics[0].partition_cnt; i++)
		rd_kafka_topic_partition_list_add(parts, topic, md->topics[0].partitions[i].id)->offset =
		    RD_KAFKA_OFFSET_BEGINNING;
	rd_kafka_metadata_destroy(md);
	rd_kafka_topic_destroy(t);
	if ((e = rd_kafka_assign(rk, parts)))
		die("assign", rd_kafka_err2str(e));
	rd_kafka_topic_partition_list_destroy(parts);
	return rk;
}

struct lat {
	rd_kafka_t *rk;
	long want, got;
	volatile int ready;
	double *lat, t0, deadline;
};

/* Reads until the warm-up record has come (then ready), and then `want` timed records. */
static void *reader(void *arg) {
	struct lat *l = arg;
	while (l->got < l->want && now() < l->deadline) {
		rd_kafka_message_t *m = rd_kafka_consumer_poll(l->rk, 100);
		if (!m)
			continue;
		if (!m->err && m->len > 0 && ((char *)m->payload)[0] == 'w')
			l->ready = 1;
		else if (!m->err && m->len >= 20)
			l->lat[l->got++] = now() - l->t0 - strtod(m->payload, NULL) / 1e9;
		rd_kafka_message_destroy(m);
	}
	return NULL;
}

static int cmp(const void *a, const void *b) {
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* How long a transaction stays open before it is committed, and each transactional call's bound. */
#define TXN_PERIOD 0.1
#define TXN_CALL_MS 60000

static void check(const char *what, rd_kafka_error_t *e) {
	if (e)
		die(what, rd_kafka_error_string(e));
}

static double quantile(const double *sorted, long n, int pct) {
	return n ? sorted[(n * pct + 99) / 100 - 1] : 0;
}

/* A transactional producer (transactional.id PREFIX-<pid>), initialized. */
static rd_kafka_t *txn_producer(const char *bootstrap, const char *prefix, char *set, size_t len) {
	rd_kafka_conf_t *c = conf(bootstrap, 1);
	char err[512], id[64];
	snprintf(id, sizeof id, "%s-%ld", prefix, (long)getpid());
	if (rd_kafka_conf_set(c, "transactional.id", id, err, sizeof err))
		die("transactional.id", err);
	rd_kafka_conf_set_dr_msg_cb(c, on_delivery);
	settings(c, pkeys, set, len);
	rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, c, err, sizeof err);
	if (!rk)
		die("producer", err);
	check("init_transactions", rd_kafka_init_transactions(rk, TXN_CALL_MS));
	return rk;
}

int main(int argc, char **argv) {
	if (argc == 2 && !strcmp(argv[1], "version")) {
		printf("librdkafka %s\n", rd_kafka_version_str());
		return 0;
	}
	if (argc < 6)
		die("usage", "peer produce|consume|latency BOOTSTRAP TOPIC ... [-X key=value]...");
	const char *mode = argv[1], *bootstrap = argv[2], *topic = argv[3];
	int fixed = strcmp(mode, "latency") && strcmp(mode, "ctp") ? 6 : 7;
	xs = calloc(argc, sizeof *xs);
	for (int i = fixed; i + 1 < argc; i += 2)
		xs[nx++] = argv[i + 1];
	char set[1024], client[64];
	snprintf(client, sizeof client, "librdkafka %s", rd_kafka_version_str());
	if (!strcmp(mode, "produce")) {
		long n = atol(argv[4]), size = atol(argv[5]), np = n < 65536 ? n : 65536;
		char *values = pool(np, size);
		rd_kafka_t *rk = producer(bootstrap, set, sizeof set);
		send1(rk, topic, "warm-up", 7); /* metadata and connections first, outside the figure */
		rd_kafka_flush(rk, 60000);
		delivered = 0;
		double t = now(), c = cpu();
		for (long i = 0; i < n; i++)
			send1(rk, topic, values + (i % np) * size, size);
		if (rd_kafka_flush(rk, 120000) || failed || delivered != n)
			die("flush", "not every record was delivered");
		t = now() - t, c = cpu() - c;
		printf("{\"client\":\"%s\",\"mode\":\"produce\",\"records\":%ld,\"bytes\":%ld,\"seconds\":%.4f,"
		       "\"cpu_seconds\":%.3f,\"settings\":{%s}}\n",
		       client, n, n * size, t, c, set);
		rd_kafka_destroy(rk);
	} else if (!strcmp(mode, "consume")) {
		long n = atol(argv[4]), got = 0, bytes = 0;
		double t = now(), c = cpu();
		rd_kafka_t *rk = consumer(bootstrap, topic, set, sizeof set);
		while (got < n) {
			rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 1000);
			if (m && !m->err)
				got++, bytes += m->len;
			if (m)
				rd_kafka_message_destroy(m);
		}
		t = now() - t, c = cpu() - c;
		printf("{\"client\":\"%s\",\"mode\":\"consume\",\"records\":%ld,\"bytes\":%ld,\"seconds\":%.4f,"
		       "\"cpu_seconds\":%.3f,\"settings\":{%s}}\n",
		       client, got, bytes, t, c, set);
		rd_kafka_consumer_close(rk);
		rd_kafka_destroy(rk);
	} else if (!strcmp(mode, "latency")) {
		double rate = atof(argv[4]), secs = atof(argv[5]);
		long size = atol(argv[6]), n = (long)(rate * secs);
		char cset[512], *v = pool(1, size < 20 ? 20 : size);
		struct lat l = {.want = n, .lat = calloc(n + 1, sizeof(double)), .t0 = now()};
		l.deadline = l.t0 + secs + 60;
		rd_kafka_t *rk = producer(bootstrap, set, sizeof set);
		l.rk = consumer(bootstrap, topic, cset, sizeof cset);
		pthread_t th;
		pthread_create(&th, NULL, reader, &l);
		send1(rk, topic, "warm-up", 7);
		rd_kafka_flush(rk, 60000);
		while (!l.ready && now() < l.deadline)
			rd_kafka_poll(rk, 10);
		double start = now(), c = cpu();
		for (long i = 0; i < n; i++) {
			double due = start + i / rate, wait;
			while ((wait = due - now()) > 0)
				rd_kafka_poll(rk, (int)(wait * 1000) + 1 > 10 ? 10 : (int)(wait * 1000) + 1);
			snprintf(v, 21, "%020.0f", (now() - l.t0) * 1e9);
			v[20] = 'x';
			send1(rk, topic, v, size < 20 ? 20 : size);
			rd_kafka_poll(rk, 0);
		}
		rd_kafka_flush(rk, 60000);
		pthread_join(th, NULL);
		c = cpu() - c;
		qsort(l.lat, l.got, sizeof(double), cmp);
		long i50 = l.got ? (l.got * 50 + 99) / 100 - 1 : 0, i99 = l.got ? (l.got * 99 + 99) / 100 - 1 : 0;
		printf("{\"client\":\"%s\",\"mode\":\"latency\",\"records\":%ld,\"rate\":%.0f,\"p50_ms\":%.3f,"
		       "\"p99_ms\":%.3f,\"max_ms\":%.3f,\"cpu_seconds\":%.3f,\"settings\":{%s}}\n",
		       client, l.got, rate, l.lat[i50] * 1e3, l.lat[i99] * 1e3, l.got ? l.lat[l.got - 1] * 1e3 : 0, c,
		       set);
		if (l.got < n)
			die("latency", "not every record arrived");
		rd_kafka_destroy(rk);
		rd_kafka_consumer_close(l.rk);
		rd_kafka_destroy(l.rk);
	} else if (!strcmp(mode, "produce-txn")) {
		long n = atol(argv[4]), size = atol(argv[5]), np = n < 65536 ? n : 65536;
		char *values = pool(np, size);
		rd_kafka_t *rk = txn_producer(bootstrap, "peer-c", set, sizeof set);
		/* Metadata, connections and the first AddPartitionsToTxn outside the figure. */
		check("begin", rd_kafka_begin_transaction(rk));
		send1(rk, topic, "warm-up", 7);
		check("commit", rd_kafka_commit_transaction(rk, TXN_CALL_MS));
		delivered = 0;
		double *commits = calloc(n + 1, sizeof(double));
		long txns = 0;
		double t = now(), c = cpu();
		for (long i = 0; i < n;) {
			check("begin", rd_kafka_begin_transaction(rk));
			double began = now();
			for (; i < n && now() - began < TXN_PERIOD; i++) {
				send1(rk, topic, values + (i % np) * size, size);
				rd_kafka_poll(rk, 0);
			}
			double at = now();
			check("commit", rd_kafka_commit_transaction(rk, TXN_CALL_MS));
			commits[txns++] = now() - at;
		}
		t = now() - t, c = cpu() - c;
		if (failed || delivered != n)
			die("produce-txn", "not every record was delivered");
		qsort(commits, txns, sizeof(double), cmp);
		printf("{\"client\":\"%s\",\"mode\":\"produce-txn\",\"records\":%ld,\"bytes\":%ld,\"seconds\":%.4f,"
		       "\"cpu_seconds\":%.3f,\"transactions\":%ld,\"commit_p50_ms\":%.3f,\"commit_p99_ms\":%.3f,"
		       "\"settings\":{%s}}\n",
		       client, n, n * size, t, c, txns, quantile(commits, txns, 50) * 1e3,
		       quantile(commits, txns, 99) * 1e3, set);
		rd_kafka_destroy(rk);
	} else if (!strcmp(mode, "ctp")) {
		const char *output = argv[4], *group = argv[5];
		long n = atol(argv[6]), got = 0, bytes = 0, txns = 0;
		rd_kafka_t *rk = txn_producer(bootstrap, "peer-c-ctp", set, sizeof set);
		rd_kafka_conf_t *cc = rd_kafka_conf_new();
		char err[512];
		if (rd_kafka_conf_set(cc, "bootstrap.servers", bootstrap, err, sizeof err) ||
		    rd_kafka_conf_set(cc, "group.id", group, err, sizeof err) ||
		    rd_kafka_conf_set(cc, "enable.auto.commit", "false", err, sizeof err) ||
		    rd_kafka_conf_set(cc, "auto.offset.reset", "earliest", err, sizeof err) ||
		    rd_kafka_conf_set(cc, "isolation.level", "read_committed", err, sizeof err))
			die("consumer conf", err);
		rd_kafka_t *ck = rd_kafka_new(RD_KAFKA_CONSUMER, cc, err, sizeof err);
		if (!ck)
			die("consumer", err);
		rd_kafka_poll_set_consumer(ck);
		rd_kafka_topic_partition_list_t *sub = rd_kafka_topic_partition_list_new(1);
		rd_kafka_topic_partition_list_add(sub, argv[3], RD_KAFKA_PARTITION_UA);
		if (rd_kafka_subscribe(ck, sub))
			die("subscribe", argv[3]);
		rd_kafka_topic_partition_list_destroy(sub);
		double *commits = calloc(n + 1, sizeof(double)), t = 0, c = 0, deadline = now() + 600;
		char *rev = malloc(1 << 20);
		while (got < n) {
			if (now() > deadline)
				die("ctp", "not every record came within 600 s");
			check("begin", rd_kafka_begin_transaction(rk));
			double began = now();
			rd_kafka_topic_partition_list_t *offsets = rd_kafka_topic_partition_list_new(8);
			while (got < n && now() - began < TXN_PERIOD) {
				rd_kafka_message_t *m = rd_kafka_consumer_poll(ck, 20);
				if (!m)
					continue;
				if (!m->err) {
					if (!t)
						t = now(), c = cpu();
					got++, bytes += m->len;
					for (size_t j = 0; j < m->len && j < (1 << 20); j++)
						rev[j] = ((char *)m->payload)[m->len - 1 - j];
					send1(rk, output, rev, m->len);
					const char *tn = rd_kafka_topic_name(m->rkt);
					rd_kafka_topic_partition_t *tp = rd_kafka_topic_partition_list_find(offsets, tn, m->partition);
					if (!tp)
						tp = rd_kafka_topic_partition_list_add(offsets, tn, m->partition);
					tp->offset = m->offset + 1;
				}
				rd_kafka_message_destroy(m);
				rd_kafka_poll(rk, 0);
			}
			if (offsets->cnt) {
				rd_kafka_consumer_group_metadata_t *meta = rd_kafka_consumer_group_metadata(ck);
				check("send_offsets", rd_kafka_send_offsets_to_transaction(rk, offsets, meta, TXN_CALL_MS));
				rd_kafka_consumer_group_metadata_destroy(meta);
			}
			rd_kafka_topic_partition_list_destroy(offsets);
			double at = now();
			check("commit", rd_kafka_commit_transaction(rk, TXN_CALL_MS));
			if (t)
				commits[txns++] = now() - at;
		}
		t = now() - t, c = cpu() - c;
		qsort(commits, txns, sizeof(double), cmp);
		printf("{\"client\":\"%s\",\"mode\":\"ctp\",\"records\":%ld,\"bytes\":%ld,\"seconds\":%.4f,"
		       "\"cpu_seconds\":%.3f,\"transactions\":%ld,\"commit_p50_ms\":%.3f,\"commit_p99_ms\":%.3f,"
		       "\"settings\":{%s,\"isolation.level\":\"read_committed\"}}\n",
		       client, got, bytes, t, c, txns, quantile(commits, txns, 50) * 1e3,
		       quantile(commits, txns, 99) * 1e3, set);
		rd_kafka_destroy(rk);
		rd_kafka_consumer_close(ck);
		rd_kafka_destroy(ck);
	} else
		die("mode", mode);
	return 0;
}
