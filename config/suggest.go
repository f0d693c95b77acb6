package config

import (
	"reflect"
	"strings"
)

// knownKeys returns the YAML keys of the configuration struct that yaml.v2
// names typeName ("config.ShardRule") in a decoding message, in field
// order; nil for a type that is not one.
func knownKeys(typeName string) []string {
	seen := map[reflect.Type]bool{}
	var find func(t reflect.Type) reflect.Type
	find = func(t reflect.Type) reflect.Type {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || seen[t] {
			return nil
		}
		seen[t] = true
		if t.String() == typeName {
			return t
		}
		for i := range t.NumField() {
			if found := find(t.Field(i).Type); found != nil {
				return found
			}
		}
		return nil
	}
	t := find(reflect.TypeFor[Config]())
	if t == nil {
		return nil
	}
	return structKeys(t)
}

// structKeys lists the keys yaml.v2 decodes into struct t: each field's
// yaml tag name (the lower-cased field name when the tag names none), and
// the keys of inlined structs.
func structKeys(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		switch {
		case name == "-":
			continue
		case strings.Contains(","+opts+",", ",inline,"):
			out = append(out, structKeys(f.Type)...)
			continue
		case name == "":
			name = strings.ToLower(f.Name)
		}
		out = append(out, name)
	}
	return out
}

// closest returns the known word nearest to s by edit distance (insertions,
// deletions, substitutions and swaps of neighbours each count 1), when it is
// near enough to be what was meant: at most 1 edit for words of up to 4
// letters, 2 up to 8, 3 beyond. The first in known wins a tie; "" when
// none is near.
func closest(s string, known []string) string {
	limit := 3
	switch {
	case len(s) <= 4:
		limit = 1
	case len(s) <= 8:
		limit = 2
	}
	best, bestD := "", limit+1
	for _, k := range known {
		if d := editDistance(strings.ToLower(s), k); d < bestD && k != s {
			best, bestD = k, d
		}
	}
	return best
}

// editDistance is the optimal string alignment distance between a and b
// (Levenshtein plus transpositions of adjacent bytes).
func editDistance(a, b string) int {
	// d[i][j] is the distance between a[:i] and b[:j].
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

// didYouMean is ` (did you mean "x"?)` for the known value nearest to s,
// or "" when none is near (closest).
func didYouMean(s string, known []string) string {
	if k := closest(s, known); k != "" {
		return ` (did you mean "` + k + `"?)`
	}
	return ""
}
