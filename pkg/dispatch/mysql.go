package dispatch

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/go-sql-driver/mysql"

	"github.com/lancemaster/lancemaster/pkg/config"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

const (
	// DefaultMySQLTimeout bounds one mysql refresh (connect, log in, run the
	// statement) when the caller's ctx allows longer.
	DefaultMySQLTimeout = 10 * time.Second
	// MySQLUserKey and MySQLPasswordKey are the keys of a mysql refresh
	// credentials file.
	MySQLUserKey     = "user"
	MySQLPasswordKey = "password"
	// maxMySQLDetail bounds the server's or the network's words quoted in
	// an error.
	maxMySQLDetail = 512
)

// MySQLOptions configure a MySQLRefresher. Zero values take defaults.
type MySQLOptions struct {
	// Credentials resolves a catalog's refresh_credentials_ref at every
	// refresh (config.DirCredentials over the node's secrets_dir), so a
	// rotated file is used by the next refresh. Nil: every refresh fails
	// with a clear error.
	Credentials config.CredentialSource
	// Timeout bounds each refresh (DefaultMySQLTimeout); the caller's ctx
	// may end it sooner.
	Timeout time.Duration
}

// MySQLRefresher is refresh kind "mysql": it logs in to the catalog's
// refresh_address (a MySQL-protocol endpoint such as an Apache Doris FE's
// query port) as the user of the catalog's credentials file and runs the
// catalog's statement template, by default raftfsm.DefaultRefreshStatement,
// with {catalog} {db} {table} substituted as backtick-quoted identifiers.
// One connection per refresh, closed after it; no TLS, no cleartext
// password (the server's challenge-response login).
//
// The statement must be idempotent (Doris's REFRESH TABLE is): a refresh
// is repeated after a failure or a change of leader.
//
// It never logs, and its errors (*MySQLRefreshError) never carry the
// password or a DSN. Safe for concurrent use.
type MySQLRefresher struct {
	creds   config.CredentialSource
	timeout time.Duration
}

// NewMySQLRefresher returns a MySQLRefresher.
func NewMySQLRefresher(o MySQLOptions) *MySQLRefresher {
	if o.Timeout <= 0 {
		o.Timeout = DefaultMySQLTimeout
	}
	return &MySQLRefresher{creds: o.Credentials, timeout: o.Timeout}
}

// MySQLRefreshError is a failed mysql refresh. Its message names the job,
// the catalog, the address and the stage; Detail is what the server or the
// network said, with the password (if it appears at all) replaced.
type MySQLRefreshError struct {
	JobID   int64
	Catalog string
	Address string
	Stage   string // "configuration", "credentials", "connect" or "execute"
	Number  uint16 // the server's error number (0: none)
	Detail  string
	cause   error // a context or credentials error, for errors.Is/As; never a driver error
}

func (e *MySQLRefreshError) Error() string {
	num := ""
	if e.Number != 0 {
		num = fmt.Sprintf(" (server error %d)", e.Number)
	}
	return fmt.Sprintf("mysql refresh of job %d (catalog %q, %s): %s%s: %s", e.JobID, e.Catalog, e.Address, e.Stage, num, e.Detail)
}

func (e *MySQLRefreshError) Unwrap() error { return e.cause }

// Refresh runs the catalog's statement for the job's table.
func (m *MySQLRefresher) Refresh(ctx context.Context, r RefreshRequest) error {
	fail := func(stage string, detail string, cause error) error {
		return &MySQLRefreshError{JobID: r.JobID, Catalog: r.Catalog, Address: r.Address, Stage: stage, Detail: detail, cause: cause}
	}
	if err := raftfsm.ValidateRefreshAddress(r.Address); err != nil {
		r.Address = "?"
		return fail("configuration", jobMessage(err), nil)
	}
	stmt, err := MySQLRefreshStatement(r)
	if err != nil {
		return fail("configuration", jobMessage(err), nil)
	}
	user, pass, err := m.credentials(r.CredentialsRef)
	if err != nil {
		return fail("credentials", err.Error(), err)
	}
	ctx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	deadline, _ := ctx.Deadline()
	left := time.Until(deadline)
	if left <= 0 || ctx.Err() != nil {
		return fail("connect", "no time left in the refresh budget", ctx.Err())
	}
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd, cfg.Net, cfg.Addr = user, pass, "tcp", r.Address
	cfg.Timeout, cfg.ReadTimeout, cfg.WriteTimeout = left, left, left
	cfg.Logger = &mysql.NopLogger{} // the driver's own lines would bypass this package's redaction
	cfg.InterpolateParams, cfg.MultiStatements, cfg.AllowCleartextPasswords = false, false, false
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return fail("configuration", "the driver refused the connection settings", nil)
	}
	conn, err := connector.Connect(ctx)
	if err != nil {
		return driverError(fail, "connect", ctx, deadline, err, pass)
	}
	defer conn.Close()
	ex, ok := conn.(driver.ExecerContext)
	if !ok {
		return fail("execute", "the driver connection cannot execute statements", nil)
	}
	if _, err := ex.ExecContext(ctx, stmt, nil); err != nil {
		return driverError(fail, "execute", ctx, deadline, err, pass)
	}
	return nil
}

// driverError turns a driver error into a MySQLRefreshError: the server's
// number and message, or the network's words, clipped, with the password
// replaced should a server or a network error ever echo it. Past the
// deadline it is the budget's error whatever the driver said: the I/O
// timeouts (set to the same deadline) may fire before ctx reports it.
func driverError(fail func(string, string, error) error, stage string, ctx context.Context, deadline time.Time,
	err error, pass string) error {
	var cause error
	detail := err.Error()
	var number uint16
	var me *mysql.MySQLError
	switch {
	case errors.As(err, &me):
		number, detail = me.Number, me.Message
	case ctx.Err() != nil || !time.Now().Before(deadline):
		cause = ctx.Err()
		if cause == nil {
			cause = context.DeadlineExceeded
		}
		detail = "no answer within the refresh budget (" + cause.Error() + ")"
	case errors.Is(err, driver.ErrBadConn) || errors.Is(err, mysql.ErrInvalidConn):
		detail = "the connection broke (is the server up?)"
	}
	if pass != "" {
		detail = strings.ReplaceAll(detail, pass, "[redacted]")
	}
	detail = strings.Map(func(r rune) rune { // one line, whatever the server sent
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, detail)
	if len(detail) > maxMySQLDetail {
		detail = strings.ToValidUTF8(detail[:maxMySQLDetail], "") + "…"
	}
	e := fail(stage, detail, cause).(*MySQLRefreshError)
	e.Number = number
	return e
}

// credentials reads user and password from the credentials file.
func (m *MySQLRefresher) credentials(ref string) (user, pass string, err error) {
	if ref == "" {
		return "", "", errors.New("the catalog names no refresh credentials reference")
	}
	if m.creds == nil {
		return "", "", &config.CredentialsError{Ref: ref, Reason: "no secrets directory is configured (secrets_dir)"}
	}
	kv, err := m.creds.Resolve(ref)
	if err != nil {
		return "", "", err
	}
	for k := range kv {
		if k != MySQLUserKey && k != MySQLPasswordKey {
			return "", "", &config.CredentialsError{Ref: ref,
				Reason: fmt.Sprintf("unknown key %q (a mysql refresh credentials file holds only %s and %s)", clipKey(k), MySQLUserKey, MySQLPasswordKey)}
		}
	}
	user = kv[MySQLUserKey]
	if user == "" {
		return "", "", &config.CredentialsError{Ref: ref, Reason: "no " + MySQLUserKey + " key (a mysql refresh credentials file holds user and password)"}
	}
	return user, kv[MySQLPasswordKey], nil
}

func clipKey(k string) string {
	if len(k) > 64 {
		return strings.ToValidUTF8(k[:64], "") + "…"
	}
	return k
}

// MySQLRefreshStatement is the statement a mysql refresh of r runs: the
// catalog's template (raftfsm.DefaultRefreshStatement when it has none)
// with each placeholder replaced by its name as a quoted identifier.
func MySQLRefreshStatement(r RefreshRequest) (string, error) {
	tmpl := r.Statement
	if tmpl == "" {
		tmpl = raftfsm.DefaultRefreshStatement
	}
	quoted := map[string]string{}
	for p, name := range map[string]string{raftfsm.PlaceholderCatalog: r.Catalog, raftfsm.PlaceholderDB: r.DB,
		raftfsm.PlaceholderTable: r.Table} {
		q, err := QuoteMySQLIdentifier(name)
		if err != nil {
			return "", job.Errorf(job.CodeInvalid, "%s: %s", p, jobMessage(err))
		}
		quoted[p] = q
	}
	return raftfsm.ExpandRefreshStatement(tmpl, func(p string) string { return quoted[p] })
}

// QuoteMySQLIdentifier backtick-quotes name, doubling any backtick in it.
// A name that cannot stand in a statement safely is an error: empty, not
// UTF-8, longer than job.MaxNameBytes, or holding a control character
// (NUL among them).
func QuoteMySQLIdentifier(name string) (string, error) {
	switch {
	case name == "":
		return "", job.Errorf(job.CodeInvalid, "an empty name cannot be quoted as an identifier")
	case len(name) > job.MaxNameBytes:
		return "", job.Errorf(job.CodeInvalid, "a name longer than %d bytes cannot be quoted as an identifier", job.MaxNameBytes)
	case !utf8.ValidString(name):
		return "", job.Errorf(job.CodeInvalid, "a name that is not valid UTF-8 cannot be quoted as an identifier")
	case strings.ContainsFunc(name, unicode.IsControl):
		return "", job.Errorf(job.CodeInvalid, "a name with a control character cannot be quoted as an identifier")
	}
	return "`" + strings.ReplaceAll(name, "`", "``") + "`", nil
}

// jobMessage is a typed error's message without its code prefix.
func jobMessage(err error) string {
	var je *job.Error
	if errors.As(err, &je) {
		return je.Message
	}
	return err.Error()
}
