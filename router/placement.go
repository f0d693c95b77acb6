package router

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"github.com/shardgate/shardgate/config"
)

// Placement answers, for one shard rule, where a row lives: the rule's
// subtables and the subtable of a shard key value. Online resharding uses
// it to send every copied or replayed row where the router will look for
// it, with the very function the router uses.
type Placement struct{ r *rule }

// Subtable is one physical table of a Placement.
type Subtable struct {
	Node, Name string
}

// NewPlacement compiles a hash, range or date rule.
func NewPlacement(sr config.ShardRule) (*Placement, error) {
	if sr.Type == "global" {
		return nil, fmt.Errorf("a global table has no placement: every node holds all of it")
	}
	r, err := compileRule(&sr, "")
	if err != nil {
		return nil, err
	}
	return &Placement{r: r}, nil
}

// Subtables lists the rule's subtables in index order.
func (p *Placement) Subtables() []Subtable {
	out := make([]Subtable, len(p.r.subs))
	for i, s := range p.r.subs {
		out[i] = Subtable{Node: s.node, Name: s.name}
	}
	return out
}

// Locate returns the index of the subtable holding a row whose shard key
// is v: nil, an integer, a float, a string or []byte (text, as a string
// column holds it), or a json.Number (a decimal).
func (p *Placement) Locate(v any) (int, error) {
	var val value
	switch x := v.(type) {
	case nil:
		val = value{kind: valNull}
	case int64:
		val = value{kind: valInt, i: x}
	case int:
		val = value{kind: valInt, i: int64(x)}
	case int32:
		val = value{kind: valInt, i: int64(x)}
	case int16:
		val = value{kind: valInt, i: int64(x)}
	case int8:
		val = value{kind: valInt, i: int64(x)}
	case uint64:
		if x <= math.MaxInt64 {
			val = value{kind: valInt, i: int64(x)}
		} else {
			val = value{kind: valUint, u: x}
		}
	case uint32:
		val = value{kind: valInt, i: int64(x)}
	case uint16:
		val = value{kind: valInt, i: int64(x)}
	case uint8:
		val = value{kind: valInt, i: int64(x)}
	case float64:
		val = value{kind: valNum, f: x}
	case float32:
		val = value{kind: valNum, f: float64(x)}
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil {
			return 0, fmt.Errorf("shard key %s: %w", x, err)
		}
		val = value{kind: valNum, f: f, s: string(x)}
	case string:
		val = value{kind: valString, s: x}
	case []byte:
		val = value{kind: valString, s: string(x)}
	default:
		return 0, fmt.Errorf("shard key of type %T", v)
	}
	i, ok, err := p.r.index(val)
	if err != nil {
		return 0, outOfRange(p.r, val)
	}
	if !ok {
		return 0, fmt.Errorf("table %s: the %s rule cannot map shard key %s", p.r.table, ruleTypeName(p.r.kind), val)
	}
	return i, nil
}
