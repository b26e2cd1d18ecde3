// A reaper that speaks testcontainers' Ryuk protocol, written for the harness because Ryuk's
// own Go module (github.com/testcontainers/moby-ryuk) is not served by the Go module proxy
// reachable from the project's machines and its image is on a registry they cannot reach.
//
// Protocol (what testcontainers-python's Reaper expects): listen on :8080, log "Started!",
// read lines "label=<key>=<value>" from each connection and answer "ACK" to each. Once
// every connection has closed (the harness exited, SIGKILL included: the kernel closes its
// socket) and none came back within RYUK_RECONNECTION_TIMEOUT, remove every container,
// network and volume that carries one of the labels, through the engine's API on the
// mounted /var/run/docker.sock, then exit. Nobody connecting within RYUK_CONNECTION_TIMEOUT
// ends it the same way. Standard library only, so it builds without any module download.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"
)

type reaper struct {
	mu      sync.Mutex
	filters map[string]bool // "key=value" label filters
	conns   int
	changed chan struct{}
}

func envDuration(name string, def time.Duration) time.Duration {
	if v := os.Getenv(name); v != "" {
		if d, err := time.ParseDuration(v); err == nil {
			return d
		}
	}
	return def
}

func (r *reaper) serve(c net.Conn) {
	defer func() {
		c.Close()
		r.mu.Lock()
		r.conns--
		r.mu.Unlock()
		r.changed <- struct{}{}
	}()
	sc := bufio.NewScanner(c)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "label=") {
			r.mu.Lock()
			r.filters[strings.TrimPrefix(line, "label=")] = true
			r.mu.Unlock()
			log.Printf("watching label %s", strings.TrimPrefix(line, "label="))
		}
		if _, err := c.Write([]byte("ACK\n")); err != nil {
			return
		}
	}
}

var engine = &http.Client{
	Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", "/var/run/docker.sock")
		},
	},
	Timeout: 30 * time.Second,
}

func call(method, path string) (*http.Response, error) {
	req, err := http.NewRequest(method, "http://engine"+path, nil)
	if err != nil {
		return nil, err
	}
	return engine.Do(req)
}

// list returns the ids (or names, for volumes) of one kind of resource carrying label.
func list(kind, label string) []string {
	f, _ := json.Marshal(map[string][]string{"label": {label}})
	q := "?filters=" + url.QueryEscape(string(f))
	if kind == "containers" {
		q = "/json" + q + "&all=1"
	}
	resp, err := call("GET", "/"+kind+q)
	if err != nil {
		log.Printf("listing %s: %v", kind, err)
		return nil
	}
	defer resp.Body.Close()
	var ids []string
	if kind == "volumes" {
		var body struct{ Volumes []struct{ Name string } }
		if json.NewDecoder(resp.Body).Decode(&body) == nil {
			for _, v := range body.Volumes {
				ids = append(ids, v.Name)
			}
		}
		return ids
	}
	var items []struct{ Id string }
	if json.NewDecoder(resp.Body).Decode(&items) == nil {
		for _, it := range items {
			ids = append(ids, it.Id)
		}
	}
	return ids
}

func prune(filters []string) {
	removed := map[string]int{}
	// Containers first (they hold networks and volumes); a few rounds for stragglers.
	for round := 0; round < 5; round++ {
		left := 0
		for _, kind := range []string{"containers", "networks", "volumes"} {
			for _, label := range filters {
				for _, id := range list(kind, label) {
					path := "/" + kind + "/" + id
					if kind == "containers" {
						path += "?force=1&v=1"
					} else if kind == "volumes" {
						path += "?force=1"
					}
					resp, err := call("DELETE", path)
					if err == nil {
						resp.Body.Close()
					}
					if err == nil && resp.StatusCode < 300 || err == nil && resp.StatusCode == 404 {
						removed[kind]++
					} else {
						left++
					}
				}
			}
		}
		if left == 0 {
			break
		}
		time.Sleep(time.Second)
	}
	log.Printf("removed %d containers, %d networks, %d volumes",
		removed["containers"], removed["networks"], removed["volumes"])
}

func main() {
	log.SetFlags(log.LstdFlags)
	connectTimeout := envDuration("RYUK_CONNECTION_TIMEOUT", 60*time.Second)
	reconnectTimeout := envDuration("RYUK_RECONNECTION_TIMEOUT", 10*time.Second)
	port := os.Getenv("RYUK_PORT")
	if port == "" {
		port = "8080"
	}
	ln, err := net.Listen("tcp", ":"+port)
	if err != nil {
		log.Fatalf("listen: %v", err)
	}
	r := &reaper{filters: map[string]bool{}, changed: make(chan struct{}, 64)}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			r.mu.Lock()
			r.conns++
			r.mu.Unlock()
			r.changed <- struct{}{}
			go r.serve(c)
		}
	}()
	fmt.Println("kafka-harness reaper: Started!")
	wait := connectTimeout
	for {
		select {
		case <-r.changed:
			r.mu.Lock()
			n := r.conns
			r.mu.Unlock()
			if n > 0 {
				wait = 24 * 365 * time.Hour
			} else {
				wait = reconnectTimeout
			}
			continue
		case <-time.After(wait):
		}
		r.mu.Lock()
		n := r.conns
		var filters []string
		for f := range r.filters {
			filters = append(filters, f)
		}
		r.mu.Unlock()
		if n > 0 {
			continue
		}
		log.Printf("no connection for %s: pruning %v", wait, filters)
		prune(filters)
		return
	}
}
