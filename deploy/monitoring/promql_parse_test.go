package monitoring

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// The PromQL subset's lexer and parser (promql_test.go has the evaluator).

type parser struct {
	toks []string
	pos  int
}

func lex(s string) ([]string, error) {
	var toks []string
	for i := 0; i < len(s); {
		c := rune(s[i])
		switch {
		case unicode.IsSpace(c):
			i++
		case c == '"':
			j := i + 1
			for j < len(s) && s[j] != '"' {
				j++
			}
			if j == len(s) {
				return nil, fmt.Errorf("unterminated string at %d", i)
			}
			toks = append(toks, s[i:j+1])
			i = j + 1
		case c == '[':
			j := strings.IndexByte(s[i:], ']')
			if j < 0 {
				return nil, fmt.Errorf("unterminated range at %d", i)
			}
			toks = append(toks, s[i:i+j+1])
			i += j + 1
		case unicode.IsLetter(c) || c == '_' || c == ':' || unicode.IsDigit(c) || c == '.':
			j := i
			for j < len(s) && (unicode.IsLetter(rune(s[j])) || unicode.IsDigit(rune(s[j])) || strings.ContainsRune("_:.", rune(s[j]))) {
				j++
			}
			toks = append(toks, s[i:j])
			i = j
		default:
			if i+1 < len(s) && contains([]string{"==", "!=", ">=", "<=", "=~", "!~"}, s[i:i+2]) {
				toks = append(toks, s[i:i+2])
				i += 2
				continue
			}
			if !strings.ContainsRune("(){},=<>+-*/", c) {
				return nil, fmt.Errorf("unexpected %q at %d", c, i)
			}
			toks = append(toks, string(c))
			i++
		}
	}
	return toks, nil
}

func parseExpr(s string) (n node, err error) {
	toks, err := lex(s)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks}
	defer func() {
		if r := recover(); r != nil {
			n, err = nil, fmt.Errorf("parse %q: %v", s, r)
		}
	}()
	n = p.binary(0)
	if p.pos != len(p.toks) {
		panic(fmt.Sprintf("unexpected %q", p.toks[p.pos]))
	}
	return n, nil
}

func (p *parser) peek() string {
	if p.pos < len(p.toks) {
		return p.toks[p.pos]
	}
	return ""
}

func (p *parser) next() string {
	t := p.peek()
	if t == "" {
		panic("unexpected end")
	}
	p.pos++
	return t
}

func (p *parser) expect(t string) {
	if got := p.next(); got != t {
		panic(fmt.Sprintf("want %q, got %q", t, got))
	}
}

var levels = [][]string{{"or"}, {"and", "unless"}, {"==", "!=", ">=", "<=", ">", "<"}, {"+", "-"}, {"*", "/"}}

func (p *parser) binary(level int) node {
	if level == len(levels) {
		return p.unary()
	}
	lhs := p.binary(level + 1)
	for contains(levels[level], p.peek()) {
		b := &binary{op: p.next(), lhs: lhs}
		if p.peek() == "bool" {
			panic("bool modifier not supported")
		}
		if p.peek() == "on" {
			p.next()
			b.hasOn, b.on = true, p.labelList()
		}
		if p.peek() == "group_left" {
			p.next()
			b.groupLeft = true
			if p.peek() == "(" {
				if len(p.labelList()) > 0 {
					panic("group_left labels not supported")
				}
			}
		}
		b.rhs = p.binary(level + 1)
		lhs = b
	}
	return lhs
}

func (p *parser) labelList() []string {
	p.expect("(")
	var ls []string
	for p.peek() != ")" {
		ls = append(ls, p.next())
		if p.peek() == "," {
			p.next()
		}
	}
	p.next()
	return ls
}

var aggOps = []string{"sum", "max", "min", "count", "avg"}

func (p *parser) unary() node {
	t := p.next()
	switch {
	case t == "(":
		n := p.binary(0)
		p.expect(")")
		return n
	case t == "-":
		return &binary{op: "*", lhs: numLit{-1}, rhs: p.unary()}
	case unicode.IsDigit(rune(t[0])):
		v, err := strconv.ParseFloat(t, 64)
		if err != nil {
			panic(err)
		}
		return numLit{v}
	case contains(aggOps, t):
		a := &agg{op: t}
		if p.peek() == "by" {
			p.next()
			a.by = p.labelList()
		}
		p.expect("(")
		a.expr = p.binary(0)
		p.expect(")")
		if p.peek() == "by" {
			p.next()
			a.by = p.labelList()
		}
		return a
	case p.peek() == "(":
		p.next()
		c := &call{fn: t}
		for p.peek() != ")" {
			c.args = append(c.args, p.binary(0))
			if p.peek() == "," {
				p.next()
			}
		}
		p.next()
		return c
	default:
		return p.selector(t)
	}
}

func (p *parser) selector(name string) *selector {
	s := &selector{matchers: []matcher{{name: "__name__", val: name}}}
	if p.peek() == "{" {
		s.matchers = append(s.matchers, parseMatchers(p)...)
	}
	if strings.HasPrefix(p.peek(), "[") {
		d, err := parseDuration(strings.Trim(p.next(), "[]"))
		if err != nil {
			panic(err)
		}
		s.rng = d
	}
	return s
}

func parseMatchers(p *parser) []matcher {
	p.expect("{")
	var ms []matcher
	for p.peek() != "}" {
		m := matcher{name: p.next()}
		switch op := p.next(); op {
		case "=":
		case "!=":
			m.neq = true
		default:
			panic(fmt.Sprintf("matcher %q not supported", op))
		}
		v, err := strconv.Unquote(p.next())
		if err != nil {
			panic(err)
		}
		m.val = v
		ms = append(ms, m)
		if p.peek() == "," {
			p.next()
		}
	}
	p.next()
	return ms
}

// parseDuration reads a Prometheus duration: 30s, 5m, 1h, 2d.
func parseDuration(s string) (time.Duration, error) {
	if strings.HasSuffix(s, "d") {
		n, err := strconv.Atoi(strings.TrimSuffix(s, "d"))
		return time.Duration(n) * 24 * time.Hour, err
	}
	return time.ParseDuration(s)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
