// Package config loads and validates shardgate's configuration file, ks.yaml.
//
// # Format
//
// The file format is kingshard's: every key kingshard reads (addr, user_list,
// nodes, schema_list, shard rules, log_sql, allow_ips, ...) is read here with
// the same meaning, so an existing kingshard ks.yaml loads unchanged.
// shardgate adds a few optional keys (server_version, default_auth_plugin,
// shutdown_timeout, max_connections, frontend, backend); each has a default
// and may be left out.
//
// # Defaults
//
// All defaults live in one place: Default returns a Config holding every
// top-level default, and Parse decodes the file over it, so a key that is
// absent keeps its default. A few per-entry defaults cannot be expressed that
// way (a node's max_conns_limit and down_after_noalive, which kingshard treats
// as "use the default" when 0) and a string key written with an empty value
// (addr:, log_level:, proxy_charset:) also means "use the default"; Parse
// fills both from the same constants right after decoding.
//
// # Strictness
//
// Decoding is strict: an unknown or repeated key is an error, reported with
// its line. After decoding, Validate checks the whole configuration and
// reports every problem it finds at once, not just the first, as an *Error
// holding one Problem per issue. Each Problem names the key path
// (schema_list[0].shard[2].key) and, when the Config came from Parse or
// Load, the line of that key in the file. yaml.v2 does the decoding because it
// keeps kingshard's YAML 1.1 behaviour (log_sql: on stays the string "on");
// the same bytes are parsed a second time with yaml.v3's node API purely to
// learn key positions.
//
// # Lifecycle and concurrency
//
// A Config is built once at startup (Load or Parse), then only read. It holds
// no locks and does no I/O after loading; concurrent reads are safe as long as
// nobody mutates it. Reloading means building a new Config.
//
// This package never logs; every problem is returned to the caller.
package config
