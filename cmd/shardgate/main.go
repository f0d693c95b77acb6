// Command shardgate is the operator's command line for a running proxy:
// it starts and drives data-movement workflows (online resharding and
// import) through the proxy's admin HTTP API (web_addr) and shows their
// progress.
//
//	shardgate [-admin URL] [-user U -password P] reshard DB.TABLE -nodes n1,n2,n3 -locations 3,3,2 [-wait]
//	shardgate import DB.TABLE -from user:password@host:port/db.table [-wait]
//	shardgate status [NAME] [-watch] [-json]
//	shardgate cutover|rollback|complete|cancel|verify|repair NAME
//	shardgate plan FILE | apply FILE [-wait]
//	shardgate -etcd ENDPOINTS [-cluster PREFIX] topo load FILE | topo get | fleet
//	shardgate stream -config ks.yaml [-name STREAM]
//	shardgate version | help [COMMAND]
//
// shardgate help lists the commands, the flags with their defaults and the
// SHARDGATE_* environment variables (help.go).
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

	"github.com/shardgate/shardgate/internal/buildinfo"
	"github.com/shardgate/shardgate/move"
)

func main() {
	os.Exit(cli(os.Args[1:], os.Stdout, os.Stderr))
}

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

// run runs the command line args, writing to w; help goes to w too. A
// wrong command line is a *usageError.
func run(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("shardgate", flag.ContinueOnError)
	admin := fs.String("admin", "http://127.0.0.1:9797", "the proxy's admin `URL` (its web_addr)")
	user := fs.String("user", "", "the admin API's `USER` (the proxy's web_user)")
	password := fs.String("password", "", "the admin API's `PASSWORD` (the proxy's web_password)")
	ff := fleetFlagsOf(fs)
	version := fs.Bool("version", false, "print the version and exit (as the version command)")
	err := parseFlags(fs, args)
	if _, ok := err.(*helpError); ok {
		fmt.Fprint(w, usage(fs))
		return nil
	} else if err != nil {
		return err
	}
	if err := applyEnv(fs); err != nil {
		return &usageError{msg: err.Error()}
	}
	if *version {
		fmt.Fprintln(w, buildinfo.String("shardgate"))
		return nil
	}
	if fs.NArg() == 0 {
		return &usageError{msg: "no command", usage: usage(fs)}
	}
	switch fs.Arg(0) {
	case "help":
		return help(fs, ff, fs.Args()[1:], w)
	case "version":
		if fs.NArg() > 1 {
			return usagef("version", "takes no arguments")
		}
		fmt.Fprintln(w, buildinfo.String("shardgate"))
		return nil
	}
	base := *admin
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	c := &client{base: base, user: *user, password: *password}
	err = dispatch(c, ff, fs.Arg(0), fs.Args()[1:], w)
	if h, ok := err.(*helpError); ok {
		fmt.Fprint(w, commandUsage(findCommand(fs.Arg(0)), h.fs))
		return nil
	}
	return err
}

// help prints shardgate's usage, or with a command its usage.
func help(global *flag.FlagSet, ff fleetFlags, args []string, w io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(w, usage(global))
		return nil
	}
	c := findCommand(args[0])
	if len(args) > 1 || c == nil {
		return usagef("help", "unknown help topic %q: the topics are the commands", strings.Join(args, " "))
	}
	var fs *flag.FlagSet
	if c.flags {
		// A command with flags returns them for -h before it does anything.
		err := dispatch(&client{}, ff, c.name, []string{"-h"}, w)
		h, ok := err.(*helpError)
		if !ok {
			return fmt.Errorf("help %s: %v", c.name, err)
		}
		fs = h.fs
	}
	fmt.Fprint(w, commandUsage(c, fs))
	return nil
}

// dispatch runs the command cmd with its arguments rest. A command given
// -h returns a *helpError before it does anything.
func dispatch(c *client, ff fleetFlags, cmd string, rest []string, w io.Writer) error {
	info := findCommand(cmd)
	if info == nil {
		return unknownCommand(cmd)
	}
	if !info.flags && len(rest) > 0 && isHelpFlag(rest[0]) {
		return &helpError{}
	}
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
	case "stream":
		return streamCmd(rest, w)
	case move.CmdCutover, move.CmdRollback, move.CmdComplete, move.CmdCancel, move.CmdVerify, move.CmdRepair:
		if len(rest) != 1 {
			return usagef(cmd, "needs the workflow's NAME: shardgate %s NAME", cmd)
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
	return unknownCommand(cmd)
}

// interleaved parses flags that may follow the positional argument: -h
// is a *helpError, a flag fs does not know a *usageError.
func interleaved(fs *flag.FlagSet, args []string) (pos []string, err error) {
	for len(args) > 0 {
		if err := parseFlags(fs, args); err != nil {
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
	nodes := fs.String("nodes", "", "the new rule's `NODES`, comma-separated")
	locations := fs.String("locations", "", "the `COUNTS` of subtables per node, comma-separated")
	typ := fs.String("type", "", "the new rule's `TYPE`, hash or range (default: the current rule's)")
	key := fs.String("key", "", "the shard key `COLUMN` (default: the current rule's)")
	limit := fs.Int("table-row-limit", 0, "range rules: `KEYS` per subtable")
	name := fs.String("name", "", "the workflow's `NAME` (default: db_table_time)")
	auto := fs.Bool("auto-cutover", false, "cut over as soon as the new subtables are in sync and verified")
	workers := fs.Int("workers", 0, "copy `WORKERS` (default: the proxy's move.copy_workers)")
	batch := fs.Int("batch", 0, "`ROWS` per insert of the copy (default: the proxy's move.batch_rows)")
	apply := fs.Int("apply-workers", 0, "binary log apply `WORKERS` (default: the proxy's move.apply_workers)")
	wait := fs.Bool("wait", false, "show progress until in sync")
	pos, err := interleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || *nodes == "" || *locations == "" {
		return usagef("reshard", "needs DB.TABLE, -nodes and -locations: shardgate reshard DB.TABLE -nodes n1,n2 -locations 4,4")
	}
	req := map[string]any{"table": pos[0], "name": *name, "nodes": strings.Split(*nodes, ","), "auto_cutover": *auto}
	var locs []int
	for _, l := range strings.Split(*locations, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(l))
		if err != nil {
			return usagef("reshard", "-locations %s: %v", *locations, err)
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
	from := fs.String("from", "", "the source table, `USER:PASSWORD@HOST:PORT/DB.TABLE`")
	name := fs.String("name", "", "the workflow's `NAME` (default: db_table_time)")
	wait := fs.Bool("wait", false, "show progress until in sync")
	pos, err := interleaved(fs, args)
	if err != nil {
		return err
	}
	cred, rest, ok1 := strings.Cut(*from, "@")
	addr, table, ok2 := strings.Cut(rest, "/")
	user, password, _ := strings.Cut(cred, ":")
	if len(pos) != 1 || !ok1 || !ok2 {
		return usagef("import", "needs DB.TABLE and -from: shardgate import DB.TABLE -from USER:PASSWORD@HOST:PORT/DB.TABLE")
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
			head += fmt.Sprintf(", %.0f rows/s, ETA %s", st.RowsPerSec, seconds(st.ETASeconds))
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
