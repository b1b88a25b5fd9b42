package monitoring

// A small PromQL evaluator for the rule tests (docs/decisions.md says why
// not Prometheus's own engine). It covers what deploy/monitoring/alerts.yml
// uses and fails loudly on anything else: selectors with = and != matchers,
// range selectors, sum/max/min/count/avg [by (...)], absent, time, increase,
// delta, arithmetic, comparisons (filtering), and/or/unless, on(...) and
// group_left. increase and delta are last minus first sample in the
// window (counter resets handled) without Prometheus's extrapolation:
// the tests only compare them with 0.

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

const lookback = 5 * time.Minute

type point struct {
	t time.Duration // since the start of the test
	v float64
}

type series struct {
	labels map[string]string // with __name__
	points []point
}

type sample struct {
	labels map[string]string
	v      float64
}

type value struct {
	scalar bool
	s      float64
	vec    []sample
}

type matcher struct {
	name, val string
	neq       bool
}

type node interface{}

type (
	numLit   struct{ v float64 }
	selector struct {
		matchers []matcher
		rng      time.Duration
	}
	call struct {
		fn   string
		args []node
	}
	agg struct {
		op   string
		by   []string
		expr node
	}
	binary struct {
		op        string
		lhs, rhs  node
		on        []string
		hasOn     bool
		groupLeft bool
	}
)

func (m matcher) matches(ls map[string]string) bool { return (ls[m.name] == m.val) != m.neq }

func (s *selector) matching(db []series) []series {
	var out []series
next:
	for _, se := range db {
		for _, m := range s.matchers {
			if !m.matches(se.labels) {
				continue next
			}
		}
		out = append(out, se)
	}
	return out
}

func eval(n node, db []series, t time.Duration) value {
	switch n := n.(type) {
	case numLit:
		return value{scalar: true, s: n.v}
	case *selector:
		if n.rng != 0 {
			panic("a range selector outside a function")
		}
		var vec []sample
		for _, se := range n.matching(db) {
			for i := len(se.points) - 1; i >= 0; i-- {
				if pt := se.points[i]; pt.t <= t && pt.t > t-lookback {
					vec = append(vec, sample{se.labels, pt.v})
					break
				}
			}
		}
		return value{vec: vec}
	case *call:
		return evalCall(n, db, t)
	case *agg:
		return evalAgg(n, eval(n.expr, db, t))
	case *binary:
		return evalBinary(n, eval(n.lhs, db, t), eval(n.rhs, db, t))
	}
	panic(fmt.Sprintf("cannot evaluate %T", n))
}

func evalCall(c *call, db []series, t time.Duration) value {
	switch c.fn {
	case "time":
		return value{scalar: true, s: t.Seconds()}
	case "absent":
		if len(eval(c.args[0], db, t).vec) > 0 {
			return value{}
		}
		ls := map[string]string{}
		if s, ok := c.args[0].(*selector); ok {
			for _, m := range s.matchers {
				if !m.neq && m.name != "__name__" {
					ls[m.name] = m.val
				}
			}
		}
		return value{vec: []sample{{ls, 1}}}
	case "increase", "delta":
		s, ok := c.args[0].(*selector)
		if !ok || s.rng == 0 {
			panic(c.fn + " needs a range selector")
		}
		var vec []sample
		for _, se := range s.matching(db) {
			var win []point
			for _, pt := range se.points {
				if pt.t <= t && pt.t > t-s.rng {
					win = append(win, pt)
				}
			}
			if len(win) < 2 {
				continue
			}
			d := win[len(win)-1].v - win[0].v
			if c.fn == "increase" {
				d = 0
				for i := 1; i < len(win); i++ {
					if win[i].v >= win[i-1].v {
						d += win[i].v - win[i-1].v
					} else {
						d += win[i].v // a counter reset
					}
				}
			}
			vec = append(vec, sample{dropName(se.labels), d})
		}
		return value{vec: vec}
	}
	panic("function " + c.fn + " not supported")
}

func dropName(ls map[string]string) map[string]string {
	out := make(map[string]string, len(ls))
	for k, v := range ls {
		if k != "__name__" {
			out[k] = v
		}
	}
	return out
}

// key is the signature of ls restricted to on (hasOn), or of every label
// but the name.
func key(ls map[string]string, on []string, hasOn bool) string {
	var parts []string
	for k, v := range ls {
		if (hasOn && contains(on, k)) || (!hasOn && k != "__name__") {
			parts = append(parts, k+"="+strconv.Quote(v))
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

func evalAgg(a *agg, in value) value {
	if in.scalar {
		panic(a.op + " of a scalar")
	}
	groups := map[string][]sample{}
	var order []string
	for _, s := range in.vec {
		k := key(s.labels, a.by, true)
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], s)
	}
	var out []sample
	for _, k := range order {
		g := groups[k]
		ls := map[string]string{}
		for _, l := range a.by {
			if v, ok := g[0].labels[l]; ok {
				ls[l] = v
			}
		}
		v := g[0].v
		sum := 0.0
		for _, s := range g {
			sum += s.v
			switch a.op {
			case "max":
				v = math.Max(v, s.v)
			case "min":
				v = math.Min(v, s.v)
			}
		}
		switch a.op {
		case "sum":
			v = sum
		case "count":
			v = float64(len(g))
		case "avg":
			v = sum / float64(len(g))
		}
		out = append(out, sample{ls, v})
	}
	return value{vec: out}
}

func apply(op string, a, b float64) (float64, bool) {
	switch op {
	case "+":
		return a + b, true
	case "-":
		return a - b, true
	case "*":
		return a * b, true
	case "/":
		return a / b, true
	case "==":
		return a, a == b
	case "!=":
		return a, a != b
	case ">":
		return a, a > b
	case "<":
		return a, a < b
	case ">=":
		return a, a >= b
	case "<=":
		return a, a <= b
	}
	panic("operator " + op)
}

func isComparison(op string) bool { return contains(levels[2], op) }

func evalBinary(b *binary, l, r value) value {
	switch {
	case l.scalar && r.scalar:
		if isComparison(b.op) {
			panic("a scalar comparison needs bool")
		}
		v, _ := apply(b.op, l.s, r.s)
		return value{scalar: true, s: v}
	case l.scalar || r.scalar:
		vec, sc, scalarLeft := r.vec, l.s, true
		if r.scalar {
			vec, sc, scalarLeft = l.vec, r.s, false
		}
		var out []sample
		for _, s := range vec {
			x, y := s.v, sc
			if scalarLeft {
				x, y = sc, s.v
			}
			v, keep := apply(b.op, x, y)
			if !keep {
				continue
			}
			if isComparison(b.op) {
				v = s.v
				out = append(out, sample{s.labels, v})
			} else {
				out = append(out, sample{dropName(s.labels), v})
			}
		}
		return value{vec: out}
	}
	right := map[string][]sample{}
	for _, s := range r.vec {
		k := key(s.labels, b.on, b.hasOn)
		right[k] = append(right[k], s)
	}
	var out []sample
	switch b.op {
	case "and", "unless":
		for _, s := range l.vec {
			if _, ok := right[key(s.labels, b.on, b.hasOn)]; ok == (b.op == "and") {
				out = append(out, s)
			}
		}
		return value{vec: out}
	case "or":
		out = append(out, l.vec...)
		left := map[string]bool{}
		for _, s := range l.vec {
			left[key(s.labels, b.on, b.hasOn)] = true
		}
		for _, s := range r.vec {
			if !left[key(s.labels, b.on, b.hasOn)] {
				out = append(out, s)
			}
		}
		return value{vec: out}
	}
	seen := map[string]bool{}
	for _, s := range l.vec {
		k := key(s.labels, b.on, b.hasOn)
		rs := right[k]
		if len(rs) == 0 {
			continue
		}
		if len(rs) > 1 {
			panic("many-to-many matching on the right of " + b.op)
		}
		if seen[k] && !b.groupLeft {
			panic("many-to-one matching without group_left")
		}
		seen[k] = true
		v, keep := apply(b.op, s.v, rs[0].v)
		if !keep {
			continue
		}
		ls := dropName(s.labels)
		if b.hasOn && !b.groupLeft {
			ls = map[string]string{}
			for _, l := range b.on {
				ls[l] = s.labels[l]
			}
		}
		out = append(out, sample{ls, v})
	}
	return value{vec: out}
}
