package changestream

// Column describes one column of a change's table, in the table's order
// (the binary log's table map; a snapshot reader fills it from its result
// set). A consumer that must keep the table's column order (the Kafka
// sink's Debezium envelope) reads it instead of ranging over Types.
type Column struct {
	Name     string // as in Before, After and Types
	Type     string // as Types names it
	Nullable bool   // the column may hold NULL (the table map's null bitmap)
	// Members are an ENUM's or SET's members in the column's order, in
	// UTF-8; nil for other types.
	Members []string
}

// columnList is tc's columns in the table map's order, built once per
// table map and shared by its changes (read only).
func (tc *tableCols) columnList() []Column {
	if tc.list != nil {
		return tc.list
	}
	list := make([]Column, 0, len(tc.cols))
	for i, c := range tc.cols {
		if c.name == "" {
			continue
		}
		col := Column{Name: c.name, Type: tc.types[c.name], Nullable: true, Members: c.members}
		if ok, nullable := tc.tm.Nullable(i); ok {
			col.Nullable = nullable
		}
		list = append(list, col)
	}
	tc.list = list
	return list
}
