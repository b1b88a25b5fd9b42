package dispatch

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/pkg/config"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

// The mysql refresher's checks that need no server: the statement, the
// credentials file, and the bounds of a dead or silent address.

func TestMySQLRefreshStatement(t *testing.T) {
	req := RefreshRequest{Catalog: "lake", DB: "sales", Table: "or`ders"}
	got, err := MySQLRefreshStatement(req)
	if want := "REFRESH TABLE `lake`.`sales`.`or``ders`"; err != nil || got != want {
		t.Fatalf("default statement = %q, %v; want %q", got, err, want)
	}
	req.Statement = "REFRESH TABLE {table} -- {x}"
	if got, err = MySQLRefreshStatement(req); err != nil || got != "REFRESH TABLE `or``ders` -- {x}" {
		t.Fatalf("template = %q, %v", got, err)
	}
	for name, bad := range map[string]RefreshRequest{
		"NUL in a name":          {Catalog: "lake", DB: "db", Table: "t\x00; DROP TABLE x"},
		"newline in a name":      {Catalog: "lake", DB: "db\n", Table: "t"},
		"empty name":             {Catalog: "lake", DB: "", Table: "t"},
		"invalid UTF-8":          {Catalog: "lake", DB: "db", Table: "\xff"},
		"placeholder in quotes":  {Catalog: "lake", DB: "db", Table: "t", Statement: "SELECT '{table}'"},
		"unknown placeholder":    {Catalog: "lake", DB: "db", Table: "t", Statement: "REFRESH TABLE {schema}"},
		"name too long to quote": {Catalog: "lake", DB: "db", Table: strings.Repeat("t", 1025)},
	} {
		if got, err := MySQLRefreshStatement(bad); err == nil {
			t.Errorf("%s: accepted as %q", name, got)
		}
	}
}

func TestQuoteMySQLIdentifier(t *testing.T) {
	for in, want := range map[string]string{"t": "`t`", "a`b": "`a``b`", "``": "``````", "ä b'\"\\": "`ä b'\"\\`"} {
		if got, err := QuoteMySQLIdentifier(in); err != nil || got != want {
			t.Errorf("quote %q = %q, %v; want %q", in, got, err, want)
		}
	}
}

func TestMySQLRefreshConfigurationErrors(t *testing.T) {
	secrets := mySecrets(t, map[string]string{
		"nouser": "password=Pw-in-a-file-without-user\n",
		"extra":  "user=u\npassword=Pw-next-to-an-extra-key\nhost=fe1\n",
	})
	m := NewMySQLRefresher(MySQLOptions{Credentials: secrets})
	base := RefreshRequest{JobID: 3, Catalog: "lake", DB: "db", Table: "t", Address: "127.0.0.1:9", CredentialsRef: "nouser"}
	cases := map[string]struct {
		edit  func(r *RefreshRequest)
		m     *MySQLRefresher
		stage string
		says  string
	}{
		"no user key":        {nil, m, "credentials", "no user key"},
		"an unknown key":     {func(r *RefreshRequest) { r.CredentialsRef = "extra" }, m, "credentials", `unknown key "host"`},
		"no such file":       {func(r *RefreshRequest) { r.CredentialsRef = "missing" }, m, "credentials", "no such file"},
		"no reference":       {func(r *RefreshRequest) { r.CredentialsRef = "" }, m, "credentials", "no refresh credentials reference"},
		"no secrets dir":     {nil, NewMySQLRefresher(MySQLOptions{}), "credentials", "secrets_dir"},
		"no address":         {func(r *RefreshRequest) { r.Address = "" }, m, "configuration", "HOST:PORT"},
		"a bad statement":    {func(r *RefreshRequest) { r.Statement = "SELECT {" }, m, "configuration", "stray"},
		"a name with a NUL":  {func(r *RefreshRequest) { r.Table = "a\x00b" }, m, "configuration", "control character"},
		"userinfo in addr":   {func(r *RefreshRequest) { r.Address = "u:Pw-in-an-address@h:1" }, m, "configuration", "HOST:PORT"},
		"path as credential": {func(r *RefreshRequest) { r.CredentialsRef = "../nouser" }, m, "credentials", "path separator"},
	}
	for name, c := range cases {
		req := base
		if c.edit != nil {
			c.edit(&req)
		}
		err := c.m.Refresh(context.Background(), req)
		var me *MySQLRefreshError
		if !errors.As(err, &me) || me.Stage != c.stage || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v; want stage %s saying %q", name, err, c.stage, c.says)
			continue
		}
		for _, secret := range []string{"Pw-in-a-file-without-user", "Pw-next-to-an-extra-key", "Pw-in-an-address"} {
			if strings.Contains(err.Error(), secret) {
				t.Errorf("%s: %q carries a secret", name, err)
			}
		}
	}
	var ce *config.CredentialsError
	if err := m.Refresh(context.Background(), base); !errors.As(err, &ce) {
		t.Errorf("a credentials failure does not unwrap to *config.CredentialsError: %v", err)
	}
}

func TestMySQLRefreshNothingListening(t *testing.T) {
	m := NewMySQLRefresher(MySQLOptions{Credentials: mySecrets(t, map[string]string{"r": "user=u\npassword=Pw-for-a-dead-port\n"})})
	addr := rfDeadAddress(t)
	err := m.Refresh(context.Background(), RefreshRequest{JobID: 4, Catalog: "lake", DB: "db", Table: "t", Address: addr, CredentialsRef: "r"})
	var me *MySQLRefreshError
	if !errors.As(err, &me) || me.Stage != "connect" || !strings.Contains(err.Error(), "refused") || !strings.Contains(err.Error(), addr) {
		t.Fatalf("dead address: %v", err)
	}
	myNoSecret(t, err, "Pw-for-a-dead-port")
}

// A server that accepts and never answers holds a refresh only until ctx's
// deadline.
func TestMySQLRefreshBoundedByContext(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	held := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			held <- c // silent: no handshake
		}
	}()
	t.Cleanup(func() {
		for len(held) > 0 {
			(<-held).Close()
		}
	})
	m := NewMySQLRefresher(MySQLOptions{Credentials: mySecrets(t, map[string]string{"r": "user=u\npassword=Pw-for-a-silent-server\n"})})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = m.Refresh(ctx, RefreshRequest{JobID: 5, Catalog: "lake", DB: "db", Table: "t", Address: l.Addr().String(), CredentialsRef: "r"})
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 5*time.Second {
		t.Fatalf("silent server: %v after %s; want the deadline", err, time.Since(start))
	}
	cancelled, stop := context.WithCancel(context.Background())
	stop()
	if err := m.Refresh(cancelled, RefreshRequest{JobID: 6, Catalog: "lake", DB: "db", Table: "t", Address: l.Addr().String(),
		CredentialsRef: "r"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled ctx: %v", err)
	}
	if _, ok := DefaultRefreshers(nil, nil)[raftfsm.RefreshMySQL].(*MySQLRefresher); !ok {
		t.Fatalf("DefaultRefreshers has no mysql refresher")
	}
}
