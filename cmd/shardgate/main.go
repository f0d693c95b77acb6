// Command shardgate is the operator's command line for a running proxy:
// it starts and drives data-movement workflows (online resharding and
// import) through the proxy's admin HTTP API (web_addr) and shows their
// progress.
//
//	shardgate [-admin URL] [-user U -password P] reshard DB.TABLE -nodes n1,n2,n3 -locations 3,3,2 [-wait]
//	shardgate import DB.TABLE -from user:password@host:port/db.table [-wait]
//	shardgate status [NAME] [-watch]
//	shardgate cutover|rollback|complete|cancel|verify|repair NAME
//	shardgate plan FILE | apply FILE [-wait]
//	shardgate -etcd ENDPOINTS [-cluster PREFIX] topo load FILE | topo get | fleet
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/shardgate/shardgate/move"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "shardgate:", err)
		os.Exit(1)
	}
}

const usage = `usage: shardgate [-admin URL] [-user U -password P] COMMAND ...

commands:
  reshard DB.TABLE -nodes n1,n2 -locations 4,4 [-type hash|range] [-key COL]
          [-table-row-limit N] [-name NAME] [-auto-cutover] [-workers N]
          [-batch N] [-apply-workers N] [-wait]
        start moving the table's rows to a new rule (subtables of the next
        generation); with -wait, show progress until it is in sync
  import DB.TABLE -from USER:PASSWORD@HOST:PORT/DB.TABLE [-name NAME] [-wait]
        copy a table of a server not behind the proxy into the sharded table
        DB.TABLE and keep applying its binary log until complete
  status [NAME] [-watch]
        list workflows, or show one (-watch: a progress bar until it is in sync)
  cutover NAME     swap the table to its new rule (a pause of at most cutover_timeout)
  rollback NAME    after a cutover: back to the old rule, no write lost
  complete NAME    after a cutover: drop the old subtables; for an import: finish
  cancel NAME      before a cutover: stop and drop the new subtables
  verify NAME      compare the rows again
  repair NAME      copy the ranges verify reported again, then verify
  plan FILE        compare a ks.yaml with the configuration in force (with -etcd: the fleet's
                   topology): nodes and users added or removed, new rules, rules whose rows move,
                   and what cannot change
  apply FILE [-wait]
                   plan, then apply: reload the file (with -etcd: store it in etcd), the tables
                   whose rows move keeping their rule, and start one reshard workflow each

fleet commands (-etcd ENDPOINTS [-cluster PREFIX], or SHARDGATE_ETCD and SHARDGATE_CLUSTER):
  topo load FILE   store a ks.yaml as the fleet's next topology version (checked first)
  topo get         print the version in force
  fleet            list the live proxies, the version each serves, the leader, drift and recorded masters
                   (status with -etcd lists them too)
`

type client struct {
	base, user, password string
}

// do sends a request with body (a string as it is, anything else as
// JSON) and decodes the JSON answer into out.
func (c *client) do(method, path string, body any, out any) error {
	var rd io.Reader
	if s, ok := body.(string); ok {
		rd = strings.NewReader(s)
	} else if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, strings.TrimRight(c.base, "/")+path, rd)
	if err != nil {
		return err
	}
	if c.user != "" {
		req.SetBasicAuth(c.user, c.password)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return errors.New(strings.TrimSpace(string(b)))
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

func run(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("shardgate", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), usage) }
	admin := fs.String("admin", envOr("SHARDGATE_ADMIN", "http://127.0.0.1:9797"), "the proxy's admin address (web_addr)")
	user := fs.String("user", os.Getenv("SHARDGATE_WEB_USER"), "web_user")
	password := fs.String("password", os.Getenv("SHARDGATE_WEB_PASSWORD"), "web_password")
	ff := fleetFlagsOf(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return errors.New("no command")
	}
	base := *admin
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	c := &client{base: base, user: *user, password: *password}
	cmd, rest := fs.Arg(0), fs.Args()[1:]
	switch cmd {
	case "reshard":
		return reshard(c, rest, w)
	case "import":
		return importTable(c, rest, w)
	case "status":
		if *ff.etcd != "" && len(rest) == 0 {
			// A fleet: the proxies first, then this proxy's workflows.
			if err := fleetCmd(ff, w); err != nil {
				return err
			}
		}
		return status(c, rest, w)
	case "plan":
		return planCmd(c, ff, rest, w)
	case "apply":
		return applyCmd(c, ff, rest, w)
	case "fleet":
		return fleetCmd(ff, w)
	case "topo":
		return topoCmd(ff, rest, w)
	case move.CmdCutover, move.CmdRollback, move.CmdComplete, move.CmdCancel, move.CmdVerify, move.CmdRepair:
		if len(rest) != 1 {
			return fmt.Errorf("%s NAME", cmd)
		}
		var st move.Status
		if err := c.do("POST", "/admin/workflows/"+rest[0]+"/"+cmd, nil, &st); err != nil {
			return err
		}
		fmt.Fprintln(w, line(&st))
		if cmd == move.CmdCutover && st.State.Phase == move.PhaseSwitched {
			fmt.Fprintf(w, "the table uses its new rule (pause %.1f ms); put it in ks.yaml:\n%s", st.State.PauseMillis, ruleYAML(&st))
		}
		return nil
	}
	fs.Usage()
	return fmt.Errorf("unknown command %q", cmd)
}

func envOr(k, d string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return d
}

// interleaved parses flags that may follow the positional argument.
func interleaved(fs *flag.FlagSet, args []string) (pos []string, err error) {
	for len(args) > 0 {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) > 0 {
			pos = append(pos, args[0])
			args = args[1:]
		}
	}
	return pos, nil
}

func reshard(c *client, args []string, w io.Writer) error {
	fs := flag.NewFlagSet("reshard", flag.ContinueOnError)
	nodes := fs.String("nodes", "", "the new rule's nodes, comma-separated")
	locations := fs.String("locations", "", "subtables per node, comma-separated")
	typ := fs.String("type", "", "hash or range (default: the current rule's)")
	key := fs.String("key", "", "shard key column (default: the current rule's)")
	limit := fs.Int("table-row-limit", 0, "range rules: keys per subtable")
	name := fs.String("name", "", "workflow name (default: db_table_time)")
	auto := fs.Bool("auto-cutover", false, "cut over as soon as the new subtables are in sync and verified")
	workers := fs.Int("workers", 0, "copy workers (default move.copy_workers)")
	batch := fs.Int("batch", 0, "rows per insert (default move.batch_rows)")
	apply := fs.Int("apply-workers", 0, "binary log apply workers (default move.apply_workers)")
	wait := fs.Bool("wait", false, "show progress until in sync")
	pos, err := interleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || *nodes == "" || *locations == "" {
		return errors.New("reshard DB.TABLE -nodes n1,n2 -locations 4,4")
	}
	req := map[string]any{"table": pos[0], "name": *name, "nodes": strings.Split(*nodes, ","), "auto_cutover": *auto}
	var locs []int
	for _, l := range strings.Split(*locations, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(l))
		if err != nil {
			return fmt.Errorf("-locations: %w", err)
		}
		locs = append(locs, n)
	}
	req["locations"] = locs
	if *typ != "" {
		req["type"] = *typ
	}
	if *key != "" {
		req["key"] = *key
	}
	if *limit != 0 {
		req["table_row_limit"] = *limit
	}
	if *workers+*batch+*apply > 0 {
		req["options"] = map[string]int{"CopyWorkers": *workers, "BatchRows": *batch, "ApplyWorkers": *apply}
	}
	return start(c, req, *wait, w)
}

func importTable(c *client, args []string, w io.Writer) error {
	fs := flag.NewFlagSet("import", flag.ContinueOnError)
	from := fs.String("from", "", "USER:PASSWORD@HOST:PORT/DB.TABLE")
	name := fs.String("name", "", "workflow name")
	wait := fs.Bool("wait", false, "show progress until in sync")
	pos, err := interleaved(fs, args)
	if err != nil {
		return err
	}
	cred, rest, ok1 := strings.Cut(*from, "@")
	addr, table, ok2 := strings.Cut(rest, "/")
	user, password, _ := strings.Cut(cred, ":")
	if len(pos) != 1 || !ok1 || !ok2 {
		return errors.New("import DB.TABLE -from USER:PASSWORD@HOST:PORT/DB.TABLE")
	}
	req := map[string]any{"kind": move.KindImport, "table": pos[0], "name": *name,
		"source": move.Endpoint{Addr: addr, User: user, Password: password}, "source_table": table}
	return start(c, req, *wait, w)
}

func start(c *client, req map[string]any, wait bool, w io.Writer) error {
	var wf move.Workflow
	if err := c.do("POST", "/admin/workflows", req, &wf); err != nil {
		return err
	}
	fmt.Fprintf(w, "workflow %s started: %s %s\n", wf.Spec.Name, wf.Spec.Kind, wf.Spec.Logical())
	if !wait {
		return nil
	}
	return watch(c, wf.Spec.Name, w)
}

func status(c *client, args []string, w io.Writer) error {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	watchIt := fs.Bool("watch", false, "show a progress bar until the workflow is in sync")
	pos, err := interleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 1 {
		if *watchIt {
			return watch(c, pos[0], w)
		}
		var st move.Status
		if err := c.do("GET", "/admin/workflows/"+pos[0], nil, &st); err != nil {
			return err
		}
		b, _ := json.MarshalIndent(st, "", "  ")
		fmt.Fprintln(w, string(b))
		return nil
	}
	var all []move.Status
	if err := c.do("GET", "/admin/workflows", nil, &all); err != nil {
		return err
	}
	if len(all) == 0 {
		fmt.Fprintln(w, "no workflows")
	}
	for i := range all {
		fmt.Fprintln(w, line(&all[i]))
	}
	return nil
}

// watch redraws a progress line until the workflow is in sync or ended.
func watch(c *client, name string, w io.Writer) error {
	tty := isTerminal(w)
	last := ""
	for {
		var st move.Status
		if err := c.do("GET", "/admin/workflows/"+name, nil, &st); err != nil {
			return err
		}
		l := line(&st)
		if tty {
			fmt.Fprintf(w, "\r\033[K%s", l)
		} else if l != last {
			fmt.Fprintln(w, l)
		}
		last = l
		switch st.State.Phase {
		case move.PhaseReady:
			if tty {
				fmt.Fprintln(w)
			}
			if len(st.State.Diffs) > 0 {
				return fmt.Errorf("verify found %d differing ranges; see `shardgate status %s`, then `shardgate repair %s`", len(st.State.Diffs), name, name)
			}
			if st.Spec.Kind == move.KindImport {
				fmt.Fprintf(w, "in sync. Point the application at the proxy, then: shardgate complete %s\n", name)
			} else {
				fmt.Fprintf(w, "in sync. Cut over with: shardgate cutover %s\n", name)
			}
			return nil
		case move.PhaseSwitched, move.PhaseCompleted, move.PhaseCancelled, move.PhaseRolledBack:
			if tty {
				fmt.Fprintln(w)
			}
			return nil
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// line is one workflow's state in one line, with a progress bar while it
// copies.
func line(st *move.Status) string {
	s := &st.State
	head := fmt.Sprintf("%s %s %s: %s", st.Spec.Name, st.Spec.Kind, st.Spec.Logical(), s.Phase)
	switch s.Phase {
	case move.PhaseCopying:
		frac := 0.0
		if s.RowsTotal > 0 {
			frac = min(1, float64(s.RowsCopied)/float64(s.RowsTotal))
		}
		const width = 30
		n := int(frac * width)
		bar := strings.Repeat("#", n) + strings.Repeat(".", width-n)
		head += fmt.Sprintf(" [%s] %3.0f%% %d/%d rows", bar, 100*frac, s.RowsCopied, s.RowsTotal)
		if st.RowsPerSec > 0 {
			head += fmt.Sprintf(", %.0f rows/s, ETA %s", st.RowsPerSec, (time.Duration(st.ETASeconds) * time.Second).String())
		}
	case move.PhaseCatchingUp, move.PhaseReady, move.PhaseSwitched:
		head += fmt.Sprintf(", %d changes applied, lag %.1fs", s.ChangesApplied, st.LagSeconds)
		if s.Phase == move.PhaseReady {
			head += fmt.Sprintf(", %d rows verified, %d differing ranges", s.VerifyRows, len(s.Diffs))
		}
		if s.Phase == move.PhaseSwitched {
			head += fmt.Sprintf(", cutover pause %.1f ms", s.PauseMillis)
		}
	}
	if s.Error != "" {
		head += " (retrying: " + s.Error + ")"
	}
	return head
}

// ruleYAML is the new rule as a ks.yaml shard entry.
func ruleYAML(st *move.Status) string {
	r := st.Spec.To
	var b strings.Builder
	fmt.Fprintf(&b, "      - db: %s\n        table: %s\n        key: %s\n        type: %s\n", r.DB, r.Table, r.Key, r.Type)
	fmt.Fprintf(&b, "        nodes: [%s]\n", strings.Join(r.Nodes, ", "))
	locs := make([]string, len(r.Locations))
	for i, l := range r.Locations {
		locs[i] = strconv.Itoa(l)
	}
	fmt.Fprintf(&b, "        locations: [%s]\n", strings.Join(locs, ", "))
	if r.TableRowLimit > 0 {
		fmt.Fprintf(&b, "        table_row_limit: %d\n", r.TableRowLimit)
	}
	if r.Sequence != "" {
		fmt.Fprintf(&b, "        sequence: %s\n", r.Sequence)
	}
	fmt.Fprintf(&b, "        generation: %d\n", r.Generation)
	return b.String()
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
