// Command franzgo-eos is an eos processor of the project's client contract
// (docs/client-contract.md) on franz-go: a consume-transform-produce loop through
// kgo.GroupTransactSession, franz-go's own recommendation for exactly-once, which commits the
// polled offsets in the transaction with the group's generation and member id (KIP-447),
// aborts a transaction that a revocation overtook, and rewinds to the committed offsets.
//
// What it implements of the contract: variants eos and read-uncommitted (broken on purpose:
// it reads aborted data), the classic group protocol, deliberate
// aborts, the zombie signal, hook points and arm-file moments (kill, stop, abort). What it
// refuses with exit status 2: the other broken variants, the consumer group protocol and client
// settings it does not know.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"os/signal"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	exitOK          = 0
	exitBadConfig   = 2
	exitFenced      = 3
	exitFatal       = 4
	exitUncertain   = 5
	exitOrphaned    = 7
	exitHook        = 70
	outputPrefix    = "out-"
	clientName      = "franz-go"
	franzGoModule   = "github.com/twmb/franz-go"
	defaultTxnSize  = 50
	defaultInterval = 200
)

// Config is ProcessorConfig (workloads/eos/config.py) as JSON; unknown fields are refused.
type Config struct {
	Instance             int64             `json:"instance"`
	Slot                 int64             `json:"slot"`
	Bootstrap            string            `json:"bootstrap"`
	InputTopic           string            `json:"input_topic"`
	OutputTopic          string            `json:"output_topic"`
	OutputPartitions     int32             `json:"output_partitions"`
	GroupID              string            `json:"group_id"`
	HistoryPath          string            `json:"history_path"`
	TxnIDPrefix          string            `json:"txn_id_prefix"`
	Variant              string            `json:"variant"`
	TxnIDStrategy        string            `json:"txn_id_strategy"`
	TxnSize              int               `json:"txn_size"`
	CommitIntervalMS     int64             `json:"commit_interval_ms"`
	AbortProbability     float64           `json:"abort_probability"`
	Seed                 int64             `json:"seed"`
	TransactionTimeoutMS int64             `json:"transaction_timeout_ms"`
	SessionTimeoutMS     int64             `json:"session_timeout_ms"`
	GroupProtocol        string            `json:"group_protocol"`
	ClientConfig         map[string]string `json:"client_config"`
	TxnDelayMS           int64             `json:"txn_delay_ms"`
	CallTimeoutS         float64           `json:"call_timeout_s"`
	RecordHistory        *bool             `json:"record_history"`
	Hook                 map[string]any    `json:"hook"`
	Security             *Security         `json:"security"`
	Meta                 map[string]any    `json:"meta"`
	raw                  map[string]any
}

// clientSettings are the --client-config keys this processor takes.
var clientSettings = map[string]string{
	"log.level": "franz-go's log level on stderr: debug, info, warn or error",
}

func parseConfig(args []string) (*Config, error) {
	if len(args) != 2 || args[0] != "--config" {
		return nil, errors.New("usage: franzgo-eos --config JSON")
	}
	cfg := &Config{TxnIDPrefix: "eos", Variant: "eos", TxnIDStrategy: "unique",
		TxnSize: defaultTxnSize, CommitIntervalMS: defaultInterval,
		TransactionTimeoutMS: 10000, SessionTimeoutMS: 10000, GroupProtocol: "classic",
		CallTimeoutS: 30}
	dec := json.NewDecoder(bytes.NewReader([]byte(args[1])))
	dec.DisallowUnknownFields()
	if err := dec.Decode(cfg); err != nil {
		return nil, fmt.Errorf("bad --config: %v", err)
	}
	_ = json.Unmarshal([]byte(args[1]), &cfg.raw)
	switch {
	case cfg.HistoryPath == "" || cfg.Bootstrap == "" || cfg.InputTopic == "" ||
		cfg.OutputTopic == "" || cfg.GroupID == "":
		return nil, errors.New("bootstrap, input_topic, output_topic, group_id and history_path are required")
	case cfg.OutputPartitions < 1:
		return nil, errors.New("output_partitions must be at least 1")
	case cfg.Variant != "eos" && cfg.Variant != "read-uncommitted":
		return nil, fmt.Errorf("variant %q: franz-go's processor implements only eos and read-uncommitted", cfg.Variant)
	case cfg.GroupProtocol != "classic":
		return nil, fmt.Errorf("group_protocol %q: franz-go's processor runs only the classic protocol", cfg.GroupProtocol)
	case cfg.TxnIDStrategy != "unique" && cfg.TxnIDStrategy != "static":
		return nil, fmt.Errorf("txn_id_strategy %q: must be unique or static", cfg.TxnIDStrategy)
	case cfg.TxnSize < 1:
		return nil, errors.New("txn_size must be at least 1")
	}
	for k := range cfg.ClientConfig {
		if _, ok := clientSettings[k]; !ok {
			return nil, fmt.Errorf("client_config %q: not a setting of franz-go's processor (it takes: log.level)", k)
		}
	}
	return cfg, nil
}

func (c *Config) transactionalID() string {
	if c.TxnIDStrategy == "static" {
		return fmt.Sprintf("%s-slot-%d", c.TxnIDPrefix, c.Slot)
	}
	return fmt.Sprintf("%s-p%d", c.TxnIDPrefix, c.Instance)
}

// exit ends the loop with a status and the reason the exit op records.
type exit struct {
	code   int
	reason string
}

func warn(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "%s %s\n", time.Now().UTC().Format("15:04:05.000"), fmt.Sprintf(format, a...))
}

// errInfo describes a client error as the history's error object does.
func errInfo(err error, stage string) map[string]any {
	code := "CLIENT_ERROR"
	retriable := false
	var ke *kerr.Error
	switch {
	case errors.As(err, &ke):
		code, retriable = ke.Message, ke.Retriable
	case errors.Is(err, context.DeadlineExceeded):
		code = "_TIMED_OUT"
	case errors.Is(err, kgo.ErrClientClosed):
		code = "CLIENT_CLOSED"
	}
	fenced := isFencedCode(code)
	return map[string]any{"stage": stage, "code": code, "message": err.Error(),
		"fatal": fenced, "abortable": !fenced, "retriable": retriable}
}

func isFencedCode(code string) bool {
	return code == "PRODUCER_FENCED" || code == "INVALID_PRODUCER_EPOCH" ||
		code == "TRANSACTIONAL_ID_NOT_FOUND"
}

type processor struct {
	cfg      *Config
	tid      string
	rec      *History
	arm      *ArmFile
	sess     *kgo.GroupTransactSession
	cl       *kgo.Client
	rng      *rand.Rand
	delayRng *rand.Rand
	parent   int

	txnMu       sync.Mutex
	inTxn       int64            // the transaction in flight (0: none)
	starting    bool             // start in flight: the session joins the group meanwhile
	started     bool             // start completed ok
	pending     []map[string]any // callbacks that ran during it
	stopping    atomic.Value     // string: why the loop should end after this transaction
	zombie      atomic.Bool
	hookFired   bool
	seq         int64
	committed   int64
	failed      int64
	callTimeout time.Duration
}

func newProcessor(cfg *Config) (*processor, error) {
	p := &processor{cfg: cfg, tid: cfg.transactionalID(), arm: NewArmFile(cfg.HistoryPath),
		rng: rand.New(rand.NewSource(cfg.Seed)), delayRng: rand.New(rand.NewSource(cfg.Seed ^ 0x5eed)),
		parent: os.Getppid(), callTimeout: time.Duration(cfg.CallTimeoutS * float64(time.Second))}
	path := cfg.HistoryPath
	if cfg.RecordHistory != nil && !*cfg.RecordHistory {
		path = ""
	}
	rec, err := OpenHistory(path, cfg.Instance, map[string]any{
		"workload": "eos", "role": "processor", "instance": cfg.Instance, "slot": cfg.Slot,
		"variant": cfg.Variant, "transactional_id": p.tid, "client": clientName, "config": cfg.raw,
	})
	if err != nil {
		return nil, fmt.Errorf("cannot open history: %v", err)
	}
	p.rec = rec
	return p, nil
}

func sortedParts(m map[string][]int32) []any {
	type tp struct {
		t string
		p int32
	}
	var all []tp
	for t, ps := range m {
		for _, q := range ps {
			all = append(all, tp{t, q})
		}
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].t != all[j].t {
			return all[i].t < all[j].t
		}
		return all[i].p < all[j].p
	})
	out := make([]any, 0, len(all))
	for _, x := range all {
		out = append(out, []any{x.t, x.p})
	}
	return out
}

// rebalance records a callback. franz-go runs them on its own goroutine, which can be in the
// middle of a transaction (a GroupTransactSession lets the rebalance go on and aborts the
// transaction it overtook); a process's history has one op in flight at a time, so such a
// callback is recorded right after the transaction's completion, its value saying which
// transaction it overtook (during_txn) and when it ran (callback_time, monotonic ns).
func (p *processor) rebalance(event string, parts map[string][]int32) {
	member, gen := p.cl.GroupMetadata()
	ps := sortedParts(parts)
	ok := map[string]any{"event": event, "partitions": ps, "generation": gen, "member_id": member}
	p.txnMu.Lock()
	defer p.txnMu.Unlock()
	if p.inTxn != 0 || p.starting {
		if p.inTxn != 0 {
			ok["during_txn"] = p.inTxn
		}
		ok["callback_time"] = monotonicNS()
		p.pending = append(p.pending, ok)
		return
	}
	p.rec.Invoke("rebalance", map[string]any{"event": event, "partitions": ps})
	p.rec.Ok("rebalance", ok)
}

// txnBegins marks a transaction in flight; txnEnded writes the callbacks it held back.
func (p *processor) txnBegins(seq int64) {
	p.txnMu.Lock()
	p.inTxn = seq
	p.txnMu.Unlock()
}

// startEnded writes the callbacks held back during a start that completed ok; after a failed
// start, whose instance exits, they are dropped (nothing follows a failed start but exit).
func (p *processor) startEnded() {
	p.txnMu.Lock()
	p.starting = false
	if !p.started {
		p.pending = nil
	}
	p.txnMu.Unlock()
	p.txnEnded()
}

func (p *processor) txnEnded() {
	p.txnMu.Lock()
	defer p.txnMu.Unlock()
	p.inTxn = 0
	for _, ok := range p.pending {
		p.rec.Invoke("rebalance", map[string]any{"event": ok["event"], "partitions": ok["partitions"]})
		p.rec.Ok("rebalance", ok)
	}
	p.pending = nil
}

func (p *processor) makeSession() error {
	cfg := p.cfg
	// The broken-on-purpose read-uncommitted variant reads what aborted transactions wrote.
	isolation := kgo.ReadCommitted()
	if cfg.Variant == "read-uncommitted" {
		isolation = kgo.ReadUncommitted()
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(strings.Split(cfg.Bootstrap, ",")...),
		kgo.ClientID(fmt.Sprintf("eos-%d", cfg.Instance)),
		kgo.TransactionalID(p.tid),
		kgo.TransactionTimeout(time.Duration(cfg.TransactionTimeoutMS) * time.Millisecond),
		kgo.ConsumerGroup(cfg.GroupID),
		kgo.ConsumeTopics(cfg.InputTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(isolation),
		kgo.RequireStableFetchOffsets(),
		kgo.SessionTimeout(time.Duration(cfg.SessionTimeoutMS) * time.Millisecond),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(5 * time.Millisecond),
		kgo.FetchMaxWait(time.Duration(max(cfg.CommitIntervalMS, 10)) * time.Millisecond),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			p.rebalance("assign", m)
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			p.rebalance("revoke", m)
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			p.rebalance("lost", m)
		}),
	}
	secure, err := securityOpts(cfg.Security)
	if err != nil {
		return err
	}
	opts = append(opts, secure...)
	if lvl, ok := cfg.ClientConfig["log.level"]; ok {
		levels := map[string]kgo.LogLevel{"debug": kgo.LogLevelDebug, "info": kgo.LogLevelInfo,
			"warn": kgo.LogLevelWarn, "error": kgo.LogLevelError}
		l, known := levels[lvl]
		if !known {
			return fmt.Errorf("client_config log.level %q: one of debug, info, warn, error", lvl)
		}
		opts = append(opts, kgo.WithLogger(kgo.BasicLogger(os.Stderr, l, nil)))
	}
	sess, err := kgo.NewGroupTransactSession(opts...)
	if err != nil {
		return err
	}
	p.sess, p.cl = sess, sess.Client()
	return nil
}

// --- signals, hooks and armed moments ------------------------------------------------------

func (p *processor) installSignals() {
	ch := make(chan os.Signal, 8)
	signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT, syscall.SIGUSR1, syscall.SIGUSR2)
	go func() {
		for s := range ch {
			switch s {
			case syscall.SIGTERM:
				p.stopping.CompareAndSwap(nil, "sigterm")
			case syscall.SIGINT:
				p.stopping.CompareAndSwap(nil, "sigint")
			case syscall.SIGUSR1:
				p.zombie.Store(true)
			case syscall.SIGUSR2:
				p.arm.Refresh()
			}
		}
	}()
}

func signalSelf(sig syscall.Signal) { syscall.Kill(os.Getpid(), sig) }

// errArmedAbort is the abortable failure a nemesis armed at a moment before EndTxn.
type errArmedAbort struct{ at string }

func (e errArmedAbort) Error() string { return "an abortable failure armed at " + e.at }

func (p *processor) hook(point string) error {
	p.arm.Refresh()
	if m := p.arm.Take(point); m != nil {
		at, _ := m["at"].(string)
		action, _ := m["action"].(string)
		p.arm.WriteFired(map[string]any{"at": at, "action": action, "txn": p.seq, "pid": os.Getpid()})
		warn("instance %d: armed %s at %s of txn %d", p.cfg.Instance, action, at, p.seq)
		if action == "abort" {
			return errArmedAbort{at}
		}
		sig := syscall.SIGSTOP
		if action == "kill" {
			sig = syscall.SIGKILL
		}
		if at == "during-commit" {
			delay, _ := m["delay_ms"].(float64)
			go func() {
				time.Sleep(time.Duration(delay) * time.Millisecond)
				signalSelf(sig)
			}()
		} else {
			signalSelf(sig) // a stop returns once someone sends SIGCONT
		}
	}
	// The zombie stops where a pause hurts most: outputs produced, offsets not yet sent.
	if (point == "before-offsets" || point == "before-commit") && p.zombie.CompareAndSwap(true, false) {
		warn("instance %d: pausing itself before offsets (zombie)", p.cfg.Instance)
		signalSelf(syscall.SIGSTOP)
		return nil
	}
	h := p.cfg.Hook
	if h == nil || p.hookFired || h["at"] != point {
		return nil
	}
	txn := int64(1)
	if t, ok := h["txn"].(float64); ok {
		txn = int64(t)
	}
	if p.seq < txn {
		return nil
	}
	p.hookFired = true
	warn("instance %d: hook %v at %s of txn %d", p.cfg.Instance, h["action"], point, p.seq)
	switch h["action"] {
	case "kill":
		signalSelf(syscall.SIGKILL)
	case "stop":
		signalSelf(syscall.SIGSTOP)
	default:
		os.Exit(exitHook)
	}
	return nil
}

func (p *processor) txnDelay() {
	if p.cfg.TxnDelayMS > 0 {
		time.Sleep(time.Duration(p.delayRng.Int63n(p.cfg.TxnDelayMS+1)) * time.Millisecond)
	}
}

// --- the loop ---------------------------------------------------------------------------------

func (p *processor) run() int {
	p.installSignals()
	code, reason := exitOK, "stopped"
	if e := p.loop(); e != nil {
		code, reason = e.code, e.reason
	} else if s, ok := p.stopping.Load().(string); ok {
		reason = s
	}
	if p.sess != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		done := make(chan struct{})
		go func() { p.sess.Close(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			warn("instance %d: close timed out", p.cfg.Instance)
		}
		cancel()
	}
	p.rec.Invoke("exit", map[string]any{"reason": reason})
	p.rec.Ok("exit", map[string]any{"reason": reason, "code": code, "txns": p.seq,
		"committed": p.committed, "failed": p.failed})
	p.rec.Close()
	return code
}

func (p *processor) loop() *exit {
	if e := p.start(); e != nil {
		return e
	}
	for p.stopping.Load() == nil {
		if os.Getppid() != p.parent {
			return &exit{exitOrphaned, "orphaned"}
		}
		if e := p.step(); e != nil {
			return e
		}
	}
	return nil
}

func (p *processor) start() *exit {
	cfg := p.cfg
	cc := cfg.ClientConfig
	if cc == nil {
		cc = map[string]string{}
	}
	value := map[string]any{
		"instance": cfg.Instance, "slot": cfg.Slot, "pid": os.Getpid(), "variant": cfg.Variant,
		"transactional_id": p.tid, "group_id": cfg.GroupID, "input_topic": cfg.InputTopic,
		"output_topic": cfg.OutputTopic, "group_protocol": cfg.GroupProtocol,
		"client_config": cc, "txn_delay_ms": cfg.TxnDelayMS,
	}
	// The session joins the group as soon as it exists, while start is still in flight (it
	// asks for the producer id next): its callbacks are held back and recorded after start,
	// as a transaction's are after the transaction.
	p.txnMu.Lock()
	p.starting = true
	p.txnMu.Unlock()
	defer p.startEnded()
	p.rec.Invoke("start", value)
	if err := p.makeSession(); err != nil {
		p.rec.Fail("start", value, errInfo(err, "init"))
		return &exit{exitFatal, "init-failed"}
	}

	// franz-go asks for its producer id lazily, at the first produce; the contract's start
	// is the moment the producer holds its transactional id (init_transactions elsewhere):
	// a producer that took the id later fences this one, one that took it earlier is fenced
	// by it. So the id is asked for here.
	ctx, cancel := context.WithTimeout(context.Background(), p.callTimeout)
	id, epoch, err := p.cl.ProducerID(ctx)
	cancel()
	if err != nil {
		info := errInfo(err, "init")
		p.rec.Fail("start", value, info)
		if r := refused(info); r != nil {
			return r
		}
		if info["fatal"] == true {
			return &exit{exitFenced, "init-failed"}
		}
		return &exit{exitFatal, "init-failed"}
	}
	ok := map[string]any{}
	for k, v := range value {
		ok[k] = v
	}
	ok["client"] = clientName
	ok["client_version"] = moduleVersion()
	ok["producer_id"], ok["producer_epoch"] = id, epoch
	p.rec.Ok("start", ok)
	p.txnMu.Lock()
	p.started = true
	p.txnMu.Unlock()
	return nil
}

// moduleVersion is the franz-go version this binary was built with.
func moduleVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == franzGoModule {
				return d.Version
			}
		}
	}
	return "unknown"
}

func (p *processor) step() *exit {
	ctx, cancel := context.WithTimeout(context.Background(),
		time.Duration(p.cfg.CommitIntervalMS)*time.Millisecond)
	fetches := p.sess.PollRecords(ctx, p.cfg.TxnSize)
	cancel()
	if fetches.IsClientClosed() {
		return &exit{exitFatal, "client-closed"}
	}
	var refusal *exit
	fetches.EachError(func(t string, part int32, err error) {
		if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			warn("instance %d: fetch error %s[%d]: %v", p.cfg.Instance, t, part, err)
			if refusal == nil {
				refusal = refused(errInfo(err, "poll"))
			}
		}
	})
	if refusal != nil {
		return refusal
	}
	batch := fetches.Records()
	if len(batch) == 0 {
		return nil
	}
	// Captured with the batch: the generation these records were consumed in.
	member, gen := p.cl.GroupMetadata()
	return p.process(batch, member, gen)
}

func (p *processor) process(batch []*kgo.Record, member string, gen int32) *exit {
	p.seq++
	seq := p.seq
	inputs := make([]any, 0, len(batch))
	outputs := make([][]any, 0, len(batch))
	for _, r := range batch {
		inputs = append(inputs, []any{r.Partition, r.Offset, string(r.Value)})
		outputs = append(outputs, []any{nil, nil, nil, r.Partition, r.Offset})
	}
	p.txnBegins(seq)
	defer p.txnEnded()
	p.rec.Invoke("txn", map[string]any{"txn": seq, "transactional_id": p.tid,
		"generation": gen, "member_id": member, "inputs": inputs})
	result := map[string]any{"txn": seq, "outputs": outputs, "offsets": nil}

	if err := p.sess.Begin(); err != nil {
		p.failed++
		info := errInfo(err, "begin")
		p.rec.Fail("txn", result, info)
		return p.exitFor(info)
	}
	var mu sync.Mutex
	var firstErr error
	failures := 0
	var wg sync.WaitGroup
	for i, r := range batch {
		if i > 0 {
			p.txnDelay()
		}
		out := outputPrefix + string(r.Value)
		outputs[i][2] = out
		hdr := func(k, v string) kgo.RecordHeader { return kgo.RecordHeader{Key: k, Value: []byte(v)} }
		rec := &kgo.Record{
			Topic:     p.cfg.OutputTopic,
			Partition: r.Partition % p.cfg.OutputPartitions,
			Key:       r.Value,
			Value:     []byte(out),
			Headers: []kgo.RecordHeader{
				hdr("src-topic", r.Topic),
				hdr("src-partition", strconv.Itoa(int(r.Partition))),
				hdr("src-offset", strconv.FormatInt(r.Offset, 10)),
				hdr("instance", strconv.FormatInt(p.cfg.Instance, 10)),
				hdr("transactional-id", p.tid),
				hdr("generation", strconv.Itoa(int(gen))),
				hdr("member-id", member),
				hdr("txn-seq", strconv.FormatInt(seq, 10)),
			},
		}
		wg.Add(1)
		i := i
		p.sess.Produce(context.Background(), rec, func(r *kgo.Record, err error) {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failures++
				if firstErr == nil {
					firstErr = err
				}
				return
			}
			outputs[i][0], outputs[i][1] = r.Partition, r.Offset
		})
	}
	abortWith := func(info map[string]any) *exit {
		p.failed++
		ctx, cancel := context.WithTimeout(context.Background(), p.callTimeout)
		defer cancel()
		if _, err := p.sess.End(ctx, kgo.TryAbort); err != nil {
			both := map[string]any{}
			for k, v := range info {
				both[k] = v
			}
			both["abort_error"] = errInfo(err, "abort")
			p.rec.Fail("txn", result, both)
			return p.exitFor(errInfo(err, "abort"))
		}
		p.rec.Fail("txn", result, info)
		p.recordRewind()
		return nil
	}
	if err := p.hook("after-produce"); err != nil {
		wg.Wait()
		return abortWith(armedInfo(err))
	}
	flushCtx, cancel := context.WithTimeout(context.Background(), p.callTimeout)
	flushErr := p.cl.Flush(flushCtx)
	cancel()
	wg.Wait()
	if flushErr != nil {
		return abortWith(map[string]any{"stage": "flush", "code": "_TIMED_OUT",
			"message": "outputs not acknowledged within the call timeout", "fatal": false,
			"abortable": true, "retriable": false})
	}
	if firstErr != nil {
		info := errInfo(firstErr, "produce")
		info["failed_outputs"] = failures
		if r := refused(info); r != nil {
			p.failed++
			p.rec.Fail("txn", result, info)
			return r
		}
		if isFencedCode(info["code"].(string)) {
			p.failed++
			p.rec.Fail("txn", result, info)
			return &exit{exitFenced, "fenced"}
		}
		info["abortable"] = true
		return abortWith(info)
	}
	if err := p.hook("after-flush"); err != nil {
		return abortWith(armedInfo(err))
	}
	result["offsets"] = p.pendingOffsets()
	if p.cfg.AbortProbability > 0 && p.rng.Float64() < p.cfg.AbortProbability {
		return abortWith(map[string]any{"stage": "deliberate-abort", "code": "DELIBERATE_ABORT",
			"message": "aborted on purpose (abort probability)", "fatal": false,
			"abortable": true, "retriable": false})
	}
	p.txnDelay()
	if err := p.hook("before-offsets"); err != nil {
		return abortWith(armedInfo(err))
	}
	p.txnDelay()
	if err := p.hook("before-commit"); err != nil {
		return abortWith(armedInfo(err))
	}
	// The offsets go out with the commit: End sends TxnOffsetCommit (group metadata included),
	// then EndTxn; it aborts instead when a revocation or a lost assignment overtook it.
	ctx, cancel2 := context.WithTimeout(context.Background(), p.callTimeout)
	committed, err := p.sess.End(ctx, kgo.TryCommit)
	cancel2()
	if err != nil {
		p.failed++
		info := errInfo(err, "commit")
		p.rec.Info("txn", result, info)
		if r := refused(info); r != nil {
			return r
		}
		if isFencedCode(info["code"].(string)) {
			return &exit{exitFenced, "uncertain"}
		}
		return &exit{exitUncertain, "uncertain"}
	}
	if !committed {
		p.failed++
		p.rec.Fail("txn", result, map[string]any{"stage": "commit", "code": "ABORTED_BY_SESSION",
			"message": "the group transact session aborted: the group rebalanced during the transaction",
			"fatal":   false, "abortable": true, "retriable": false})
		p.recordRewind()
		return nil
	}
	_ = p.hook("after-commit") // an abort armed after the commit has nothing left to abort
	p.committed++
	p.rec.Ok("txn", result)
	return nil
}

func armedInfo(err error) map[string]any {
	return map[string]any{"stage": "deliberate-abort", "code": "INJECTED_ABORT",
		"message": err.Error(), "fatal": false, "abortable": true, "retriable": false}
}

// pendingOffsets are the positions End will commit for the input topic, sorted by partition.
func (p *processor) pendingOffsets() []any {
	offs := p.cl.UncommittedOffsets()[p.cfg.InputTopic]
	parts := make([]int32, 0, len(offs))
	for q := range offs {
		parts = append(parts, q)
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
	out := make([]any, 0, len(parts))
	for _, q := range parts {
		out = append(out, []any{q, offs[q].Offset})
	}
	return out
}

// recordRewind records where the session put the consumer after an abort: back at the group's
// committed offsets (franz-go resets them itself inside End).
func (p *processor) recordRewind() {
	offs := p.cl.CommittedOffsets()[p.cfg.InputTopic]
	parts := make([]int32, 0, len(offs))
	for q := range offs {
		parts = append(parts, q)
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
	names := make([]any, 0, len(parts))
	pairs := make([]any, 0, len(parts))
	for _, q := range parts {
		names = append(names, []any{p.cfg.InputTopic, q})
		pairs = append(pairs, []any{q, offs[q].Offset})
	}
	p.rec.Invoke("rewind", map[string]any{"partitions": names})
	p.rec.Ok("rewind", map[string]any{"partitions": names, "offsets": pairs})
}

func (p *processor) exitFor(info map[string]any) *exit {
	if r := refused(info); r != nil {
		return r
	}
	if isFencedCode(info["code"].(string)) {
		return &exit{exitFenced, "fenced"}
	}
	return &exit{exitFatal, "fatal"}
}

func main() {
	cfg, err := parseConfig(os.Args[1:])
	if err != nil {
		fmt.Fprintf(os.Stderr, "error: %v\n", err)
		os.Exit(exitBadConfig)
	}
	p, err := newProcessor(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "error: cannot start: %v\n", err)
		os.Exit(exitBadConfig)
	}
	os.Exit(p.run())
}
