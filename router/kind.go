package router

import "strconv"

// String returns the kind's name, as used in EXPLAIN output and logs.
func (k PlanKind) String() string {
	switch k {
	case Forward:
		return "Forward"
	case Concat:
		return "Concat"
	case SumOK:
		return "SumOK"
	case Fanout:
		return "Fanout"
	case ShowTables:
		return "ShowTables"
	case ShowTableStatus:
		return "ShowTableStatus"
	case Fallback:
		return "Fallback"
	case LoadSplit:
		return "LoadSplit"
	case Explain:
		return "Explain"
	}
	return "PlanKind(" + strconv.Itoa(int(k)) + ")"
}
