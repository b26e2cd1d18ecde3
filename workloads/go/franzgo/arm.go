package main

import (
	"encoding/json"
	"os"
	"sync"
	"syscall"
)

// ArmFile is the nemesis's channel into the processor: <history>.arm holds the armed moment
// ({"at", "action", "delay_ms"}; empty disarms), <history>.fired says what fired. The file is
// looked at again when its identity (inode, size, mtime) changed, at every hook point, and on
// SIGUSR2, so either way of arming reaches this processor.
type ArmFile struct {
	path  string
	mu    sync.Mutex
	ident [4]int64
	armed map[string]any
}

func NewArmFile(history string) *ArmFile { return &ArmFile{path: history + ".arm"} }

// Refresh re-reads the file when it changed since the last look.
func (a *ArmFile) Refresh() {
	a.mu.Lock()
	defer a.mu.Unlock()
	var st syscall.Stat_t
	if err := syscall.Stat(a.path, &st); err != nil {
		return
	}
	id := [4]int64{int64(st.Ino), st.Size, st.Mtim.Sec, st.Mtim.Nsec}
	if id == a.ident {
		return
	}
	a.ident = id
	b, err := os.ReadFile(a.path)
	if err != nil {
		return
	}
	if len(b) == 0 {
		a.armed = nil
		return
	}
	var m map[string]any
	if json.Unmarshal(b, &m) == nil {
		a.armed = m
	}
}

// Take returns the armed moment if it is at point (during-commit fires at before-commit), and
// disarms it.
func (a *ArmFile) Take(point string) map[string]any {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.armed == nil {
		return nil
	}
	at, _ := a.armed["at"].(string)
	if at != point && !(at == "during-commit" && point == "before-commit") {
		return nil
	}
	m := a.armed
	a.armed = nil
	return m
}

// WriteFired replaces <history>.fired in one rename, so a reader never sees half of it.
func (a *ArmFile) WriteFired(v map[string]any) {
	b, _ := json.Marshal(v)
	fired := a.path[:len(a.path)-len(".arm")] + ".fired"
	tmp := fired + ".tmp"
	if os.WriteFile(tmp, b, 0o644) == nil {
		os.Rename(tmp, fired)
	}
}
