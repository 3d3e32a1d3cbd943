// franz-go peer for scripts/bench-peers: produce, consume or measure end-to-end latency, and
// print one JSON line, as the librdkafka, Java and kafka-group peers do.
//
//	peer produce BOOTSTRAP TOPIC RECORDS SIZE [-X key=value]...
//	peer consume BOOTSTRAP TOPIC RECORDS SIZE [-X key=value]...
//	peer latency BOOTSTRAP TOPIC RATE SECONDS SIZE [-X key=value]...
//	peer produce-txn BOOTSTRAP TOPIC RECORDS SIZE [-X key=value]...
//	peer ctp BOOTSTRAP INPUT OUTPUT GROUP RECORDS [-X key=value]...
//
// produce-txn sends in transactions (kgo.TransactionalID), each committed once 100 ms passed
// since it began; ctp reads RECORDS records of INPUT in GROUP (read_committed) with a
// GroupTransactSession and writes each, reversed, to OUTPUT, ending a transaction (with the
// offsets) every 100 ms. Both print the commit latencies' p50 and p99.
//
// -X takes batch.size, linger.ms and compression.type, mapped to franz-go's options; everything
// else is franz-go's default (which is acks=all, idempotent, snappy, 10 ms linger, 1 MB batches).
package main

import (
	"context"
	"fmt"
	"os"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func die(what string, err any) {
	fmt.Fprintf(os.Stderr, "peer-go: %s: %v\n", what, err)
	os.Exit(1)
}

func cpu() float64 {
	var u syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &u)
	return float64(u.Utime.Sec+u.Stime.Sec) + float64(u.Utime.Usec+u.Stime.Usec)/1e6
}

// pool makes values as every peer does: a 16-letter alphabet drawn by xorshift64, so lz4 has
// work but no long repeats; up to 65,536 values are cycled (a batch never sees one twice).
func pool(n, size int) [][]byte {
	x := uint64(0x9e3779b97f4a7c15)
	out := make([][]byte, n)
	for i := range out {
		out[i] = make([]byte, size)
		for j := range out[i] {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			out[i][j] = "abcdefghijklmnop"[x&15]
		}
	}
	return out
}

// codec is the compression.type given with -X: franz-go has no getter for its codecs.
var codec = "snappy,none (default)"

// producerOpts maps -X overrides onto franz-go options.
func producerOpts(xs []string) []kgo.Opt {
	opts := []kgo.Opt{kgo.RequiredAcks(kgo.AllISRAcks())}
	for _, kv := range xs {
		k, v, ok := strings.Cut(kv, "=")
		n, err := strconv.Atoi(v)
		switch {
		case !ok:
			die("-X", "expected key=value")
		case k == "batch.size" && err == nil:
			opts = append(opts, kgo.ProducerBatchMaxBytes(int32(n)))
		case k == "linger.ms" && err == nil:
			opts = append(opts, kgo.ProducerLinger(time.Duration(n)*time.Millisecond))
		case k == "compression.type":
			c := map[string]kgo.CompressionCodec{"none": kgo.NoCompression(), "gzip": kgo.GzipCompression(),
				"snappy": kgo.SnappyCompression(), "lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression()}
			cc, known := c[v]
			if !known {
				die("compression.type", v)
			}
			codec = v
			opts = append(opts, kgo.ProducerBatchCompression(cc))
		default:
			die("-X", kv)
		}
	}
	return opts
}

// settings are the producer settings a row changes, as the client resolved them.
func settings(cl *kgo.Client) string {
	batch := cl.OptValue(kgo.ProducerBatchMaxBytesFn).(func(string) int32)("")
	return fmt.Sprintf(`"acks":"all","batch.size":"%d","linger.ms":"%d","compression.type":"%s"`,
		batch, cl.OptValue(kgo.ProducerLinger).(time.Duration).Milliseconds(), codec)
}

func newClient(bootstrap string, opts ...kgo.Opt) *kgo.Client {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(bootstrap)}, opts...)...)
	if err != nil {
		die("client", err)
	}
	return cl
}

// A consumer of every partition of the topic from the start, without a group.
func consumer(bootstrap, topic string) *kgo.Client {
	return newClient(bootstrap, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
}

func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/twmb/franz-go" {
				return "franz-go " + d.Version
			}
		}
	}
	return "franz-go"
}

func main() {
	if len(os.Args) < 6 {
		die("usage", "peer produce|consume|latency BOOTSTRAP TOPIC ... [-X key=value]...")
	}
	mode, bootstrap, topic := os.Args[1], os.Args[2], os.Args[3]
	num := func(i int) float64 {
		f, err := strconv.ParseFloat(os.Args[i], 64)
		if err != nil {
			die("argument", err)
		}
		return f
	}
	fixed := 6
	if mode == "latency" || mode == "ctp" {
		fixed = 7
	}
	var xs []string
	for i := fixed; i+1 < len(os.Args); i += 2 {
		xs = append(xs, os.Args[i+1])
	}
	ctx := context.Background()
	name := version()
	switch mode {
	case "produce":
		n, size := int(num(4)), int(num(5))
		values := pool(min(n, 65536), size)
		cl := newClient(bootstrap, producerOpts(xs)...)
		// Metadata and connections first, outside the figure.
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("warm-up")}).FirstErr(); err != nil {
			die("produce", err)
		}
		failed := make(chan error, 1)
		t, c := time.Now(), cpu()
		for i := 0; i < n; i++ {
			cl.Produce(ctx, &kgo.Record{Topic: topic, Value: values[i%len(values)]}, func(_ *kgo.Record, err error) {
				if err != nil {
					select {
					case failed <- err:
					default:
					}
				}
			})
		}
		if err := cl.Flush(ctx); err != nil {
			die("flush", err)
		}
		secs, cs := time.Since(t).Seconds(), cpu()-c
		select {
		case err := <-failed:
			die("produce", err)
		default:
		}
		fmt.Printf(`{"client":"%s","mode":"produce","records":%d,"bytes":%d,"seconds":%.4f,"cpu_seconds":%.3f,"settings":{%s}}`+"\n",
			name, n, n*size, secs, cs, settings(cl))
		cl.Close()
	case "consume":
		n := int(num(4))
		t, c := time.Now(), cpu()
		cl := consumer(bootstrap, topic)
		got, bytes := 0, 0
		for got < n {
			fs := cl.PollFetches(ctx)
			if err := fs.Err(); err != nil {
				die("poll", err)
			}
			fs.EachRecord(func(r *kgo.Record) { got++; bytes += len(r.Value) })
		}
		secs, cs := time.Since(t).Seconds(), cpu()-c
		fmt.Printf(`{"client":"%s","mode":"consume","records":%d,"bytes":%d,"seconds":%.4f,"cpu_seconds":%.3f,"settings":{"fetch.max.wait.ms":"%d","fetch.max.bytes":"%d"}}`+"\n",
			name, got, bytes, secs, cs, cl.OptValue(kgo.FetchMaxWait).(time.Duration).Milliseconds(), cl.OptValue(kgo.FetchMaxBytes))
		cl.Close()
	case "latency":
		latency(ctx, name, bootstrap, topic, num(4), num(5), int(num(6)), xs)
	case "produce-txn":
		produceTxn(ctx, name, bootstrap, topic, int(num(4)), int(num(5)), xs)
	case "ctp":
		ctp(ctx, name, bootstrap, topic, os.Args[4], os.Args[5], int(num(6)), xs)
	default:
		die("mode", mode)
	}
}

// latency sends rate records a second for secs seconds, each value starting with its send time
// (20 digits of nanoseconds since t0), while a goroutine reads them back.
func latency(ctx context.Context, name, bootstrap, topic string, rate, secs float64, size int, xs []string) {
	n := int(rate * secs)
	t0 := time.Now()
	ready, done := make(chan struct{}), make(chan []float64)
	cons := consumer(bootstrap, topic)
	go func() {
		lat, seen := make([]float64, 0, n), false
		pctx, cancel := context.WithDeadline(ctx, t0.Add(time.Duration((secs+60)*float64(time.Second))))
		defer cancel()
		for len(lat) < n && pctx.Err() == nil {
			cons.PollFetches(pctx).EachRecord(func(r *kgo.Record) {
				if len(r.Value) > 0 && r.Value[0] == 'w' {
					if !seen {
						seen = true
						close(ready)
					}
				} else if sent, err := strconv.ParseFloat(string(r.Value[:min(20, len(r.Value))]), 64); err == nil {
					lat = append(lat, time.Since(t0).Seconds()-sent/1e9)
				}
			})
		}
		done <- lat
	}()
	cl := newClient(bootstrap, producerOpts(xs)...)
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("warm-up")}).FirstErr(); err != nil {
		die("produce", err)
	}
	<-ready
	start, c := time.Now(), cpu()
	pad := strings.Repeat("x", max(0, size-20))
	for i := 0; i < n; i++ {
		time.Sleep(time.Until(start.Add(time.Duration(float64(i) / rate * float64(time.Second)))))
		v := fmt.Sprintf("%020d%s", time.Since(t0).Nanoseconds(), pad)
		cl.Produce(ctx, &kgo.Record{Topic: topic, Value: []byte(v)}, nil)
	}
	cl.Flush(ctx)
	lat := <-done
	cs := cpu() - c
	sort.Float64s(lat)
	q := func(p float64) float64 {
		if len(lat) == 0 {
			return 0
		}
		i := int(float64(len(lat))*p+0.999999) - 1
		return lat[max(0, min(i, len(lat)-1))] * 1e3
	}
	fmt.Printf(`{"client":"%s","mode":"latency","records":%d,"rate":%.0f,"p50_ms":%.3f,"p99_ms":%.3f,"max_ms":%.3f,"cpu_seconds":%.3f,"settings":{%s}}`+"\n",
		name, len(lat), rate, q(0.5), q(0.99), q(1), cs, settings(cl))
	if len(lat) < n {
		die("latency", "not every record arrived")
	}
	cl.Close()
	cons.Close()
}

// txnPeriod is how long a transaction stays open before it is committed.
const txnPeriod = 100 * time.Millisecond

// p50p99 in ms of durations.
func p50p99(d []time.Duration) (float64, float64) {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	q := func(p float64) float64 {
		if len(d) == 0 {
			return 0
		}
		i := int(float64(len(d))*p+0.999999) - 1
		return float64(d[max(i, 0)].Microseconds()) / 1e3
	}
	return q(0.5), q(0.99)
}

func produceTxn(ctx context.Context, name, bootstrap, topic string, n, size int, xs []string) {
	values := pool(min(n, 65536), size)
	opts := append(producerOpts(xs), kgo.TransactionalID(fmt.Sprintf("peer-go-%d", os.Getpid())))
	cl := newClient(bootstrap, opts...)
	failed := make(chan error, 1)
	onErr := func(_ *kgo.Record, err error) {
		if err != nil {
			select {
			case failed <- err:
			default:
			}
		}
	}
	end := func() {
		if err := cl.Flush(ctx); err != nil {
			die("flush", err)
		}
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			die("commit", err)
		}
	}
	// Metadata, connections and the first AddPartitionsToTxn outside the figure.
	if err := cl.BeginTransaction(); err != nil {
		die("begin", err)
	}
	cl.Produce(ctx, &kgo.Record{Topic: topic, Value: []byte("warm-up")}, onErr)
	end()
	var commits []time.Duration
	t, c := time.Now(), cpu()
	for i := 0; i < n; {
		if err := cl.BeginTransaction(); err != nil {
			die("begin", err)
		}
		began := time.Now()
		for ; i < n && time.Since(began) < txnPeriod; i++ {
			cl.Produce(ctx, &kgo.Record{Topic: topic, Value: values[i%len(values)]}, onErr)
		}
		at := time.Now()
		end()
		commits = append(commits, time.Since(at))
	}
	secs, cs := time.Since(t).Seconds(), cpu()-c
	select {
	case err := <-failed:
		die("produce", err)
	default:
	}
	p50, p99 := p50p99(commits)
	fmt.Printf(`{"client":"%s","mode":"produce-txn","records":%d,"bytes":%d,"seconds":%.4f,"cpu_seconds":%.3f,"transactions":%d,"commit_p50_ms":%.3f,"commit_p99_ms":%.3f,"settings":{%s}}`+"\n",
		name, n, n*size, secs, cs, len(commits), p50, p99, settings(cl))
	cl.Close()
}

func ctp(ctx context.Context, name, bootstrap, input, output, group string, n int, xs []string) {
	opts := append(producerOpts(xs),
		kgo.SeedBrokers(bootstrap),
		kgo.TransactionalID(fmt.Sprintf("peer-go-ctp-%d", os.Getpid())),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(input),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequireStableFetchOffsets(),
		kgo.DefaultProduceTopic(output),
	)
	sess, err := kgo.NewGroupTransactSession(opts...)
	if err != nil {
		die("session", err)
	}
	var commits []time.Duration
	got, bytes := 0, 0
	var t time.Time
	var c float64
	deadline := time.Now().Add(600 * time.Second)
	for got < n {
		if time.Now().After(deadline) {
			die("ctp", fmt.Sprintf("%d of %d records in 600 s", got, n))
		}
		if err := sess.Begin(); err != nil {
			die("begin", err)
		}
		began := time.Now()
		for got < n && time.Since(began) < txnPeriod {
			pctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
			fs := sess.PollFetches(pctx)
			cancel()
			fs.EachError(func(_ string, _ int32, err error) {
				if err != context.DeadlineExceeded {
					die("poll", err)
				}
			})
			fs.EachRecord(func(r *kgo.Record) {
				if t.IsZero() {
					t, c = time.Now(), cpu()
				}
				got++
				bytes += len(r.Value)
				v := make([]byte, len(r.Value))
				for i := range v {
					v[i] = r.Value[len(v)-1-i]
				}
				sess.Produce(ctx, &kgo.Record{Value: v}, func(_ *kgo.Record, err error) {
					if err != nil {
						die("produce", err)
					}
				})
			})
		}
		at := time.Now()
		committed, err := sess.End(ctx, kgo.TryCommit)
		if err != nil || !committed {
			die("commit", fmt.Sprintf("committed=%v: %v", committed, err))
		}
		if !t.IsZero() {
			commits = append(commits, time.Since(at))
		}
	}
	secs, cs := time.Since(t).Seconds(), cpu()-c
	p50, p99 := p50p99(commits)
	fmt.Printf(`{"client":"%s","mode":"ctp","records":%d,"bytes":%d,"seconds":%.4f,"cpu_seconds":%.3f,"transactions":%d,"commit_p50_ms":%.3f,"commit_p99_ms":%.3f,"settings":{%s,"isolation.level":"read_committed"}}`+"\n",
		name, got, bytes, secs, cs, len(commits), p50, p99, settings(sess.Client()))
	sess.Close()
}
