// Package doccheck holds no code: its test keeps the project's documentation
// navigable. README.md is the front door and docs/ holds the manual, one file
// per topic, so a reader follows links between them; a link that points at a
// file that was moved or at a heading that was renamed fails silently on
// GitHub. The test reads README.md and every docs/*.md and fails on
//
//   - a relative link to a file or directory that does not exist, or one
//     that leaves the repository (../ past its root): a reader of a clone
//     has nothing outside it;
//   - a path going up in an inline code span (`../shared/BENCH.md`) that
//     leaves the repository or names nothing in it;
//   - a #anchor that no heading of the target Markdown file produces (by
//     GitHub's rules: lower case, spaces to '-', punctuation dropped, a
//     repeated heading gets -1, -2, ...);
//   - a README.md longer than 320 lines (it stays a front door; the manual
//     grows in docs/).
//
// It runs with `go test ./...`, so `make test` checks the links.
package doccheck
