// Package router turns a client statement into a Plan: which backend node
// (and, once shard rules are executed, which physical subtables) it runs on,
// and with what SQL. Route is a pure function of the statement and the
// configuration: no I/O, deterministic, safe for concurrent use.
//
// It also classifies statements lexically (first keyword, session-state
// effects, KILL) for the session layer, without a full parse.
package router
