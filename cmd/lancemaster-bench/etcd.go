package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// The etcd peer section: a three-member etcd cluster on loopback, with
// etcd's default settings (fsync on every commit, 100 ms heartbeats),
// loaded by the closed loop the raw baseline uses. Two operations:
//
//	put  Put(key, 256 B) on a fresh key
//	txn  Txn(If version(key) == 0, Then Put(key, 256 B)) on a fresh key: a
//	     compare-and-swap that succeeds, the closest etcd shape of an
//	     admission (check that nothing holds the name, then write it)
//
// The c clients share etcdConns gRPC connections (clientv3 clients), all
// to the leader's endpoint, as the admission load calls the leader.
//
// etcd is built from the module in bench/etcd (its go.mod pins
// go.etcd.io/etcd/server/v3 as a tool: `go install` refuses etcd because
// of its replace directives) into bench/etcd/bin/etcd on first use, and
// reused while that go.sum is unchanged; -etcd names a binary to use
// instead.
const (
	secEtcd        = "etcd"
	etcdConns      = 16
	etcdValueBytes = 256
	etcdOpTimeout  = 5 * time.Second
	// etcdStartTimeout bounds the three members' start and first election.
	etcdStartTimeout = 30 * time.Second
	// etcdBuildTimeout bounds go build of etcd (about 1.5 min on 2 busy cores).
	etcdBuildTimeout = 10 * time.Minute
)

type etcdOp string

const (
	etcdPut etcdOp = "put"
	etcdTxn etcdOp = "txn"
)

// etcdBinary returns the etcd server binary: o.etcdBin when set, else the
// one built from bench/etcd (building it when missing or older than that
// module's go.sum).
func etcdBinary(o *options) (string, error) {
	if o.etcdBin != "" {
		return o.etcdBin, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), etcdBuildTimeout)
	defer cancel()
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("etcd: no go tool to build etcd with (or pass -etcd): %w", err)
	}
	root, err := moduleRoot(ctx, goBin)
	if err != nil {
		return "", err
	}
	mod := filepath.Join(root, "bench", "etcd")
	bin := filepath.Join(mod, "bin", "etcd")
	sum, err := os.Stat(filepath.Join(mod, "go.sum"))
	if err != nil {
		return "", fmt.Errorf("etcd: %w", err)
	}
	if st, err := os.Stat(bin); err == nil && st.ModTime().After(sum.ModTime()) {
		return bin, nil
	}
	progress("etcd: building go.etcd.io/etcd/server/v3 from bench/etcd (once; takes a minute or two)")
	cmd := exec.CommandContext(ctx, goBin, "build", "-o", bin, "go.etcd.io/etcd/server/v3")
	cmd.Dir = mod
	cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("etcd: go build in %s: %w\n%s", mod, err, tail(out, 20))
	}
	return bin, nil
}

// etcdCluster is three etcd processes on 127.0.0.1.
type etcdCluster struct {
	procs     []*exec.Cmd
	endpoints []string // client URLs, by member
	leader    string   // the leader's client URL once the cluster is up
	logs      []*bytes.Buffer
}

// startEtcdCluster starts three members under a fresh dir of parent and
// waits until one of them says it leads (ec.leader).
func startEtcdCluster(bin, parent string) (ec *etcdCluster, err error) {
	dir, err := os.MkdirTemp(parent, "etcd-")
	if err != nil {
		return nil, err
	}
	ec = &etcdCluster{}
	defer func() {
		if err != nil {
			ec.close()
		}
	}()
	var peerURLs, clientURLs []string
	for i := 0; i < 3; i++ {
		p, err := freeAddr()
		if err != nil {
			return ec, err
		}
		c, err := freeAddr()
		if err != nil {
			return ec, err
		}
		peerURLs, clientURLs = append(peerURLs, "http://"+p), append(clientURLs, "http://"+c)
	}
	var initial []string
	for i, u := range peerURLs {
		initial = append(initial, fmt.Sprintf("e%d=%s", i, u))
	}
	for i := range peerURLs {
		log := &bytes.Buffer{}
		cmd := exec.Command(bin,
			"--name", fmt.Sprintf("e%d", i), "--data-dir", filepath.Join(dir, fmt.Sprintf("e%d", i)),
			"--listen-peer-urls", peerURLs[i], "--initial-advertise-peer-urls", peerURLs[i],
			"--listen-client-urls", clientURLs[i], "--advertise-client-urls", clientURLs[i],
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new",
			"--initial-cluster-token", "lancemaster-bench", "--log-level", "error")
		cmd.Stdout, cmd.Stderr = log, log
		// Its own process group, ended with this program (killChild).
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			return ec, fmt.Errorf("etcd: start member %d: %w", i, err)
		}
		trackChild(cmd.Process.Pid)
		ec.procs, ec.logs = append(ec.procs, cmd), append(ec.logs, log)
	}
	ec.endpoints = clientURLs
	if ec.leader, err = ec.leaderEndpoint(); err != nil {
		return ec, err
	}
	return ec, nil
}

// leaderEndpoint asks every member until one says who leads, and returns
// the leader's client URL; it retries until etcdStartTimeout.
func (ec *etcdCluster) leaderEndpoint() (string, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: ec.endpoints, DialTimeout: etcdOpTimeout, Logger: zap.NewNop()})
	if err != nil {
		return "", err
	}
	defer cli.Close()
	deadline := time.Now().Add(etcdStartTimeout)
	var last error
	for time.Now().Before(deadline) {
		for _, ep := range ec.endpoints {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			st, err := cli.Status(ctx, ep)
			cancel()
			if err != nil {
				last = err
				continue
			}
			if st.Leader != 0 && st.Leader == st.Header.MemberId {
				return ep, nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return "", fmt.Errorf("etcd: no leader within %s (last: %v); member log: %s", etcdStartTimeout, last, ec.firstLog())
}

func (ec *etcdCluster) firstLog() string {
	for _, l := range ec.logs {
		if l.Len() > 0 {
			return clip(l.String(), 400)
		}
	}
	return "(empty)"
}

func (ec *etcdCluster) close() {
	for _, p := range ec.procs {
		syscall.Kill(-p.Process.Pid, syscall.SIGKILL)
		p.Wait()
		untrackChild(p.Process.Pid)
	}
}

// runEtcdLoad measures op at c clients on a fresh cluster.
func runEtcdLoad(o *options, bin string, op etcdOp, c int) (loadResult, error) {
	ec, err := startEtcdCluster(bin, o.tmp)
	if err != nil {
		return loadResult{}, err
	}
	defer ec.close()
	leader := ec.leader
	conns := make([]*clientv3.Client, 0, etcdConns)
	defer func() {
		for _, cli := range conns {
			cli.Close()
		}
	}()
	for i := 0; i < etcdConns && i < c; i++ {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{leader}, DialTimeout: etcdOpTimeout, Logger: zap.NewNop()})
		if err != nil {
			return loadResult{}, fmt.Errorf("etcd: client: %w", err)
		}
		conns = append(conns, cli)
	}
	value := string(bytes.Repeat([]byte("v"), etcdValueBytes))
	return closedLoop(c, o.warm, o.dur, func(g int) (worker, error) {
		cli, n := conns[g%len(conns)], 0 // n: this worker's own counter (one request at a time)
		return worker{do: func() error {
			n++
			key := "job/" + strconv.Itoa(g) + "/" + strconv.Itoa(n)
			ctx, cancel := context.WithTimeout(context.Background(), etcdOpTimeout)
			defer cancel()
			if op == etcdPut {
				_, err := cli.Put(ctx, key, value)
				return err
			}
			resp, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.Version(key), "=", 0)).
				Then(clientv3.OpPut(key, value)).Commit()
			if err == nil && !resp.Succeeded {
				err = errors.New("etcd: the compare failed on a fresh key")
			}
			return err
		}}, nil
	})
}

// runEtcdPoints measures etcd Put and Txn at c and adds their rows, and the
// admission-vs-Txn rows when adm is the admission result at the same c.
func runEtcdPoints(o *options, rep *report, bin string, c int, adm *loadResult) {
	for _, op := range []etcdOp{etcdPut, etcdTxn} {
		t := time.Now()
		r, err := runEtcdLoad(o, bin, op, c)
		rep.Sections[fmt.Sprintf("etcd_%s_c%d", op, c)] = time.Since(t).Seconds()
		if err != nil {
			rep.fail(secEtcd, fmt.Errorf("%s c=%d: %w", op, c, err))
			continue
		}
		progress("etcd %s c=%d: %.0f ops/s, p50 %.1f ms, p99 %.1f ms, %d errors", op, c, r.OpsPerS, r.P50Ms, r.P99Ms, r.Errors)
		if op == etcdTxn {
			rep.cur.Txn[c] = r
		}
		rep.add(etcdRows(op, r, adm)...)
	}
}

func etcdRows(op etcdOp, r loadResult, adm *loadResult) []row {
	c := fmt.Sprintf(" c=%d", r.Conc)
	name := map[etcdOp]string{etcdPut: "Put", etcdTxn: "Txn"}[op]
	rows := []row{
		{Section: secEtcd, Figure: "etcd " + name + "/s" + c, Unit: "1/s", Raw: f64(r.OpsPerS),
			Note: fmt.Sprintf("1st/2nd half of window %.0f/%.0f per s%s", r.FirstHalfPerS, r.SecondHalfPerS, ioNote(r.ReadsPerOp, r.WritesPerOp))},
		{Section: secEtcd, Figure: "etcd " + name + " p50" + c, Unit: "ms", Raw: f64(r.P50Ms)},
		{Section: secEtcd, Figure: "etcd " + name + " p99" + c, Unit: "ms", Raw: f64(r.P99Ms)},
	}
	if r.Errors > 0 {
		rows[0].Note += fmt.Sprintf("; %d failed requests, first: %s", r.Errors, clip(r.FirstErr, 120))
	}
	if op != etcdTxn || adm == nil {
		return rows
	}
	// The peer comparison: admission (validation, an inspect round trip, one
	// Raft entry) against etcd's compare-and-swap at the same c.
	vs := []row{
		{Section: secEtcd, Figure: "admissions/s vs etcd Txn" + c, Unit: "1/s", LM: f64(adm.OpsPerS), Raw: f64(r.OpsPerS)},
		{Section: secEtcd, Figure: "admission p99 vs etcd Txn" + c, Unit: "ms", LM: f64(adm.P99Ms), Raw: f64(r.P99Ms),
			Note: fmt.Sprintf("medians %.1f vs %.1f ms", adm.P50Ms, r.P50Ms)},
	}
	for i := range vs {
		vs[i] = vs[i].withRatio()
	}
	vs[0] = vs[0].ratioTarget(">=", admitVsEtcdTarget, "etcd")
	vs[1] = vs[1].ratioTarget("<=", p99VsEtcdTarget, "etcd")
	return append(rows, vs...)
}
