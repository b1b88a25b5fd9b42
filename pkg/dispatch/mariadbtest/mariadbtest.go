// Package mariadbtest runs a real MariaDB server for tests: mariadbd on
// 127.0.0.1 and a free port, with a temporary data directory made by
// mariadb-install-db, a user with a password (authentication is on: tests
// of bad credentials need it) and a database the user owns.
//
// Installing the data directory takes seconds, so a test package shares
// one server (Shared) and stops it from its TestMain (StopShared). Where the
// binaries are missing the tests are skipped, except under CI (the
// environment variable CI is set), where they fail: CI installs
// mariadb-server (.ci/run).
package mariadbtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/pkg/testkit"

	"github.com/go-sql-driver/mysql"
)

const (
	// User and Password are the test user's; it has every privilege on DB.
	User     = "lmrefresh"
	Password = "Pw-5ecret-of-the-refresh-user"
	// DB is the test user's database.
	DB = "lm"

	startTimeout = 90 * time.Second // a loaded 2-core machine: install-db alone takes ~10 s there
	stopTimeout  = 30 * time.Second
)

// Server is one mariadbd. Stop and Start may be called from one test at a
// time (tests that stop the shared server must not run in parallel).
type Server struct {
	// Addr is 127.0.0.1:PORT; it stays the same across Stop and Start.
	Addr string

	bin, dir string
	port     int
	mu       sync.Mutex
	cmd      *exec.Cmd
	exited   chan struct{}
}

var (
	sharedOnce sync.Once
	shared     *Server
	sharedErr  error
)

// Binaries returns the paths of mariadbd and mariadb-install-db, or an
// error naming what is missing.
func Binaries() (server, installDB string, err error) {
	find := func(name string) (string, error) {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
		for _, dir := range []string{"/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin"} {
			p := filepath.Join(dir, name)
			if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
				return p, nil
			}
		}
		return "", fmt.Errorf("%s not found (install the Debian package mariadb-server)", name)
	}
	if server, err = find("mariadbd"); err != nil {
		return "", "", err
	}
	if installDB, err = find("mariadb-install-db"); err != nil {
		return "", "", err
	}
	return server, installDB, nil
}

// Shared returns the package's server, starting it on first use. Without
// the binaries it skips t, or fails it when CI is set.
func Shared(t testing.TB) *Server {
	t.Helper()
	requireBinaries(t)
	sharedOnce.Do(func() { shared, sharedErr = start() })
	if sharedErr != nil {
		t.Fatalf("start MariaDB: %v", sharedErr)
	}
	return shared
}

// New starts a server of t's own, stopped and removed when t ends: for a
// package with a single MariaDB test (no TestMain needed).
func New(t testing.TB) *Server {
	t.Helper()
	requireBinaries(t)
	s, err := start()
	if err != nil {
		t.Fatalf("start MariaDB: %v", err)
	}
	t.Cleanup(func() {
		_ = s.stop()
		_ = os.RemoveAll(s.dir)
	})
	return s
}

// requireBinaries skips t without the binaries, or fails it under CI.
func requireBinaries(t testing.TB) {
	t.Helper()
	if _, _, err := Binaries(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI needs a real MariaDB for this test: %v", err)
		}
		t.Skipf("no MariaDB on this machine: %v", err)
	}
}

// StopShared stops the shared server, if one was started, and removes its
// data directory. Call it from TestMain after m.Run.
func StopShared() {
	if shared != nil {
		_ = shared.stop()
		_ = os.RemoveAll(shared.dir)
	}
}

func start() (*Server, error) {
	bin, installDB, err := Binaries()
	if err != nil {
		return nil, err
	}
	// A short path: the socket's must fit in 108 bytes.
	dir, err := os.MkdirTemp("", "lm-mariadb-")
	if err != nil {
		return nil, err
	}
	s := &Server{bin: bin, dir: dir}
	ok := false
	defer func() {
		if !ok {
			_ = s.stop()
			_ = os.RemoveAll(dir)
		}
	}()
	args := []string{"--no-defaults", "--datadir=" + filepath.Join(dir, "data"), "--auth-root-authentication-method=normal",
		"--skip-test-db", "--skip-name-resolve"}
	args = append(args, userArgs()...)
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if out, err := exec.CommandContext(ctx, installDB, args...).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("mariadb-install-db: %v: %s", err, tail(out))
	}
	// A port taken between the probe and mariadbd's bind makes mariadbd
	// exit: try another.
	for attempt := 0; ; attempt++ {
		if s.port, err = freePort(); err != nil {
			return nil, err
		}
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
		if err = s.launch(); err == nil || attempt == 2 {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	root, err := s.rootDB()
	if err != nil {
		return nil, err
	}
	defer root.Close()
	for _, stmt := range []string{
		"CREATE DATABASE IF NOT EXISTS " + DB,
		fmt.Sprintf("CREATE USER IF NOT EXISTS '%s'@'%%' IDENTIFIED BY '%s'", User, Password),
		fmt.Sprintf("GRANT ALL ON %s.* TO '%s'@'%%'", DB, User),
	} {
		if _, err := root.ExecContext(ctx, stmt); err != nil {
			return nil, fmt.Errorf("setup: %v", err)
		}
	}
	ok = true
	return s, nil
}

func userArgs() []string {
	if os.Geteuid() == 0 {
		return []string{"--user=root"} // mariadbd refuses to run as root otherwise
	}
	return nil
}

// freePort reserves a loopback port for mariadbd, which binds it later.
func freePort() (int, error) {
	ps, err := testkit.ReservePorts(1)
	if err != nil {
		return 0, err
	}
	return ps[0], nil
}

// launch starts mariadbd and waits until it accepts a login, or exits.
func (s *Server) launch() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return errors.New("mariadbd is already running")
	}
	args := []string{"--no-defaults", "--datadir=" + filepath.Join(s.dir, "data"), "--port=" + strconv.Itoa(s.port),
		"--bind-address=127.0.0.1", "--socket=" + filepath.Join(s.dir, "sock"), "--pid-file=" + filepath.Join(s.dir, "pid"),
		"--log-error=" + filepath.Join(s.dir, "error.log"), "--skip-log-bin", "--skip-name-resolve",
		"--innodb-buffer-pool-size=16M", "--innodb-flush-log-at-trx-commit=0"}
	cmd := exec.Command(s.bin, append(args, userArgs()...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	setParentDeathSignal(cmd.SysProcAttr) // a killed test binary leaves no server behind
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	s.cmd, s.exited = cmd, exited

	deadline := time.Now().Add(startTimeout)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		db, err := s.rootDB()
		if err == nil {
			db.Close()
			return nil
		}
		select {
		case <-exited:
			s.cmd = nil
			log, _ := os.ReadFile(filepath.Join(s.dir, "error.log"))
			return fmt.Errorf("mariadbd exited during start: %s", tail(log))
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-exited
			s.cmd = nil
			return fmt.Errorf("mariadbd did not accept a login within %s: %v", startTimeout, err)
		}
	}
}

// rootDB opens a connection as root (no password over 127.0.0.1: how
// mariadb-install-db --auth-root-authentication-method=normal leaves it)
// and checks it.
func (s *Server) rootDB() (*sql.DB, error) {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr, cfg.Timeout = "root", "tcp", s.Addr, 2*time.Second
	cfg.ReadTimeout, cfg.WriteTimeout = 10*time.Second, 10*time.Second
	cfg.Logger = &mysql.NopLogger{}
	c, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(c)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// Root returns a connection pool as root, closed when t ends.
func (s *Server) Root(t testing.TB) *sql.DB {
	t.Helper()
	db, err := s.rootDB()
	if err != nil {
		t.Fatalf("connect to MariaDB as root: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// Columns returns the column names of table in DB, in order and joined by
// commas ("" when the table does not exist): how a test sees the effect of
// a statement that creates a table.
func (s *Server) Columns(t testing.TB, table string) string {
	t.Helper()
	db := s.Root(t)
	rows, err := db.Query("SELECT column_name FROM information_schema.columns WHERE table_schema = ? AND table_name = ? "+
		"ORDER BY ordinal_position", DB, table)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var cols []string
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			t.Fatal(err)
		}
		cols = append(cols, c)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(cols, ",")
}

// CredentialsFile writes the test user's credentials file (user and
// password lines) as dir/name.
func CredentialsFile(t testing.TB, dir, name string) {
	t.Helper()
	content := "# the refresh user\nuser=" + User + "\npassword=" + Password + "\n"
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// Stop stops the server (a refresh then finds nothing listening).
func (s *Server) Stop(t testing.TB) {
	t.Helper()
	if err := s.stop(); err != nil {
		t.Fatalf("stop MariaDB: %v", err)
	}
}

// Start starts a stopped server again, on the same port and data.
func (s *Server) Start(t testing.TB) {
	t.Helper()
	if err := s.launch(); err != nil {
		t.Fatalf("restart MariaDB: %v", err)
	}
}

// stop sends SIGTERM and waits for the exit (SIGKILL after stopTimeout).
func (s *Server) stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return nil
	}
	cmd, exited := s.cmd, s.exited
	s.cmd = nil
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
		return nil
	case <-time.After(stopTimeout):
		_ = cmd.Process.Kill()
		<-exited
		return fmt.Errorf("mariadbd ignored SIGTERM for %s; killed", stopTimeout)
	}
}

func tail(b []byte) string {
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}
