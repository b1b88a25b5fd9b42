package supervisor

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// agentLeaf is where the agent moves itself on a cgroup v2 host when its own
// cgroup holds only itself and must become a parent (the "no internal
// processes" rule forbids enabling controllers for children otherwise).
const agentLeaf = "lancemaster-agent"

type mountInfo struct {
	root, point, fstype string
	super               []string
}

// readMountInfo parses /proc/self/mountinfo.
func readMountInfo() ([]mountInfo, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []mountInfo
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// id parent maj:min root point opts [optional...] - fstype source superopts
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		a, b := strings.Fields(pre), strings.Fields(post)
		if len(a) < 5 || len(b) < 3 {
			continue
		}
		out = append(out, mountInfo{root: unescape(a[3]), point: unescape(a[4]), fstype: b[0], super: strings.Split(b[2], ",")})
	}
	return out, sc.Err()
}

// unescape undoes mountinfo's octal escapes (\040 for a space...).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// selfCgroups reads /proc/self/cgroup: v1 controller → path, and the v2
// path under the key "".
func selfCgroups() (map[string]string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			m[""] = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			m[c] = parts[2]
		}
	}
	return m, nil
}

// hostDir maps a cgroup path as /proc/self/cgroup shows it to a directory
// under mount m.
func hostDir(m mountInfo, cgPath string) string {
	rel := cgPath
	if m.root != "/" {
		rel = strings.TrimPrefix(cgPath, m.root)
	}
	return filepath.Join(m.point, rel)
}

func v1Mount(mounts []mountInfo, controller string) (mountInfo, bool) {
	for _, m := range mounts {
		if m.fstype == "cgroup" && slices.Contains(m.super, controller) {
			return m, true
		}
	}
	return mountInfo{}, false
}

// detectCgroups finds where per-invocation cgroups can be made: the
// configured CgroupParent, else the agent's own cgroup v2 directory when it
// offers memory and pids, else the agent's own cgroups in the v1 memory and
// pids hierarchies. It does not prove anything is writable (verifyCgroups
// does).
func detectCgroups(cfg Config) (*cgroupBackend, error) {
	mounts, err := readMountInfo()
	if err != nil {
		return nil, fmt.Errorf("read mountinfo: %w", err)
	}
	if cfg.CgroupParent != "" {
		return fromParent(cfg, mounts)
	}
	self, err := selfCgroups()
	if err != nil {
		return nil, fmt.Errorf("read /proc/self/cgroup: %w", err)
	}
	b, err2 := autoV2(cfg, mounts, self)
	if err2 == nil {
		return b, nil
	}
	b, err1 := autoV1(cfg, mounts, self)
	if err1 == nil {
		return b, nil
	}
	return nil, fmt.Errorf("cgroup v2: %v; cgroup v1: %v", err2, err1)
}

func autoV2(cfg Config, mounts []mountInfo, self map[string]string) (*cgroupBackend, error) {
	own, ok := self[""]
	if !ok {
		return nil, errors.New("the agent is in no cgroup v2 hierarchy")
	}
	for _, m := range mounts {
		if m.fstype == "cgroup2" {
			return prepareV2(cfg, hostDir(m, own), true)
		}
	}
	return nil, errors.New("no cgroup2 mount")
}

func autoV1(cfg Config, mounts []mountInfo, self map[string]string) (*cgroupBackend, error) {
	mem, ok1 := v1Mount(mounts, "memory")
	pids, ok2 := v1Mount(mounts, "pids")
	if !ok1 || !ok2 {
		return nil, errors.New("no v1 memory and pids hierarchies mounted")
	}
	return newV1(cfg, hostDir(mem, self["memory"]), hostDir(pids, self["pids"])), nil
}

func newV1(cfg Config, memDir, pidsDir string) *cgroupBackend {
	return &cgroupBackend{memDir: memDir, pidsDir: pidsDir, memLimit: cfg.MemoryLimitBytes, pidsLimit: cfg.PidsLimit, limits: true}
}

// fromParent interprets an explicit CgroupParent by the filesystem it lives
// on (of its nearest existing ancestor) and creates what is missing.
func fromParent(cfg Config, mounts []mountInfo) (*cgroupBackend, error) {
	p := filepath.Clean(cfg.CgroupParent)
	if !filepath.IsAbs(p) {
		return nil, fmt.Errorf("cgroup parent %q is not an absolute path", cfg.CgroupParent)
	}
	existing := p
	for {
		if _, err := os.Stat(existing); err == nil || existing == "/" {
			break
		}
		existing = filepath.Dir(existing)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(existing, &st); err != nil {
		return nil, fmt.Errorf("cgroup parent %s: %w", p, err)
	}
	switch st.Type {
	case unix.CGROUP2_SUPER_MAGIC:
		if err := os.MkdirAll(p, 0o755); err != nil {
			return nil, fmt.Errorf("cgroup parent: %w", err)
		}
		return prepareV2(cfg, p, false)
	case unix.CGROUP_SUPER_MAGIC:
		var home mountInfo
		for _, m := range mounts {
			if m.fstype == "cgroup" && (existing == m.point || strings.HasPrefix(existing, m.point+"/")) && len(m.point) > len(home.point) {
				home = m
			}
		}
		mem, ok1 := v1Mount(mounts, "memory")
		pids, ok2 := v1Mount(mounts, "pids")
		if home.point == "" || !ok1 || !ok2 {
			return nil, fmt.Errorf("cgroup parent %s: no v1 memory and pids hierarchies mounted", p)
		}
		rel := strings.TrimPrefix(p, home.point)
		b := newV1(cfg, filepath.Join(mem.point, rel), filepath.Join(pids.point, rel))
		for _, d := range b.dirs() {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return nil, fmt.Errorf("cgroup parent: %w", err)
			}
		}
		return b, nil
	default:
		return nil, fmt.Errorf("cgroup parent %s is not on a cgroup filesystem", p)
	}
}

// prepareV2 makes dir a parent whose children get the memory and pids
// controllers: enabled in its cgroup.subtree_control. When dir holds
// processes (and is not a root), the kernel refuses; if the agent is its only
// process and allowSelfMove is set, the agent moves itself into a leaf
// (dir/lancemaster-agent) first, as a systemd service with Delegate=yes must.
func prepareV2(cfg Config, dir string, allowSelfMove bool) (*cgroupBackend, error) {
	b := &cgroupBackend{v2: true, dir: dir, memLimit: cfg.MemoryLimitBytes, pidsLimit: cfg.PidsLimit, limits: !cfg.v2WithoutLimits}
	ctrls, err := readWords(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return nil, err
	}
	if !b.limits {
		return b, nil
	}
	if !slices.Contains(ctrls, "memory") || !slices.Contains(ctrls, "pids") {
		return nil, fmt.Errorf("%s offers controllers %q, not memory and pids (delegate them: docs/isolation.md)", dir, ctrls)
	}
	if sub, err := readWords(filepath.Join(dir, "cgroup.subtree_control")); err == nil &&
		slices.Contains(sub, "memory") && slices.Contains(sub, "pids") {
		return b, nil
	}
	enable := func() error { return writeFile(filepath.Join(dir, "cgroup.subtree_control"), "+memory +pids") }
	err = enable()
	if err == nil {
		return b, nil
	}
	if !errors.Is(err, unix.EBUSY) || !allowSelfMove {
		return nil, fmt.Errorf("enable memory and pids for children of %s: %w", dir, err)
	}
	procs, perr := readPids(filepath.Join(dir, "cgroup.procs"))
	if perr != nil || len(procs) != 1 || procs[0] != os.Getpid() {
		return nil, fmt.Errorf("enable memory and pids for children of %s: %w (other processes share the agent's cgroup; run the agent alone in a delegated cgroup)", dir, err)
	}
	leaf := filepath.Join(dir, agentLeaf)
	if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("create %s: %w", leaf, err)
	}
	if err := writeFile(filepath.Join(leaf, "cgroup.procs"), strconv.Itoa(os.Getpid())); err != nil {
		return nil, fmt.Errorf("move the agent into %s: %w", leaf, err)
	}
	if err := enable(); err != nil {
		return nil, fmt.Errorf("enable memory and pids for children of %s: %w", dir, err)
	}
	return b, nil
}

func readWords(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return strings.Fields(string(b)), nil
}

func readPids(path string) ([]int, error) {
	words, err := readWords(path)
	if err != nil {
		return nil, err
	}
	pids := make([]int, 0, len(words))
	for _, w := range words {
		if p, err := strconv.Atoi(w); err == nil {
			pids = append(pids, p)
		}
	}
	return pids, nil
}

func writeFile(path, v string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(v)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// readKey reads "key value" from a flat-keyed cgroup file (memory.events,
// memory.oom_control, cgroup.events).
func readKey(path, key string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok && k == key {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

func readInt(path string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n, err == nil
}
