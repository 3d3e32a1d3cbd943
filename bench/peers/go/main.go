// franz-go peer for scripts/bench-peers: produce, consume or measure end-to-end latency, and
// print one JSON line, as the librdkafka, Java and kafka-group peers do.
//
//	peer produce BOOTSTRAP TOPIC RECORDS SIZE [-X key=value]...
//	peer consume BOOTSTRAP TOPIC RECORDS SIZE [-X key=value]...
//	peer latency BOOTSTRAP TOPIC RATE SECONDS SIZE [-X key=value]...
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
	if mode == "latency" {
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
