package layers

import (
	"bufio"
	"bytes"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/shardgate/shardgate/"

// allowed lists, for each package of the proxy, the module packages it may
// import directly, and whether it may import anything outside the standard
// library and the module. A package missing from the table fails the test.
var allowed = map[string]struct {
	imports    []string
	thirdParty []string // import path prefixes outside the standard library
}{
	"mysql":         {nil, nil},
	"config":        {nil, []string{"gopkg.in/yaml."}},
	"router":        {[]string{"config", "mysql"}, []string{"github.com/pingcap/tidb/pkg/parser"}},
	"backend":       {[]string{"config", "mysql"}, nil},
	"schema":        {[]string{"mysql"}, nil},
	"sidecar":       {[]string{"backend", "mysql"}, nil},
	"sequence":      {[]string{"backend", "mysql", "sidecar"}, nil},
	"changestream":  {[]string{"config", "mysql", "router"}, []string{"github.com/go-mysql-org/go-mysql/", "github.com/shopspring/decimal", "golang.org/x/text/"}},
	"move":          {[]string{"changestream", "config", "mysql", "router", "schema", "sidecar"}, []string{"github.com/go-mysql-org/go-mysql/", "go.uber.org/zap"}},
	"kafkasink":     {[]string{"changestream", "config"}, []string{"github.com/twmb/franz-go/", "github.com/go-sql-driver/mysql"}},
	"resultcache":   {nil, nil},
	"proxy/session": {[]string{"backend", "config", "mysql", "router", "xa"}, nil},
	"proxy/engine":  {[]string{"backend", "mysql", "router"}, []string{"golang.org/x/text/"}},
	"deadlock":      {[]string{"backend", "mysql"}, []string{"go.uber.org/zap"}},
	"proxy/server": {[]string{"backend", "changestream", "config", "deadlock", "kafkasink", "move", "mysql", "proxy/admin", "proxy/engine", "proxy/metrics", "proxy/session", "resultcache", "router", "schema", "sequence", "xa"},
		[]string{"go.uber.org/zap"}},
	"proxy/admin":          {[]string{"backend", "changestream", "config", "digest", "move", "mysql", "proxy/metrics", "router"}, []string{"go.uber.org/zap"}},
	"proxy/metrics":        {[]string{"backend", "deadlock", "digest", "move", "resultcache", "router", "xa"}, []string{"go.uber.org/zap", "github.com/prometheus/client_golang/"}},
	"cmd/proxy":            {[]string{"config", "fleet", "internal/buildinfo", "proxy/metrics", "proxy/server", "topo"}, []string{"go.uber.org/zap"}},
	"fleet":                {[]string{"backend", "config", "topo"}, []string{"go.uber.org/zap"}},
	"cmd/shardgate":        {[]string{"changestream", "config", "internal/buildinfo", "kafkasink", "move", "topo"}, nil},
	"internal/mariadbtest": {nil, []string{"github.com/go-sql-driver/mysql"}},
	"internal/etcdtest":    {[]string{"internal/freeport"}, nil},
	"internal/freeport":    {nil, nil},
	"topo":                 {[]string{"config"}, []string{"go.etcd.io/", "go.uber.org/zap", "google.golang.org/grpc"}},
	"internal/fakebackend": {[]string{"mysql"}, nil},
	"internal/layers":      {nil, nil},
	"internal/doccheck":    {nil, nil},
	"internal/buildinfo":   {nil, nil},
	"clients":              {nil, nil},
	"bench/conns":          {[]string{"backend", "mysql"}, nil},
	"bench/hostile":        {[]string{"backend", "internal/mariadbtest", "mysql"}, []string{"github.com/go-sql-driver/mysql"}},
	"bench/fleetprop":      {[]string{"topo"}, nil},
	"bench/relay":          {nil, nil},
	"bench/report":         {nil, nil},
	"bench/stream":         {[]string{"changestream", "config"}, []string{"github.com/go-mysql-org/go-mysql/"}},
	"bench/move":           {[]string{"changestream", "config"}, []string{"github.com/go-sql-driver/mysql"}},
	"bench/kafka":          {[]string{"changestream", "config", "kafkasink"}, []string{"github.com/go-mysql-org/go-mysql/", "github.com/go-sql-driver/mysql", "github.com/twmb/franz-go/"}},
	"digest":               {nil, nil},
	"xa":                   {[]string{"backend", "mysql", "sidecar"}, []string{"go.uber.org/zap"}},

	// Test support: the Kafka broker of the Kafka sink's tests and benchmarks (issue 38).
	"internal/kafkatest":             {[]string{"internal/freeport"}, []string{"github.com/twmb/franz-go/"}},
	"internal/kafkatest/kafkabroker": {[]string{"internal/kafkatest"}, nil},
}

// TestImportGraph reads every package's direct imports (tests excluded)
// with go list and checks them against allowed.
func TestImportGraph(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", module+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	std := stdlib(t)
	seen := 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		pkg := strings.TrimPrefix(fields[0], module)
		rule, ok := allowed[pkg]
		if !ok {
			t.Errorf("package %s is not in the layering table (internal/layers/layers_test.go): add it with the imports it may use", pkg)
			continue
		}
		seen++
		for _, imp := range fields[1:] {
			switch {
			case strings.HasPrefix(imp, module):
				if dep := strings.TrimPrefix(imp, module); !slices.Contains(rule.imports, dep) {
					t.Errorf("%s imports %s: not allowed (may import %v)", pkg, dep, rule.imports)
				}
			case std[imp]:
			default:
				if !slices.ContainsFunc(rule.thirdParty, func(p string) bool { return strings.HasPrefix(imp, p) }) {
					t.Errorf("%s imports %s: not allowed (third-party imports allowed: %v)", pkg, imp, rule.thirdParty)
				}
			}
		}
	}
	if seen < 10 {
		t.Fatalf("go list found only %d packages", seen)
	}
}

// stdlib returns the standard library's import paths.
func stdlib(t *testing.T) map[string]bool {
	out, err := exec.Command("go", "list", "std").Output()
	if err != nil {
		t.Fatalf("go list std: %v", err)
	}
	std := map[string]bool{}
	for _, p := range strings.Fields(string(out)) {
		std[p] = true
	}
	return std
}
