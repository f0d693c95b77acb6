// Package admin is the operator's side of the proxy: the admin HTTP
// listener (web_addr: /healthz, /stats, /metrics, / and /status with its data,
// /admin/..., /changes, /debug/pprof/), the status page, and
// kingshard's admin SQL on the client port (admin node(...), admin
// server(...), show node status, the data-movement and digest commands).
//
// It has a room of its own because none of it is the MySQL protocol: the
// server package speaks the protocol and runs client statements, and only
// hands admin SQL over (Console.SQL answers with a Result the server
// writes). admin never imports proxy/server: the server gives it, in Env,
// the few things it reads or acts on (the configuration in force, the
// nodes, the session count, reload, the workflows), the way net/http's
// handlers take what they need, so each URL and statement here can be read
// without the session machinery.
//
// Lifecycle: the server builds one Console in New, after its nodes,
// metrics and workflows exist; Console.HTTP and Console.MetricsHTTP build
// a handler each time they are called (the basic-authentication choice is
// made then, from web_user). Everything here is safe for concurrent use:
// handlers run on net/http's goroutines and SQL on each session's.
package admin
