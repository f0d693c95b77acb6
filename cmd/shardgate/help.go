package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
)

// The command line follows the go tool's conventions: shardgate -h,
// --help, help and help COMMAND print usage on stdout and exit 0; a
// command or flag shardgate does not know, or missing arguments, print
// what went wrong and where to read more on stderr and exit 2; a command
// that fails exits 1.

// command is one subcommand as the help lists it.
type command struct {
	name, args, short string
	// long is help COMMAND's text after the usage line.
	long string
	// flags: the command parses flags of its own, and run with -h it
	// returns them (a *helpError) before doing anything.
	flags bool
}

var commands = []command{
	{name: "reshard", args: "DB.TABLE -nodes N1,N2 -locations 4,4 [flags]", flags: true,
		short: "start moving a sharded table's rows to a new shard rule",
		long: `Reshard starts a workflow that copies the table's rows into the subtables of the new
rule (the next generation, named TABLE_gN_NNNN), then applies the binary log to them
until they are in sync and verified. The application keeps running on the old rule
until 'shardgate cutover NAME'. With -wait it shows the progress until then.`},
	{name: "import", args: "DB.TABLE -from USER:PASSWORD@HOST:PORT/DB.TABLE [-name NAME] [-wait]", flags: true,
		short: "copy a table of a server not behind the proxy into a sharded table",
		long: `Import copies the table of a server that is not behind the proxy into the sharded table
DB.TABLE (its shard rule decides the subtables) and keeps applying the source's binary
log until 'shardgate complete NAME'. With -wait it shows the progress until in sync.`},
	{name: "status", args: "[NAME] [-watch] [-json]", flags: true,
		short: "list the workflows, or show one",
		long: `Status without NAME lists the workflows, one line each (with -etcd, the fleet's
proxies first). With NAME it shows the workflow for a person: phase and progress,
rules, rows, changes, verify, options, times and what to do next. -json prints the
admin API's answer as it is, for scripts. -watch redraws a progress line until the
workflow is in sync.`},
	{name: "cutover", args: "NAME", short: "swap the table to its new rule (a pause of at most cutover_timeout)",
		long: `Cutover holds the table's statements, lets the new subtables catch up, swaps the
table to its new rule and lets the statements go (a pause of at most cutover_timeout;
if it is not reached nothing changes and the cutover is tried again). It prints the
new rule for ks.yaml.`},
	{name: "rollback", args: "NAME", short: "after a cutover: back to the old rule, no write lost",
		long: `Rollback swaps the table back to its old rule after a cutover; the writes made since
were applied to the old subtables by the reverse stream.`},
	{name: "complete", args: "NAME", short: "after a cutover: drop the old subtables; for an import: finish",
		long: `Complete ends a reshard after its cutover (the old subtables are dropped) or an
import (its binary log stream stops).`},
	{name: "cancel", args: "NAME", short: "before a cutover: stop and drop the new subtables",
		long: `Cancel stops a workflow that has not cut over and drops the subtables it made.`},
	{name: "verify", args: "NAME", short: "compare the rows again",
		long: `Verify compares the source's and the new subtables' rows again, range by range;
'shardgate status NAME' lists the ranges that differ.`},
	{name: "repair", args: "NAME", short: "copy the ranges verify reported again, then verify",
		long: `Repair copies the ranges the last verify found different again, then verifies.`},
	{name: "plan", args: "FILE", short: "compare a ks.yaml with the configuration in force",
		long: `Plan compares FILE with the configuration in force (with -etcd: the fleet's topology):
nodes and users added or removed, new rules, rules whose rows move, and what cannot
change. It exits 1 when something cannot change.`},
	{name: "apply", args: "FILE [-wait]", flags: true, short: "plan a ks.yaml, then apply it",
		long: `Apply plans FILE, then applies it: the proxy reloads it (with -etcd: it is stored in
etcd), the tables whose rows move keep their rule, and one reshard workflow starts
for each. With -wait it shows their progress until they are in sync.`},
	{name: "topo", args: "load FILE | get", short: "store a ks.yaml as the fleet's next topology, or print the one in force",
		long: `Topo load stores FILE (checked first: a file that does not validate changes nothing)
as the fleet's next topology version in etcd; every proxy of the fleet applies it.
Topo get prints the version in force. Both need -etcd (or SHARDGATE_ETCD).`},
	{name: "fleet", args: "", short: "list the live proxies, the version each serves, the leader, drift and masters",
		long: `Fleet lists the live proxies of the fleet in etcd: addresses, the topology version
each serves, the leader, drift and the recorded masters. It exits 1 when a proxy
does not serve the latest version. It needs -etcd (or SHARDGATE_ETCD).`},
	{name: "stream", args: "-config FILE [-name NAME]", flags: true, short: "run the Kafka sinks of ks.yaml's streams: in this process",
		long: `Stream runs the Kafka sink of each entry of streams: in FILE (or of the one -name names)
until SIGTERM or SIGINT: a snapshot of the tables if the stream has no position yet, then
their changes, committed in Kafka transactions with each node's position (docs/kafka.md).
A sink that fails starts again from its committed positions; a second sink of the same
stream, on this machine or another, fences this one.`},
	{name: "version", short: "print shardgate's version and the commit it was built from",
		long: `Version prints the module version, the VCS commit the binary was built from (with
its time, and "modified" if the checkout had uncommitted changes), the Go version
and the platform.`},
	{name: "help", args: "[COMMAND]", short: "print this help, or a command's",
		long: `Help prints the commands, flags and environment variables, or one command's usage.`},
}

// envVars are the environment variables shardgate reads: each is the
// default of a global flag (a flag on the command line wins).
var envVars = []struct {
	name, flag string
	secret     bool
}{
	{"SHARDGATE_ADMIN", "admin", false},
	{"SHARDGATE_WEB_USER", "user", false},
	{"SHARDGATE_WEB_PASSWORD", "password", true},
	{"SHARDGATE_ETCD", "etcd", false},
	{"SHARDGATE_CLUSTER", "cluster", false},
}

// applyEnv sets the flags of fs that the command line did not give from
// their environment variables.
func applyEnv(fs *flag.FlagSet) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for _, e := range envVars {
		if v := os.Getenv(e.name); v != "" && !given[e.flag] {
			if err := fs.Set(e.flag, v); err != nil {
				return fmt.Errorf("%s: %w", e.name, err)
			}
		}
	}
	return nil
}

// usageError is a command line shardgate cannot run: a command, flag or
// argument it does not know, or one missing. It exits 2.
type usageError struct {
	cmd string // "" for the global flags and the command's name
	msg string
	// usage, if set, is printed after the message (no command at all).
	usage string
}

func (e *usageError) Error() string {
	topic := "shardgate help"
	if e.cmd != "" {
		topic += " " + e.cmd
	}
	prefix := ""
	if e.cmd != "" {
		prefix = e.cmd + ": "
	}
	return fmt.Sprintf("%s%s\nRun '%s' for usage.", prefix, e.msg, topic)
}

func usagef(cmd, format string, a ...any) error {
	return &usageError{cmd: cmd, msg: fmt.Sprintf(format, a...)}
}

// helpError is returned by a command given -h, -help or --help: its
// flags, for help COMMAND.
type helpError struct{ fs *flag.FlagSet }

func (*helpError) Error() string { return "help requested" }

// parseFlags parses args into fs without printing: -h and --help become a
// *helpError, a flag fs does not know a *usageError.
func parseFlags(fs *flag.FlagSet, args []string) error {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	err := fs.Parse(args)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		return &helpError{fs}
	}
	name := fs.Name()
	if name == "shardgate" {
		name = ""
	}
	return usagef(name, "%v", err)
}

// isHelpFlag reports whether arg asks for help as the flag package
// understands it.
func isHelpFlag(arg string) bool {
	switch arg {
	case "-h", "-help", "--help", "--h":
		return true
	}
	return false
}

// cli runs shardgate with args and returns its exit status: 0 done, 1 the
// command failed, 2 the command line is wrong.
func cli(args []string, stdout, stderr io.Writer) int {
	err := run(args, stdout)
	var u *usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &u):
		sep := ": "
		if u.cmd != "" {
			sep = " " // "shardgate reshard: ..."
		}
		fmt.Fprintf(stderr, "shardgate%s%v\n", sep, err)
		if u.usage != "" {
			fmt.Fprintf(stderr, "\n%s", u.usage)
		}
		return 2
	}
	fmt.Fprintln(stderr, "shardgate:", err)
	return 1
}

func findCommand(name string) *command {
	for i := range commands {
		if commands[i].name == name {
			return &commands[i]
		}
	}
	return nil
}

// unknownCommand is the usage error for name, with the closest command as
// a suggestion.
func unknownCommand(name string) error {
	msg := fmt.Sprintf("unknown command %q", name)
	best, bestD := "", 3 // suggest within two edits
	for _, c := range commands {
		if d := editDistance(name, c.name); d < bestD {
			best, bestD = c.name, d
		}
	}
	if best != "" {
		msg += fmt.Sprintf("; did you mean %q?", best)
	}
	return &usageError{msg: msg}
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// usage is shardgate's help: what it is, the commands, the global flags
// with their defaults and the environment variables.
func usage(global *flag.FlagSet) string {
	var b strings.Builder
	b.WriteString(`Shardgate is the operator's command line for a running shardgate proxy: it starts and
drives data-movement workflows (online resharding and import) through the proxy's admin
HTTP API (web_addr) and shows their progress, and it manages a fleet's topology in etcd.

Usage:

	shardgate [flags] COMMAND [arguments]

The commands are:

`)
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	for _, c := range commands {
		fmt.Fprintf(tw, "\t%s\t%s\n", c.name, c.short)
	}
	tw.Flush()
	b.WriteString("\nFlags (before the command):\n\n")
	global.SetOutput(&b)
	global.PrintDefaults()
	global.SetOutput(io.Discard)
	b.WriteString("\nEnvironment (each sets a flag's default; the flag on the command line wins):\n\n")
	tw = tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	for _, e := range envVars {
		now := "not set"
		if v, ok := os.LookupEnv(e.name); ok {
			now = "set: " + v
			if e.secret {
				now = "set"
			}
		}
		fmt.Fprintf(tw, "\t%s\t-%s\t(%s)\n", e.name, e.flag, now)
	}
	tw.Flush()
	b.WriteString("\nRun 'shardgate help COMMAND' for a command's arguments and flags.\n")
	return b.String()
}

// commandUsage is help COMMAND's text; fs are the command's own flags (nil
// without).
func commandUsage(c *command, fs *flag.FlagSet) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Usage: shardgate [flags] %s", c.name)
	if c.args != "" {
		fmt.Fprintf(&b, " %s", c.args)
	}
	fmt.Fprintf(&b, "\n\n%s\n", c.long)
	if fs != nil {
		fmt.Fprintf(&b, "\nFlags of %s (before or after its arguments):\n\n", c.name)
		fs.SetOutput(&b)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
	b.WriteString("\nThe flags before the command (-admin, -user, -password, -etcd, -cluster) and their\nenvironment variables: 'shardgate help'.\n")
	return b.String()
}
