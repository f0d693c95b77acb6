package admin

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"go.uber.org/zap"

	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/move"
	"github.com/shardgate/shardgate/mysql"
)

// MoveRequest starts a workflow (POST /admin/workflows, admin reshard,
// admin import).
type MoveRequest struct {
	Kind  string `json:"kind"`  // reshard (default) or import
	Table string `json:"table"` // db.table
	Name  string `json:"name"`
	// The new rule (reshard): what is left out keeps the current rule's.
	Type          string   `json:"type"`
	Key           string   `json:"key"`
	Nodes         []string `json:"nodes"`
	Locations     []int    `json:"locations"`
	TableRowLimit int      `json:"table_row_limit"`
	DateRange     []string `json:"date_range"`
	// Import: the server and table to read.
	Source      *move.Endpoint     `json:"source"`
	SourceTable string             `json:"source_table"`
	AutoCutover bool               `json:"auto_cutover"`
	Options     config.MoveOptions `json:"options"`
}

// flows is the console's side of data movement: /admin/workflows and the
// admin SQL that starts, shows and commands workflows.
type flows struct {
	w   Workflows // nil without the sidecar's node
	log *zap.Logger
}

// serve lists workflows (GET), starts one (POST), or sends one a command
// (POST /admin/workflows/NAME/COMMAND).
func (f flows) serve(w http.ResponseWriter, r *http.Request) {
	wfs := f.w
	if wfs == nil {
		http.Error(w, "workflows need the sidecar database's node", http.StatusServiceUnavailable)
		return
	}
	rest := strings.Trim(strings.TrimPrefix(r.URL.Path, "/admin/workflows"), "/")
	reply := func(v any) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(v)
	}
	switch {
	case r.Method == http.MethodGet && rest == "":
		st, err := wfs.List()
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		reply(st)
	case r.Method == http.MethodGet:
		st, err := wfs.List()
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		for _, x := range st {
			if x.Spec.Name == rest {
				reply(x)
				return
			}
		}
		http.Error(w, "no workflow "+rest, http.StatusNotFound)
	case r.Method == http.MethodPost && rest == "":
		var req MoveRequest
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			http.Error(w, "bad request: "+err.Error(), http.StatusBadRequest)
			return
		}
		sp, err := wfs.Spec(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		wf, err := wfs.Start(sp)
		if err != nil {
			http.Error(w, err.Error(), http.StatusConflict)
			return
		}
		f.log.Info("workflow started", zap.String("workflow", wf.Spec.Name), zap.String("kind", wf.Spec.Kind), zap.String("table", wf.Spec.Logical()),
			zap.Strings("to", move.Targets(wf.Spec.To)))
		shown := *wf
		shown.Spec.Source = nil // no password in answers
		reply(shown)
	case r.Method == http.MethodPost:
		name, cmd, ok := strings.Cut(rest, "/")
		if !ok {
			http.Error(w, "POST /admin/workflows/NAME/(cutover|rollback|complete|cancel|verify|repair)", http.StatusNotFound)
			return
		}
		if err := wfs.Command(name, cmd); err != nil {
			http.Error(w, err.Error(), http.StatusConflict)
			return
		}
		f.log.Info("workflow command done", zap.String("workflow", name), zap.String("command", cmd))
		st, _ := wfs.List()
		for _, x := range st {
			if x.Spec.Name == name {
				reply(x)
				return
			}
		}
		reply(map[string]string{"workflow": name, "done": cmd})
	default:
		http.Error(w, "use GET or POST", http.StatusMethodNotAllowed)
	}
}

// sql runs the admin SQL of data movement (sql.go).
func (f flows) sql(what string, v []string) (Result, error) {
	wfs := f.w
	if wfs == nil {
		return Result{}, mysql.NewError(mysql.ErNotSupported, "workflows need the sidecar database's node")
	}
	bad := func(format string, args ...any) error { return mysql.NewError(mysql.ErWrongArguments, format, args...) }
	var req MoveRequest
	switch what {
	case "show":
		all, err := wfs.List()
		if err != nil {
			return Result{}, mysql.NewError(mysql.ErUnknownError, "%v", err)
		}
		var rows [][][]byte
		for _, w := range all {
			rows = append(rows, rowOf(w.Spec.Name, w.Spec.Kind, w.Spec.Logical(), w.State.Phase,
				strconv.FormatInt(w.State.RowsCopied, 10), strconv.FormatInt(w.State.RowsTotal, 10), strconv.FormatInt(w.State.ChangesApplied, 10),
				strconv.FormatFloat(w.LagSeconds, 'f', 1, 64), strconv.Itoa(len(w.State.Diffs)), strconv.FormatFloat(w.State.PauseMillis, 'f', 1, 64),
				strings.Join(move.Targets(w.Spec.To), ","), w.State.Error))
		}
		return Result{Columns: textColumns("Name", "Kind", "Table", "Phase", "Rows_Copied", "Rows_Total", "Changes_Applied",
			"Lag_Seconds", "Differing_Ranges", "Pause_Ms", "Subtables", "Error"), Rows: rows}, nil
	case "workflow":
		if len(v) != 2 {
			return Result{}, bad("admin workflow(opt,name) takes two values: the command and the workflow's name")
		}
		if err := wfs.Command(v[1], strings.ToLower(v[0])); err != nil {
			return Result{}, bad("%v", err)
		}
		return Result{Affected: 1}, nil
	case "reshard":
		if len(v) != 4 || !strings.EqualFold(v[0], "start") {
			return Result{}, bad("admin reshard(opt,table,nodes,locations) values('start', 'db.table', 'node1,node2', '4,4')")
		}
		req = MoveRequest{Table: v[1], Nodes: splitComma(v[2])}
		for _, l := range splitComma(v[3]) {
			n, err := strconv.Atoi(l)
			if err != nil {
				return Result{}, bad("locations: %q is not a number", l)
			}
			req.Locations = append(req.Locations, n)
		}
	case "import":
		if len(v) != 4 || !strings.EqualFold(v[0], "start") {
			return Result{}, bad("admin import(opt,table,source,source_table) values('start', 'db.table', 'user:password@host:port', 'db.table')")
		}
		cred, addr, ok := strings.Cut(v[2], "@")
		user, pw, _ := strings.Cut(cred, ":")
		if !ok {
			return Result{}, bad("source is user:password@host:port, not %q", v[2])
		}
		req = MoveRequest{Kind: move.KindImport, Table: v[1], Source: &move.Endpoint{Addr: addr, User: user, Password: pw}, SourceTable: v[3]}
	}
	sp, err := wfs.Spec(req)
	if err != nil {
		return Result{}, bad("%v", err)
	}
	wf, err := wfs.Start(sp)
	if err != nil {
		return Result{}, bad("%v", err)
	}
	f.log.Info("workflow started", zap.String("workflow", wf.Spec.Name), zap.String("kind", wf.Spec.Kind), zap.String("table", wf.Spec.Logical()))
	return Result{Affected: 1, Info: "workflow " + wf.Spec.Name}, nil
}
