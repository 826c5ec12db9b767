package event

// Aggregates lists the distinct aggregates e reads, in order of first
// appearance, so a monitor keeps only the variables some event needs.
func Aggregates(e Expr) []Agg {
	var out []Agg
	var walk func(Expr)
	walk = func(e Expr) {
		switch e := e.(type) {
		case Agg:
			for _, a := range out {
				if a == e {
					return
				}
			}
			out = append(out, e)
		case Binary:
			walk(e.L)
			walk(e.R)
		}
	}
	walk(e)
	return out
}

// Eval computes e with val giving each aggregate's value.
func Eval(e Expr, val func(Agg) float64) float64 {
	switch e := e.(type) {
	case Num:
		return float64(e)
	case Agg:
		return val(e)
	case Binary:
		l := Eval(e.L, val)
		// and/or short-circuit as a reader expects.
		switch e.Op {
		case "and":
			if l == 0 {
				return 0
			}
			return truth(Eval(e.R, val) != 0)
		case "or":
			if l != 0 {
				return 1
			}
			return truth(Eval(e.R, val) != 0)
		}
		r := Eval(e.R, val)
		switch e.Op {
		case "+":
			return l + r
		case "-":
			return l - r
		case "*":
			return l * r
		case "/":
			if r == 0 {
				return 0
			}
			return l / r
		case "<":
			return truth(l < r)
		case "<=":
			return truth(l <= r)
		case ">":
			return truth(l > r)
		case ">=":
			return truth(l >= r)
		case "==":
			return truth(l == r)
		case "!=":
			return truth(l != r)
		}
	}
	panic("event: unknown expression")
}

// Reported is the expression whose value a report carries: the left side of
// the predicate's first comparison (sum(volume) of "sum(volume) > 125KB"), or
// the predicate itself when it compares nothing.
func Reported(e Expr) Expr {
	switch b := e.(type) {
	case Binary:
		switch b.Op {
		case "<", "<=", ">", ">=", "==", "!=":
			return b.L
		case "and", "or":
			return Reported(b.L)
		}
	}
	return e
}

func truth(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
