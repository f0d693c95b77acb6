// Package layers holds no code: its test checks the import graph of the
// module against the architecture docs/architecture.md draws, so that a change
// cannot quietly bend it. Imports point down only:
//
//	cmd/proxy ─▶ proxy/server ─▶ proxy/engine ─┐
//	                          └▶ proxy/session ─┼▶ router ─▶ config
//	                                            └▶ backend ─▶ mysql
//
// The table in layers_test.go is the contract; extend it when a package is
// added, and say why in that package's doc.go.
package layers
