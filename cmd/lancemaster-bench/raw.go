package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/lancemaster/lancemaster/pkg/cluster"
)

// The raw Raft baseline, with the method of ../shared/bench/rawraft (mode
// conc): three hashicorp/raft nodes in this process over real TCP on
// 127.0.0.1, raft-boltdb/v2 stores with fsync on behind a LogCache(512), a
// trivial FSM, 256-byte commands, raft's default 1 s timeouts and
// MaxAppendEntries 64, c goroutines each with one Apply outstanding.
const (
	rawPayload       = 256
	rawLogCache      = 512
	rawMaxPool       = 3
	rawNetTimeout    = 10 * time.Second
	rawApplyTimeout  = 10 * time.Second
	rawLeaderTimeout = 20 * time.Second
)

// rawFSM keeps every command in a map: the cheapest FSM that still does work.
type rawFSM struct {
	mu sync.Mutex
	m  map[uint64][]byte
}

func (f *rawFSM) Apply(l *raft.Log) interface{} {
	f.mu.Lock()
	f.m[l.Index] = l.Data
	f.mu.Unlock()
	return nil
}

func (f *rawFSM) Snapshot() (raft.FSMSnapshot, error) { return emptySnapshot{}, nil }

func (f *rawFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	_, err := io.Copy(io.Discard, rc)
	return err
}

type emptySnapshot struct{}

func (emptySnapshot) Persist(s raft.SnapshotSink) error { return s.Close() }
func (emptySnapshot) Release()                          {}

type rawNode struct {
	r     *raft.Raft
	trans *raft.NetworkTransport
	store cluster.LogStore
	down  bool // stopped (a killed leader); close skips it
}

// stop shuts the node down as a crash would look to the others: raft stops
// answering, its transport and store close. Idempotent.
func (nd *rawNode) stop() {
	if nd.down {
		return
	}
	nd.down = true
	if nd.r != nil {
		nd.r.Shutdown().Error()
	}
	if nd.trans != nil {
		nd.trans.Close()
	}
	if nd.store != nil {
		nd.store.Close()
	}
}

type rawCluster struct {
	dir   string
	nodes []*rawNode
}

// startRawCluster bootstraps three voters under a fresh dir in parent, each
// keeping its log in store (config.RaftLogStore*: the masters' store, opened
// as a master opens it); tweak, when given, adjusts each node's raft config
// (the fast timeouts, say).
func startRawCluster(parent, store string, tweak ...func(*raft.Config)) (cl *rawCluster, err error) {
	dir, err := os.MkdirTemp(parent, "raw-")
	if err != nil {
		return nil, err
	}
	cl = &rawCluster{dir: dir}
	defer func() {
		if err != nil {
			cl.close()
		}
	}()
	var servers []raft.Server
	for i := 0; i < 3; i++ {
		tr, err := raft.NewTCPTransport("127.0.0.1:0", nil, rawMaxPool, rawNetTimeout, io.Discard)
		if err != nil {
			return cl, err
		}
		cl.nodes = append(cl.nodes, &rawNode{trans: tr})
		servers = append(servers, raft.Server{ID: rawID(i), Address: tr.LocalAddr(), Suffrage: raft.Voter})
	}
	for i, nd := range cl.nodes {
		ndir := filepath.Join(dir, string(rawID(i)))
		if err := os.MkdirAll(ndir, 0o700); err != nil {
			return cl, err
		}
		// Every append is fsynced, in either store.
		nd.store, err = cluster.OpenLogStore(ndir, store, hclog.NewNullLogger())
		if err != nil {
			return cl, err
		}
		logs, err := raft.NewLogCache(rawLogCache, nd.store)
		if err != nil {
			return cl, err
		}
		snaps, err := raft.NewFileSnapshotStore(ndir, 2, io.Discard)
		if err != nil {
			return cl, err
		}
		conf := raft.DefaultConfig()
		conf.LocalID = rawID(i)
		conf.Logger = hclog.New(&hclog.LoggerOptions{Level: hclog.Error, Output: io.Discard})
		for _, t := range tweak {
			t(conf)
		}
		if err := raft.BootstrapCluster(conf, logs, nd.store, snaps, nd.trans, raft.Configuration{Servers: servers}); err != nil {
			return cl, err
		}
		if nd.r, err = raft.NewRaft(conf, &rawFSM{m: make(map[uint64][]byte, 1<<16)}, logs, nd.store, snaps, nd.trans); err != nil {
			return cl, err
		}
	}
	return cl, nil
}

func rawID(i int) raft.ServerID { return raft.ServerID(fmt.Sprintf("n%d", i)) }

// leader waits for a leader and for its first entry to commit.
func (cl *rawCluster) leader() (*raft.Raft, error) {
	deadline := time.Now().Add(rawLeaderTimeout)
	for time.Now().Before(deadline) {
		for _, nd := range cl.nodes {
			if nd.r.State() == raft.Leader {
				return nd.r, nd.r.Barrier(rawApplyTimeout).Error()
			}
		}
		time.Sleep(time.Millisecond)
	}
	return nil, errors.New("raw: no leader elected")
}

// close shuts every node down and removes the cluster's dir.
func (cl *rawCluster) close() {
	for _, nd := range cl.nodes {
		nd.stop()
	}
	os.RemoveAll(cl.dir)
}

// runRawApply measures Apply throughput and latency at concurrency c on a
// fresh cluster.
func runRawApply(o *options, c int) (loadResult, error) {
	cl, err := startRawCluster(o.tmp, o.freshLogStore())
	if err != nil {
		return loadResult{}, fmt.Errorf("raw: start cluster: %w", err)
	}
	defer cl.close()
	r, err := cl.leader()
	if err != nil {
		return loadResult{}, err
	}
	cmd := make([]byte, rawPayload)
	for j := range cmd {
		cmd[j] = byte('a' + j%26)
	}
	return closedLoop(c, o.warm, o.dur, func(int) (worker, error) {
		return worker{do: func() error { return r.Apply(cmd, rawApplyTimeout).Error() }}, nil
	})
}
