package main

// kafka_hold: hold one chosen Kafka request of one transactional producer and deliver it to
// the broker later, after the client has moved on.
//
// KIP-890 and KAFKA-17754 are about requests that arrive late: a Produce, AddPartitionsToTxn
// or EndTxn that the network delayed while the client timed out, retried and started its
// next transaction. A latency toxic cannot make that happen on purpose, because it delays
// the retry as much as the original. This toxic reads the request framing of the
// client->broker stream, withholds the first request that matches (API key, transactional
// id, for EndTxn commit or abort), drops that client connection so the client retries at
// once on a new one, and later writes the withheld bytes, unchanged, to the broker on a
// connection of its own. What the broker answered the late request is kept in the toxic's
// events, which the API returns with its attributes.
//
// The toxic is installed, disarmed, on every proxy before any client connects, because
// framing can only be followed from a connection's first byte: connections older than the
// toxic's `ready` flag are passed through untouched and never held from.

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/Shopify/toxiproxy/v2/stream"
	"github.com/Shopify/toxiproxy/v2/toxics"
)

const (
	apiProduce            = 0
	apiInitProducerID     = 22
	apiAddPartitionsToTxn = 24
	apiAddOffsetsToTxn    = 25
	apiEndTxn             = 26
	apiTxnOffsetCommit    = 28
	maxFrame              = 64 << 20
)

// KafkaHoldToxic's exported fields are its API attributes. An `arm` larger than the last
// arm served holds one more request.
type KafkaHoldToxic struct {
	Ready           bool   `json:"ready"`
	Arm             int    `json:"arm"`
	APIKey          int16  `json:"api_key"`
	TransactionalID string `json:"transactional_id"`
	// For EndTxn: "commit", "abort" or "" (either).
	EndTxn string `json:"end_txn"`
	// After the hold, release once the same transactional id sends one of these requests
	// (plus the delay); empty means only on `release` or after max_hold_ms.
	ReleaseOnAPIKeys []int16 `json:"release_on_api_keys"`
	ReleaseDelayMs   int     `json:"release_delay_ms"`
	MaxHoldMs        int     `json:"max_hold_ms"`
	Release          int     `json:"release"`
	Upstream         string  `json:"upstream"`

	mu     sync.Mutex
	served int
	events []*HoldEvent
}

// HoldEvent is one held request, from its capture to what the broker said to it.
type HoldEvent struct {
	Arm             int    `json:"arm"`
	APIKey          int16  `json:"api_key"`
	APIVersion      int16  `json:"api_version"`
	CorrelationID   int32  `json:"correlation_id"`
	TransactionalID string `json:"transactional_id"`
	ProducerID      int64  `json:"producer_id"`
	ProducerEpoch   int16  `json:"producer_epoch"`
	Committed       *bool  `json:"committed,omitempty"`
	// For Produce: the first partition's topic, partition and its batch's base sequence.
	Topic        string `json:"topic,omitempty"`
	Partition    *int32 `json:"partition,omitempty"`
	BaseSequence *int32 `json:"base_sequence,omitempty"`
	HeldAt       int64  `json:"held_at_ms"`
	Trigger      string `json:"trigger,omitempty"`
	TriggerAt    int64  `json:"trigger_at_ms,omitempty"`
	ReleasedAt   int64  `json:"released_at_ms,omitempty"`
	AnsweredAt   int64  `json:"answered_at_ms,omitempty"`
	ErrorCode    *int16 `json:"error_code,omitempty"`
	Failure      string `json:"failure,omitempty"`

	frame   []byte
	release chan string
}

type holdState struct {
	synced bool
	buf    []byte
}

type request struct {
	apiKey, version int16
	correlation     int32
	txnID           string
	producerID      int64
	epoch           int16
	committed       *bool
	topic           string
	partition       *int32
	baseSequence    *int32
}

func nowMs() int64 { return time.Now().UnixMilli() }

func (t *KafkaHoldToxic) NewState() interface{} {
	return &holdState{synced: t.Ready}
}

// MarshalJSON shows the events beside the attributes (read under the lock).
func (t *KafkaHoldToxic) MarshalJSON() ([]byte, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	events := make([]HoldEvent, len(t.events))
	for i, e := range t.events {
		events[i] = *e
	}
	type attrs KafkaHoldToxic
	return json.Marshal(struct {
		*attrs
		Served int         `json:"served"`
		Events []HoldEvent `json:"events"`
	}{(*attrs)(t), t.served, events})
}

func (t *KafkaHoldToxic) Pipe(stub *toxics.ToxicStub) {
	state := stub.State.(*holdState)
	for {
		select {
		case <-stub.Interrupt:
			return
		case c := <-stub.Input:
			if c == nil {
				stub.Close()
				return
			}
			if !state.synced {
				stub.Output <- c
				continue
			}
			state.buf = append(state.buf, c.Data...)
			out, drop := t.scan(state)
			if len(out) > 0 {
				stub.Output <- &stream.StreamChunk{Data: out, Timestamp: c.Timestamp}
			}
			if drop {
				stub.Close()
				return
			}
		}
	}
}

// scan takes the whole frames out of the buffer: the bytes to forward, and whether one was
// withheld (then the connection is dropped and nothing after it is forwarded).
func (t *KafkaHoldToxic) scan(state *holdState) ([]byte, bool) {
	var out []byte
	for len(state.buf) >= 4 {
		size := int(binary.BigEndian.Uint32(state.buf[:4]))
		if size < 0 || size > maxFrame {
			state.synced = false // not Kafka framing: stop looking at this connection
			out = append(out, state.buf...)
			state.buf = nil
			return out, false
		}
		if len(state.buf) < 4+size {
			break
		}
		frame := state.buf[:4+size]
		req, err := parseRequest(frame[4:])
		if err == nil && t.hold(frame, req) {
			state.buf = nil
			return out, true
		}
		if err == nil {
			noticeForwarded(req)
		}
		out = append(out, frame...)
		state.buf = state.buf[4+size:]
	}
	if len(state.buf) == 0 {
		state.buf = nil
	}
	return out, false
}

func (t *KafkaHoldToxic) matches(req request) bool {
	if req.apiKey != t.APIKey || t.TransactionalID == "" || req.txnID != t.TransactionalID {
		return false
	}
	if req.apiKey == apiEndTxn && req.committed != nil && t.EndTxn != "" {
		return (t.EndTxn == "commit") == *req.committed
	}
	return true
}

// hold withholds the request if the toxic is armed for it.
func (t *KafkaHoldToxic) hold(frame []byte, req request) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.Arm <= t.served || !t.matches(req) {
		return false
	}
	t.served = t.Arm
	ev := &HoldEvent{
		Arm: t.Arm, APIKey: req.apiKey, APIVersion: req.version, CorrelationID: req.correlation,
		TransactionalID: req.txnID, ProducerID: req.producerID, ProducerEpoch: req.epoch,
		Committed: req.committed, Topic: req.topic, Partition: req.partition,
		BaseSequence: req.baseSequence, HeldAt: nowMs(),
		frame:   append([]byte(nil), frame...),
		release: make(chan string, 4),
	}
	t.events = append(t.events, ev)
	t.wait(ev)
	go t.deliverLater(ev, t.Arm, time.Duration(t.MaxHoldMs)*time.Millisecond)
	return true
}

// A held request waits for its producer's next transaction, whose first request may cross
// another proxy (with transaction version 2 the first Produce goes to a partition leader,
// not to the coordinator): the waiting holds are shared by every kafka_hold toxic.
type waitingHold struct {
	owner *KafkaHoldToxic
	ev    *HoldEvent
	keys  []int16
	delay time.Duration
}

var waiting = struct {
	sync.Mutex
	by map[string][]*waitingHold
}{by: map[string][]*waitingHold{}}

func (t *KafkaHoldToxic) wait(ev *HoldEvent) {
	if len(t.ReleaseOnAPIKeys) == 0 {
		return
	}
	w := &waitingHold{t, ev, slices.Clone(t.ReleaseOnAPIKeys),
		time.Duration(t.ReleaseDelayMs) * time.Millisecond}
	waiting.Lock()
	defer waiting.Unlock()
	waiting.by[ev.TransactionalID] = append(waiting.by[ev.TransactionalID], w)
}

// noticeForwarded starts the release clock of the holds waiting for this request.
func noticeForwarded(req request) {
	if req.txnID == "" {
		return
	}
	waiting.Lock()
	var fired, kept []*waitingHold
	for _, w := range waiting.by[req.txnID] {
		if slices.Contains(w.keys, req.apiKey) {
			fired = append(fired, w)
		} else {
			kept = append(kept, w)
		}
	}
	if len(fired) > 0 {
		waiting.by[req.txnID] = kept
	}
	waiting.Unlock()
	for _, w := range fired {
		w.owner.mu.Lock()
		if w.ev.TriggerAt == 0 && w.ev.ReleasedAt == 0 {
			w.ev.TriggerAt = nowMs()
			w.ev.Trigger = fmt.Sprintf("api_key %d", req.apiKey)
			go func(w *waitingHold) {
				time.Sleep(w.delay)
				w.ev.release <- "trigger"
			}(w)
		}
		w.owner.mu.Unlock()
	}
}

func forget(ev *HoldEvent) {
	waiting.Lock()
	defer waiting.Unlock()
	ws := waiting.by[ev.TransactionalID]
	for i, w := range ws {
		if w.ev == ev {
			waiting.by[ev.TransactionalID] = append(ws[:i:i], ws[i+1:]...)
			return
		}
	}
}

func (t *KafkaHoldToxic) deliverLater(ev *HoldEvent, arm int, maxHold time.Duration) {
	if maxHold <= 0 {
		maxHold = 60 * time.Second
	}
	deadline := time.After(maxHold)
	poll := time.NewTicker(50 * time.Millisecond)
	defer poll.Stop()
	why := ""
	for why == "" {
		select {
		case why = <-ev.release:
		case <-deadline:
			why = "max_hold_ms"
		case <-poll.C:
			t.mu.Lock()
			if t.Release >= arm {
				why = "release"
			}
			t.mu.Unlock()
		}
	}
	forget(ev)
	t.mu.Lock()
	upstream := t.Upstream
	if ev.Trigger == "" {
		ev.Trigger = why
		ev.TriggerAt = nowMs()
	}
	ev.ReleasedAt = nowMs()
	t.mu.Unlock()
	code, err := deliver(upstream, ev.frame)
	t.mu.Lock()
	defer t.mu.Unlock()
	ev.AnsweredAt = nowMs()
	if err != nil {
		ev.Failure = err.Error()
		return
	}
	ev.ErrorCode = code
}

// deliver writes one request frame to the broker and reads the error code of its answer
// (for the transactional requests whose answer starts with throttle time and error code).
func deliver(upstream string, frame []byte) (*int16, error) {
	if upstream == "" {
		return nil, errors.New("no upstream address")
	}
	conn, err := net.DialTimeout("tcp", upstream, 5*time.Second)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := conn.Write(frame); err != nil {
		return nil, err
	}
	head := make([]byte, 4)
	if _, err := io.ReadFull(conn, head); err != nil {
		return nil, err
	}
	size := binary.BigEndian.Uint32(head)
	if size > maxFrame {
		return nil, fmt.Errorf("answer of %d bytes", size)
	}
	body := make([]byte, size)
	if _, err := io.ReadFull(conn, body); err != nil {
		return nil, err
	}
	req, err := parseRequest(frame[4:])
	if err != nil {
		return nil, err
	}
	return answerError(req, body), nil
}

// answerError: the error code of an EndTxn, AddOffsetsToTxn or InitProducerId answer
// (throttle_time_ms then error_code after the response header), of a Produce answer's first
// partition, nil for other requests.
func answerError(req request, body []byte) *int16 {
	switch req.apiKey {
	case apiEndTxn, apiAddOffsetsToTxn, apiInitProducerID, apiProduce:
	default:
		return nil
	}
	r := &reader{b: body}
	r.int32() // correlation id
	flex := flexible(req.apiKey, req.version)
	if flex {
		r.taggedFields()
	}
	if req.apiKey == apiProduce {
		r.arrayLen(flex) // topics
		r.topic(flex, req.version)
		r.arrayLen(flex) // partitions
		r.int32()        // index
	} else {
		r.int32() // throttle
	}
	code := r.int16()
	if r.err != nil {
		return nil
	}
	return &code
}

func flexible(apiKey, version int16) bool {
	switch apiKey {
	case apiProduce:
		return version >= 9
	case apiInitProducerID:
		return version >= 2
	case apiAddPartitionsToTxn, apiAddOffsetsToTxn, apiEndTxn, apiTxnOffsetCommit:
		return version >= 3
	}
	return false
}

// parseRequest reads the request header and, for transactional requests, the
// transactional id (and EndTxn's producer id, epoch and commit flag).
func parseRequest(b []byte) (request, error) {
	r := &reader{b: b}
	req := request{apiKey: r.int16(), version: r.int16(), correlation: r.int32()}
	r.string16() // client id
	if r.err != nil {
		return req, r.err
	}
	flex := flexible(req.apiKey, req.version)
	if flex {
		r.taggedFields()
	}
	switch req.apiKey {
	case apiProduce:
		if req.version >= 3 {
			req.txnID = r.str(flex)
			r.int16() // acks
			r.int32() // timeout
			parseProduceBatch(r, flex, &req)
		}
	case apiAddPartitionsToTxn:
		if req.version <= 3 {
			req.txnID = r.str(flex)
		}
	case apiAddOffsetsToTxn, apiTxnOffsetCommit, apiInitProducerID:
		req.txnID = r.str(flex)
	case apiEndTxn:
		req.txnID = r.str(flex)
		req.producerID = r.int64()
		req.epoch = r.int16()
		committed := r.int8() != 0
		req.committed = &committed
	}
	return req, r.err
}

// parseProduceBatch reads where the first partition's first record batch comes from: its
// topic, partition, producer id, epoch and base sequence (the dump's key for that batch).
func parseProduceBatch(r *reader, flex bool, req *request) {
	if r.arrayLen(flex) < 1 {
		return
	}
	topic := r.topic(flex, req.version)
	if r.arrayLen(flex) < 1 {
		return
	}
	partition := r.int32()
	if flex {
		r.uvarint() // compact records length
	} else {
		r.int32() // records length
	}
	r.take(8 + 4 + 4 + 1 + 4 + 2 + 4 + 8 + 8) // base offset .. max timestamp
	producerID, epoch, sequence := r.int64(), r.int16(), r.int32()
	if r.err != nil {
		r.err = nil // a request we cannot read further is still held by its header
		return
	}
	req.topic, req.partition, req.producerID, req.epoch = topic, &partition, producerID, epoch
	req.baseSequence = &sequence
}

type reader struct {
	b   []byte
	pos int
	err error
}

func (r *reader) take(n int) []byte {
	if r.err != nil || n < 0 || r.pos+n > len(r.b) {
		if r.err == nil {
			r.err = errors.New("short request")
		}
		return make([]byte, max(n, 8))
	}
	out := r.b[r.pos : r.pos+n]
	r.pos += n
	return out
}

func (r *reader) int8() int8   { return int8(r.take(1)[0]) }
func (r *reader) int16() int16 { return int16(binary.BigEndian.Uint16(r.take(2))) }
func (r *reader) int32() int32 { return int32(binary.BigEndian.Uint32(r.take(4))) }
func (r *reader) int64() int64 { return int64(binary.BigEndian.Uint64(r.take(8))) }

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b[r.pos:])
	if n <= 0 {
		r.err = errors.New("bad varint")
		return 0
	}
	r.pos += n
	return v
}

func (r *reader) string16() string {
	n := int(r.int16())
	if n < 0 {
		return ""
	}
	return string(r.take(n))
}

// str reads a (nullable) string, compact in flexible versions.
func (r *reader) str(flex bool) string {
	if !flex {
		return r.string16()
	}
	n := int(r.uvarint()) - 1
	if n < 0 {
		return ""
	}
	return string(r.take(n))
}

// arrayLen reads an array's length, compact in flexible versions.
func (r *reader) arrayLen(flex bool) int {
	if flex {
		return int(r.uvarint()) - 1
	}
	return int(r.int32())
}

// topic reads a Produce topic's name (version 13 names topics by id: that id, in hex).
func (r *reader) topic(flex bool, version int16) string {
	if version >= 13 {
		return fmt.Sprintf("%x", r.take(16))
	}
	return r.str(flex)
}

func (r *reader) taggedFields() {
	for i := r.uvarint(); i > 0 && r.err == nil; i-- {
		r.uvarint()
		r.take(int(r.uvarint()))
	}
}
