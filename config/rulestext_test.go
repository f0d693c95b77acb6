package config

import "testing"

// TestWithRulesText: the fleet's apply stores the file with the moving
// tables' rules replaced by the ones in force, the rest as written.
func TestWithRulesText(t *testing.T) {
	text := []byte(`addr: 127.0.0.1:9696
user_list:
  - user: app
    password: pw
nodes:
  - name: node1
    master: 127.0.0.1:3307
    user: root
  - name: node2
    master: 127.0.0.1:3308
    user: root
schema_list:
  - user: app
    nodes: [node1, node2]
    default: node1
    shard:
      - db: shop
        table: orders
        key: id
        type: hash
        nodes: [node1, node2]
        locations: [4, 4]   # the new layout
      - db: shop
        table: carts
        key: id
        type: hash
        nodes: [node1, node2]
        locations: [1, 1]
`)
	old := ShardRule{DB: "shop", Table: "orders", Key: "id", Type: "hash", Nodes: []string{"node1", "node2"}, Locations: []int{1, 1}, SequenceBlock: 1000, Sequence: "id"}
	out, err := WithRulesText(text, map[string]ShardRule{"shop.orders": old})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := Parse(out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if got := cfg.Schemas[0].Shard; len(got) != 2 || got[0].Locations[0] != 1 || got[0].Sequence != "id" || got[1].Table != "carts" || cfg.Nodes[1].Master != "127.0.0.1:3308" {
		t.Fatalf("rules after: %+v\n%s", got, out)
	}
}
