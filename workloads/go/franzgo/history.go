package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// History is one process's history file in format v1 (docs/history-format.md): created
// exclusively, a header line, then one op per line, each handed to the kernel with one
// write(2) on an O_APPEND descriptor, so a crash can tear at most the line being written.
// franz-go runs rebalance callbacks on its own goroutines, so writes are serialised here.
type History struct {
	mu      sync.Mutex
	f       *os.File
	process int64
	index   int64
}

// monotonicNS reads CLOCK_MONOTONIC, the clock of Python's time.monotonic_ns(), so ops of Go,
// Java and Python processes merge in one order.
func monotonicNS() int64 {
	var ts syscall.Timespec
	const clockMonotonic = 1
	syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockMonotonic, uintptr(unsafe.Pointer(&ts)), 0)
	return ts.Sec*1_000_000_000 + ts.Nsec
}

func wallNow() string {
	return time.Now().UTC().Format("2006-01-02T15:04:05.000000Z")
}

func readTrimmed(path string) any {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return nil
	}
	return s
}

// OpenHistory creates path and writes its header; nil path records nothing.
func OpenHistory(path string, process int64, meta map[string]any) (*History, error) {
	h := &History{process: process}
	if path == "" {
		return h, nil
	}
	host := readTrimmed("/proc/sys/kernel/hostname")
	if host == nil {
		host = "localhost"
	}
	header := map[string]any{
		"history_format": 1,
		"kind":           "process",
		"process":        process,
		"meta":           meta,
		"clock": map[string]any{
			"time":         "monotonic_ns",
			"boot_id":      readTrimmed("/proc/sys/kernel/random/boot_id"),
			"host":         host,
			"pid":          os.Getpid(),
			"started_wall": wallNow(),
		},
	}
	line, err := json.Marshal(header)
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	h.f = f
	return h, h.write(append(line, '\n'))
}

func (h *History) write(b []byte) error {
	if h.f == nil {
		return nil
	}
	for len(b) > 0 {
		n, err := h.f.Write(b)
		if err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

// Record writes one op; a fail or info op carries errInfo, an invoke or ok op never does.
func (h *History) Record(typ, f string, value any, errInfo map[string]any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	op := map[string]any{
		"index":   h.index,
		"time":    monotonicNS(),
		"wall":    wallNow(),
		"process": h.process,
		"type":    typ,
		"f":       f,
		"value":   value,
	}
	if errInfo != nil {
		op["error"] = errInfo
	}
	line, err := json.Marshal(op)
	if err != nil {
		panic(fmt.Sprintf("history op not JSON: %v", err))
	}
	if err := h.write(append(line, '\n')); err != nil {
		panic(fmt.Sprintf("history write failed: %v", err))
	}
	h.index++
}

func (h *History) Invoke(f string, v any)                 { h.Record("invoke", f, v, nil) }
func (h *History) Ok(f string, v any)                     { h.Record("ok", f, v, nil) }
func (h *History) Fail(f string, v any, e map[string]any) { h.Record("fail", f, v, e) }
func (h *History) Info(f string, v any, e map[string]any) { h.Record("info", f, v, e) }
func (h *History) Close()                                 { h.mu.Lock(); defer h.mu.Unlock(); closeFile(h.f) }
func closeFile(f *os.File) {
	if f != nil {
		f.Close()
	}
}
