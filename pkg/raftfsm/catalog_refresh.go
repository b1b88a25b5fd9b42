package raftfsm

import (
	"net"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/lancemaster/lancemaster/pkg/job"
)

// The mysql refresh kind and the OPTIMIZE policy fields of a catalog: their
// bounds, checks and the statement template. The FSM (normalizeCatalog),
// the admin API and the mysql refresher share these, so a template the FSM
// stored is one the refresher can expand.

const (
	// DefaultRefreshStatement is what refresh kind mysql runs when the
	// catalog names no statement: Apache Doris's reload of one table's
	// metadata.
	DefaultRefreshStatement = "REFRESH TABLE {catalog}.{db}.{table}"
	// MaxRefreshStatementBytes bounds a statement template.
	MaxRefreshStatementBytes = 4096
	// MaxRefreshPlaceholders bounds the placeholders of one template, and so
	// the size of the statement they expand to.
	MaxRefreshPlaceholders = 16
	// MaxRefreshAddressBytes bounds HOST:PORT (a 255-byte host name, the
	// colon, five digits and IPv6 brackets).
	MaxRefreshAddressBytes = 263

	// DefaultOptimizeMinIntervalSecond is the stored interval of an
	// OPTIMIZE policy that was switched on without one.
	DefaultOptimizeMinIntervalSecond = 3600
	// MaxOptimizeMinIntervalSecond bounds the interval (366 days).
	MaxOptimizeMinIntervalSecond = 366 * 24 * 3600
)

// The placeholders of a statement template. Each stands for one name,
// substituted as a quoted identifier by the refresher.
const (
	PlaceholderCatalog = "{catalog}"
	PlaceholderDB      = "{db}"
	PlaceholderTable   = "{table}"
)

var refreshPlaceholders = []string{PlaceholderCatalog, PlaceholderDB, PlaceholderTable}

// ValidateRefreshAddress checks a mysql refresh address: HOST:PORT with a
// port in 1..65535 and a host of letters, digits and . - _ (or a bracketed
// IPv6 address). Its message never quotes the address.
func ValidateRefreshAddress(addr string) error {
	if err := job.CheckBytes("refresh address", addr, MaxRefreshAddressBytes); err != nil {
		return err
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return job.Errorf(job.CodeInvalid, "refresh address must be HOST:PORT (a Doris FE's MySQL query port, e.g. fe1:9030)")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
		return job.Errorf(job.CodeInvalid, "refresh address: the port must be a number in 1..65535")
	}
	for _, r := range host {
		ok := r < utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune(".-_:%", r))
		if !ok {
			return job.Errorf(job.CodeInvalid, "refresh address: the host may hold only letters, digits and . - _ (or an IPv6 address in brackets)")
		}
	}
	return nil
}

// ValidateRefreshCredentialsRef checks a non-empty mysql credentials
// reference: a plain file name under the secrets directory.
func ValidateRefreshCredentialsRef(ref string) error {
	if err := job.ValidatePathName("refresh credentials reference", ref); err != nil {
		return err
	}
	return job.CheckBytes("refresh credentials reference", ref, job.MaxCredentialsRefBytes)
}

// ValidateRefreshStatement checks a non-empty statement template: valid
// UTF-8 of at most MaxRefreshStatementBytes without control characters
// (tab and line breaks aside), whose only brace-delimited words are the
// placeholders {catalog} {db} {table}, every one outside quotes and
// comments (the refresher quotes the name itself; a name pasted inside a
// string literal could end it). Quotes and comments must be closed.
func ValidateRefreshStatement(tmpl string) error {
	_, err := ExpandRefreshStatement(tmpl, func(string) string { return "x" })
	return err
}

// ExpandRefreshStatement checks tmpl (ValidateRefreshStatement) and returns
// it with every placeholder replaced by value(placeholder).
//
// The template is scanned twice, with backslash escapes in string literals
// and without them (the server's sql_mode decides which applies): a
// placeholder must stand outside quotes and comments under both readings.
func ExpandRefreshStatement(tmpl string, value func(placeholder string) string) (string, error) {
	if err := job.CheckBytes("refresh statement", tmpl, MaxRefreshStatementBytes); err != nil {
		return "", err
	}
	if strings.TrimSpace(tmpl) == "" {
		return "", job.Errorf(job.CodeInvalid, "refresh statement is blank")
	}
	if !utf8.ValidString(tmpl) {
		return "", job.Errorf(job.CodeInvalid, "refresh statement is not valid UTF-8")
	}
	if strings.ContainsFunc(tmpl, func(r rune) bool { return unicode.IsControl(r) && r != '\t' && r != '\n' && r != '\r' }) {
		return "", job.Errorf(job.CodeInvalid, "refresh statement contains a control character")
	}
	if _, err := scanTemplate(tmpl, false, nil); err != nil {
		return "", err
	}
	return scanTemplate(tmpl, true, value)
}

// templateState is where scanTemplate is: in SQL code, a quoted run or a
// comment.
type templateState int

const (
	inCode templateState = iota
	inQuote
	inLineComment
	inBlockComment
)

// scanTemplate walks tmpl; with value != nil it also builds the expansion.
// Errors name byte offsets, never template content beyond a placeholder.
func scanTemplate(tmpl string, backslashEscapes bool, value func(string) string) (string, error) {
	var out strings.Builder
	state, quote, placeholders := inCode, byte(0), 0
	for i := 0; i < len(tmpl); {
		c := tmpl[i]
		if c == '{' {
			if p := placeholderAt(tmpl, i); p != "" {
				if state != inCode {
					return "", job.Errorf(job.CodeInvalid,
						"refresh statement: placeholder %s at byte %d is inside quotes or a comment; write it bare (it is substituted as a quoted identifier)", p, i)
				}
				if placeholders++; placeholders > MaxRefreshPlaceholders {
					return "", job.Errorf(job.CodeInvalid, "refresh statement has more than %d placeholders", MaxRefreshPlaceholders)
				}
				if value != nil {
					out.WriteString(value(p))
				}
				i += len(p)
				continue
			}
		}
		if state == inCode && (c == '{' || c == '}') {
			return "", job.Errorf(job.CodeInvalid,
				"refresh statement: stray %q at byte %d (the only placeholders are {catalog} {db} {table})", c, i)
		}
		n := 1 // bytes consumed
		switch state {
		case inCode:
			switch {
			case c == '\'' || c == '"' || c == '`':
				state, quote = inQuote, c
			case c == '#' || strings.HasPrefix(tmpl[i:], "--"):
				state = inLineComment
			case strings.HasPrefix(tmpl[i:], "/*"):
				state, n = inBlockComment, 2
			}
		case inQuote:
			switch {
			case c == '\\' && backslashEscapes && quote != '`' && i+1 < len(tmpl):
				n = 2
			case c == quote && i+1 < len(tmpl) && tmpl[i+1] == quote: // a doubled quote
				n = 2
			case c == quote:
				state = inCode
			}
		case inLineComment:
			if c == '\n' {
				state = inCode
			}
		case inBlockComment:
			if strings.HasPrefix(tmpl[i:], "*/") {
				state, n = inCode, 2
			}
		}
		if value != nil {
			out.WriteString(tmpl[i : i+n])
		}
		i += n
	}
	switch state {
	case inQuote:
		return "", job.Errorf(job.CodeInvalid, "refresh statement has an unclosed %c quote", quote)
	case inBlockComment:
		return "", job.Errorf(job.CodeInvalid, "refresh statement has an unclosed /* comment")
	}
	return out.String(), nil
}

func placeholderAt(s string, i int) string {
	for _, p := range refreshPlaceholders {
		if strings.HasPrefix(s[i:], p) {
			return p
		}
	}
	return ""
}

// normalizeCatalogRefresh checks the refresh fields against the kind (the
// kind is already lower case and known): each kind's fields are required
// by it and refused by the others.
func normalizeCatalogRefresh(c *Catalog) error {
	if c.RefreshKind != RefreshWebhook && c.RefreshURL != "" {
		return job.Errorf(job.CodeInvalid, "a refresh URL needs refresh kind %q", RefreshWebhook)
	}
	if c.RefreshKind != RefreshMySQL && (c.RefreshAddress != "" || c.RefreshStatement != "" || c.RefreshCredentialsRef != "") {
		return job.Errorf(job.CodeInvalid, "a refresh address, statement or refresh credentials reference needs refresh kind %q", RefreshMySQL)
	}
	switch c.RefreshKind {
	case RefreshWebhook:
		if c.RefreshURL == "" {
			return job.Errorf(job.CodeInvalid, "refresh kind %q needs a refresh URL", RefreshWebhook)
		}
		return job.CheckBytes("refresh URL", c.RefreshURL, job.MaxURIBytes)
	case RefreshMySQL:
		if c.RefreshAddress == "" || c.RefreshCredentialsRef == "" {
			return job.Errorf(job.CodeInvalid, "refresh kind %q needs a refresh address (HOST:PORT) and a refresh credentials reference", RefreshMySQL)
		}
		if err := ValidateRefreshAddress(c.RefreshAddress); err != nil {
			return err
		}
		if err := ValidateRefreshCredentialsRef(c.RefreshCredentialsRef); err != nil {
			return err
		}
		if c.RefreshStatement != "" {
			return ValidateRefreshStatement(c.RefreshStatement)
		}
	}
	return nil
}

// ValidateOptimizePolicy checks the OPTIMIZE policy fields.
func ValidateOptimizePolicy(unindexedRows, minIntervalSecond int64) error {
	if unindexedRows < 0 {
		return job.Errorf(job.CodeInvalid, "optimize unindexed rows must be ≥ 0 (0 switches the OPTIMIZE policy off)")
	}
	if minIntervalSecond < 0 || minIntervalSecond > MaxOptimizeMinIntervalSecond {
		return job.Errorf(job.CodeInvalid, "optimize min interval must be in 0..%d seconds (0: the default, %d)",
			MaxOptimizeMinIntervalSecond, DefaultOptimizeMinIntervalSecond)
	}
	return nil
}

// normalizeOptimizePolicy checks the policy and stores the default interval
// when the policy is on and has none.
func normalizeOptimizePolicy(c *Catalog) error {
	if err := ValidateOptimizePolicy(c.OptimizeUnindexedRows, c.OptimizeMinIntervalSecond); err != nil {
		return err
	}
	if c.OptimizeUnindexedRows > 0 && c.OptimizeMinIntervalSecond == 0 {
		c.OptimizeMinIntervalSecond = DefaultOptimizeMinIntervalSecond
	}
	return nil
}
