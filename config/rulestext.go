package config

import (
	"errors"

	yaml3 "gopkg.in/yaml.v3"
)

// WithRulesText returns the ks.yaml text with the shard rules of the
// tables in rules (db.table) replaced, the rest as written.
func WithRulesText(text []byte, rules map[string]ShardRule) ([]byte, error) {
	if len(rules) == 0 {
		return text, nil
	}
	var doc yaml3.Node
	if err := yaml3.Unmarshal(text, &doc); err != nil {
		return nil, err
	}
	if len(doc.Content) == 0 {
		return nil, errors.New("an empty file has no shard rules")
	}
	for _, sc := range mappingValue(doc.Content[0], "schema_list").Content {
		shard := mappingValue(sc, "shard")
		for i, item := range shard.Content {
			db, table := mappingValue(item, "db"), mappingValue(item, "table")
			r, ok := rules[db.Value+"."+table.Value]
			if !ok {
				continue
			}
			n, err := ruleNode(r)
			if err != nil {
				return nil, err
			}
			shard.Content[i] = n
		}
	}
	return yaml3.Marshal(&doc)
}

// ruleNode is r as a YAML mapping of its keys that are set (a key left
// out takes its default, as when the operator writes the rule).
func ruleNode(r ShardRule) (*yaml3.Node, error) {
	var n yaml3.Node
	if err := n.Encode(r); err != nil {
		return nil, err
	}
	var kept []*yaml3.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		v := n.Content[i+1]
		if v.Kind == yaml3.SequenceNode && len(v.Content) == 0 || v.Kind == yaml3.ScalarNode && (v.Value == "" || v.Value == "0" || v.Value == "false") {
			continue
		}
		if v.Kind == yaml3.SequenceNode {
			v.Style = yaml3.FlowStyle
		}
		kept = append(kept, n.Content[i], v)
	}
	n.Content = kept
	return &n, nil
}

// mappingValue is the value of key in mapping n (an empty node when there is
// none).
func mappingValue(n *yaml3.Node, key string) *yaml3.Node {
	if n != nil && n.Kind == yaml3.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == key {
				return n.Content[i+1]
			}
		}
	}
	return &yaml3.Node{}
}
