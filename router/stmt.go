package router

import "strings"

// Kind is a statement's class as far as the session layer cares.
type Kind uint8

// Statement kinds.
const (
	KindOther Kind = iota // anything not listed: may change session state
	KindRead              // SELECT, SHOW, DESCRIBE, EXPLAIN, WITH, VALUES, TABLE, DO, HELP
	KindWrite             // INSERT, UPDATE, DELETE, REPLACE, LOAD
	KindDDL               // CREATE, ALTER, DROP, TRUNCATE, RENAME, GRANT, REVOKE, ANALYZE, OPTIMIZE, ...
	KindTxn               // BEGIN, START, COMMIT, ROLLBACK (the server's status flags track the rest)
	KindKill              // KILL [CONNECTION | QUERY] id
	KindEmpty             // nothing but whitespace and comments
)

// ReplicaUse says whether a replica may answer a statement, as far as its
// text decides (the session's schema and the plan decide the rest).
type ReplicaUse uint8

// Replica uses.
const (
	// ReplicaNever: the master answers. Writes, DDL, statements that
	// leave state, locking reads (FOR UPDATE, FOR SHARE, LOCK IN SHARE
	// MODE), INTO (files or variables), sequences, replication waits,
	// SLEEP and BENCHMARK, a /*master*/ hint, multi-statements.
	ReplicaNever ReplicaUse = iota
	// ReplicaFollow: a read other than SELECT and WITH (SHOW, DESCRIBE,
	// ...) goes where the session's last read went.
	ReplicaFollow
	// ReplicaAny: a plain SELECT or WITH may go to a replica.
	ReplicaAny
)

// Stmt is what the proxy knows of a statement from its text, decided once
// by Classify in one pass over its tokens: string literals, quoted names
// and comments are skipped as the server skips them (executable comments
// are read into, as the server reads them), so a keyword inside a literal
// or a comment decides nothing. Code above the router reads these facts
// and never looks at the text again.
type Stmt struct {
	Kind    Kind
	Keyword string // first keyword, upper case
	// Sticky is true when the statement may leave state on the backend
	// connection that later statements depend on and that the server does
	// not report (user variables assigned outside SET, temporary tables,
	// named locks, FOUND_ROWS, sequences' last values, LAST_INSERT_ID(x),
	// global read locks, ...). The session then keeps its backend
	// connection. It errs on the side of sticky.
	Sticky bool
	// UsesLastInsertID is true when the statement calls LAST_INSERT_ID().
	UsesLastInsertID bool
	// ImplicitCommit: the statement commits the session's open transaction
	// before it runs, as MariaDB's DDL does (CREATE and DROP TEMPORARY
	// TABLE do not).
	ImplicitCommit bool
	// OutsideTxn: the statement runs outside the session's transaction
	// (DDL, LOCK TABLES, UNLOCK TABLES): it joins no XA branch.
	OutsideTxn bool
	// UnlockTables is UNLOCK TABLES (or UNLOCK TABLE) and nothing else.
	UnlockTables bool
	// LockTables is LOCK TABLES (or LOCK TABLE).
	LockTables bool
	// SetsGlobal: a SET that assigns a global variable (SET GLOBAL x,
	// SET @@GLOBAL.x): new sessions start with the new value.
	SetsGlobal bool
	// Replica says whether a replica may answer.
	Replica ReplicaUse
	// Multi: the text holds more than one statement.
	Multi bool
	// Executable: the text holds an executable comment (/*! */, /*M! */),
	// whose content the server runs.
	Executable bool
	// Blank: the text is empty or whitespace only (the server's "Query
	// was empty").
	Blank bool
	// Program: CREATE or ALTER of a stored program (PROCEDURE, FUNCTION,
	// TRIGGER, EVENT). It is one statement whatever its body holds (the
	// body's ';' end nothing), and the body's words decide none of the
	// facts above: creating the program runs none of it.
	Program bool
	// UserVars: the statement names a user variable (@v); ReadsVars: it
	// reads one (names one other than as the target of INTO or :=).
	UserVars, ReadsVars bool
	// AssignsVars: the statement may assign user variables outside SET
	// (SELECT ... INTO @v, @v := expr, LOAD DATA ... (@v));
	// AssignedVars names them. Sticky is set too.
	AssignsVars bool
	// ReadsTrackers: the statement reads the session's value of a session
	// state tracker (@@session_track_schema, ...), which is the client's,
	// not its connection's (BindTrackers).
	ReadsTrackers bool
	// ReadsCounts: the statement names ROW_COUNT or FOUND_ROWS, whose
	// values are the last statement's on the connection (BindCounts
	// gives them the session's). Sticky is set too.
	ReadsCounts bool
	// CalcFoundRows: SQL_CALC_FOUND_ROWS (FOUND_ROWS() is then the
	// server's count of the rows without LIMIT).
	CalcFoundRows bool
	// InsertSelect: INSERT or REPLACE ... SELECT (FOUND_ROWS() is then
	// the rows its SELECT found).
	InsertSelect bool
	// LimitOffset is the offset of the statement's own LIMIT (LIMIT o, n
	// or LIMIT n OFFSET o, outside parentheses), as a literal: the rows
	// MariaDB counts as found before the ones it sends.
	LimitOffset uint64
	// Diagnostics: the statement reads the last statement's warnings or
	// errors (SHOW WARNINGS, SHOW ERRORS, SHOW COUNT(*) WARNINGS, GET
	// DIAGNOSTICS, @@warning_count, @@error_count): it runs where they
	// are.
	Diagnostics bool
	// CallsRoutine: the statement may call a stored routine (CALL, or a
	// name that is neither a keyword nor a native function followed by
	// '(': notRoutines), whose body may leave anything on the
	// connection. Sticky and Effects are set too.
	CallsRoutine bool
	// Effects: the statement may do more than assign variables on its
	// connection: take or release named locks, advance or set a
	// sequence, call a stored routine. Such a SET is neither run on a
	// pooled connection nor repeated on another node.
	Effects bool
	// ReadsHeld: the statement reads state the session keeps on a
	// connection and no other connection has (a sequence's last value, a
	// named lock's holder, the connection's id): it must run where that
	// state is.
	ReadsHeld bool
	// Carried: the statement is Sticky only because it assigns user
	// variables or reads ROW_COUNT/FOUND_ROWS, which a session carries
	// itself (reading the variables back, BindCounts).
	Carried bool
	// second is the second keyword as written (SecondIs).
	second string
}

// SecondIs reports whether the statement's second word is w (upper case
// ASCII), in any case: START TRANSACTION, EXECUTE IMMEDIATE.
func (st *Stmt) SecondIs(w string) bool { return equalFoldASCII(st.second, w) }

// Classify reads a statement's text once, under the session's sql_mode
// (which decides how backslashes in strings read), and returns its facts.
// It does not allocate for the statements of the hot path.
func Classify(sql string, mode Mode) Stmt {
	sc := stmtScanner{s: sql, mode: mode}
	return sc.run()
}

// stmtScanner is one pass of Classify over a text.
type stmtScanner struct {
	s    string
	mode Mode
	i    int

	st    Stmt
	words int // words read, keywords and names alike
	// prev and prev2 are the last two keywords read (upper case, "" for
	// a word that is no keyword this scanner knows), for two-word facts.
	prev, prev2  string
	lastEnd      int  // end of the last token, to tell adjacency
	lastQuoted   bool // the last token was a quoted string or name
	afterDot     bool // the last token was '.': the next word is a name
	userVar      bool // a user variable (@x) appears
	assignOp     bool // := appears
	lidOpen      int  // 1 after LAST_INSERT_ID, 2 after its '('
	tempTable    bool // TEMPORARY before TABLE in CREATE or DROP
	tableSeen    bool
	readLock     bool // READ LOCK or FOR EXPORT (FLUSH)
	masterOnly   bool // a word that keeps a read on the master
	hintMaster   bool // a /*master*/ hint
	ended        bool // a ';' ended a statement
	inExecutable int  // executable comments open
	firstWordEnd int
	lastComma    bool // the last token was ','
	lastNumeric  bool // the last token was a number
	// lastWord is the last word (or quoted name) read and lastWordEnd its
	// end: a '(' right after it makes it a call (callOpen); qualified
	// (after '.') and tableName (the name of a table, whose '(' opens a
	// column list) say what it names.
	lastWord    string
	lastWordEnd int
	qualified   bool
	tableName   bool
	tableCtx    bool // after INTO, FROM, TABLE, JOIN, UPDATE, ...: the next name is a table's
	carried     bool // a reason to be sticky the session carries (Carried)
	ntok        int  // tokens read
	lastWordTok int  // ntok after the last word
	// vars, when not nil, collects the user variables the statement may
	// assign (AssignedVars); intoList is set while INTO @a, @b, ... is
	// read, lastVar is the last variable read (its token lastVarTok).
	vars  *[]SetVar
	reads int // user variables read (ReadsVars)
	// parens counts the parentheses open; limit is where a LIMIT clause
	// outside them is read (1: after LIMIT, 2: after its first number,
	// 3: after the comma, 4: after OFFSET), limitA its first number.
	parens, limit int
	limitA        uint64
	intoList      bool
	lastVar       string
	lastVarTok    int
	// A stored program (CREATE or ALTER of a PROCEDURE, FUNCTION,
	// TRIGGER or EVENT) is one statement whatever its body holds: the
	// body's ';' end no statement while a BEGIN ... END (or CASE ... END)
	// block is open (depth), and its words decide nothing, since creating
	// the program runs none of them (program). BEGIN NOT ATOMIC ... END
	// runs at once: only its ';' are read as the server reads them.
	program    bool
	compound   bool
	depth      int
	pendingEnd bool // END read; the next token says what it closes
}

// hintSlot reports whether a plain comment at this point is where kingshard
// hints go: before the first keyword or right after it.
func (sc *stmtScanner) hintSlot() bool {
	return sc.words == 0 || sc.words == 1 && sc.lastEnd == sc.firstWordEnd
}

func (sc *stmtScanner) run() Stmt {
	s := sc.s
	blank := true
	for sc.i < len(s) {
		c := s[sc.i]
		if !isSpace(c) {
			blank = false
		}
		switch {
		case isSpace(c):
			sc.i++
		case c == '#' || c == '-' && lineComment(s, sc.i):
			if sc.ended {
				sc.st.Multi = true // the server runs what follows ';' as a statement of its own
			}
			for sc.i < len(s) && s[sc.i] != '\n' {
				sc.i++
			}
		case c == '/' && sc.i+1 < len(s) && s[sc.i+1] == '*':
			sc.comment()
		case c == '*' && sc.inExecutable > 0 && sc.i+1 < len(s) && s[sc.i+1] == '/':
			sc.inExecutable--
			sc.i += 2
		case c == '\'' || c == '"':
			sc.seen()
			sc.i = sc.skipString(c)
			sc.token(true)
		case c == '`':
			sc.seen()
			start := sc.i
			if end := scanQuoted(s, sc.i, '`'); end > 0 {
				sc.i = end
			} else {
				sc.i = len(s)
			}
			sc.nameRead(s[start:sc.i], sc.afterDot)
			sc.token(true)
		case c == '@':
			sc.variable()
		case isIdent(c):
			start := sc.i
			for sc.i < len(s) && isIdent(s[sc.i]) {
				sc.i++
			}
			sc.word(s[start:sc.i])
		default:
			sc.punct(c)
		}
	}
	sc.st.Blank = blank
	return sc.finish()
}

// seen notes that a token other than a word was read (for ';' and the
// multi-statement fact).
func (sc *stmtScanner) seen() {
	sc.ntok++
	if sc.pendingEnd {
		sc.pendingEnd = false
		sc.depth-- // END) or END$: a block's end
	}
	if sc.ended {
		sc.st.Multi = true
		sc.ended = false
	}
	if sc.lidOpen == 2 {
		sc.st.Sticky = true // LAST_INSERT_ID(expr) sets it
		sc.lidOpen = 0
	}
}

// token records the end of a token just read.
func (sc *stmtScanner) token(quoted bool) {
	sc.lastEnd, sc.lastQuoted, sc.afterDot = sc.i, quoted, false
	sc.lastComma, sc.lastNumeric = false, false
	sc.prev2, sc.prev = sc.prev, ""
}

// comment skips a /* */ comment, reads into an executable one, and notes
// a /*master*/ hint where hints go.
func (sc *stmtScanner) comment() {
	s, i := sc.s, sc.i
	if i+2 < len(s) && (s[i+2] == '!' || (s[i+2] == 'M' || s[i+2] == 'm') && i+3 < len(s) && s[i+3] == '!') {
		sc.st.Executable = true
		sc.inExecutable++
		i += 3
		if s[i-1] != '!' {
			i++
		}
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		sc.i = i
		return
	}
	if sc.ended {
		sc.st.Multi = true // the server runs what follows ';' as a statement of its own
	}
	content, end, plain := plainComment(s, i)
	if end < 0 {
		sc.i = len(s) // unterminated: the server reads the rest as comment
		return
	}
	if plain && sc.hintSlot() && equalFoldTrim(content, "master") {
		sc.hintMaster = true
	}
	sc.i = end
}

// skipString returns the end of the string literal (or ANSI-quoted name)
// opened by q at sc.i: doubled quotes continue it, and so does a
// backslash-escaped quote unless the session's sql_mode has
// NO_BACKSLASH_ESCAPES (or, for ", ANSI_QUOTES: a name has no escapes).
func (sc *stmtScanner) skipString(q byte) int {
	s := sc.s
	backslash := sc.mode&ModeNoBackslashEscapes == 0 && !(q == '"' && sc.mode&ModeANSIQuotes != 0)
	for k := sc.i + 1; k < len(s); k++ {
		switch s[k] {
		case '\\':
			if backslash {
				k++
			}
		case q:
			if k+1 < len(s) && s[k+1] == q {
				k++
				continue
			}
			return k + 1
		}
	}
	return len(s)
}

// variable reads @name, @'name', @@name, @@global.name. The host part of
// an account ('u'@'h', u@h) reads as a user variable too: the server's
// lexer reads SELECT@a as SELECT @a, and a variable only read decides
// nothing.
func (sc *stmtScanner) variable() {
	s := sc.s
	sc.seen()
	vstart := sc.i
	i := sc.i + 1
	if i < len(s) && s[i] == '@' {
		// A system variable: @@x, @@global.x, @@session.x.
		i++
		start := i
		for i < len(s) && isIdent(s[i]) {
			i++
		}
		name := s[start:i]
		if i+1 < len(s) && s[i] == '.' && isIdent(s[i+1]) {
			scope := name
			start = i + 1
			for i = start; i < len(s) && isIdent(s[i]); i++ {
			}
			name = s[start:i]
			if equalFoldASCII(scope, "global") && sc.st.Keyword == "SET" && sc.target() {
				sc.st.SetsGlobal = true
			}
		}
		if IsTracker(strings.ToLower(name)) && !equalFoldASCII(s[vstart+2:start], "global.") {
			sc.st.ReadsTrackers = true
		}
		if (equalFoldASCII(name, "last_insert_id") || equalFoldASCII(name, "identity")) && !sc.program {
			sc.st.UsesLastInsertID = true // the connection's value, as LAST_INSERT_ID()
		}
		if equalFoldASCII(name, "pseudo_thread_id") && !sc.program {
			// The connection's thread id, as CONNECTION_ID(): the session
			// keeps the connection, so KILL of that id names it.
			sc.st.Sticky, sc.st.ReadsHeld = true, true
		}
		if (equalFoldASCII(name, "warning_count") || equalFoldASCII(name, "error_count")) && !sc.program {
			sc.st.Diagnostics = true
		}
		sc.i = i
		sc.token(false)
		return
	}
	switch {
	case i < len(s) && (s[i] == '\'' || s[i] == '"'):
		sc.i = i
		sc.i = sc.skipString(s[i])
	case i < len(s) && s[i] == '`':
		if end := scanQuoted(s, i, '`'); end > 0 {
			sc.i = end
		} else {
			sc.i = len(s)
		}
	case i < len(s) && isIdent(s[i]):
		for i < len(s) && (isIdent(s[i]) || s[i] == '.') {
			i++
		}
		sc.i = i
	default:
		sc.punct('@')
		return
	}
	sc.userVar, sc.tableCtx = true, false
	sc.st.UserVars = true
	into := (sc.prev == "INTO" || sc.intoList && sc.lastComma) && !sc.program
	if into {
		sc.st.AssignsVars, sc.carried = true, true // SELECT ... INTO @v assigns it
	}
	sc.lastVar, sc.lastVarTok = s[vstart:sc.i], sc.ntok
	if into || sc.st.Keyword == "LOAD" {
		sc.collect(sc.lastVar)
	}
	if !into && sc.st.Keyword != "LOAD" {
		sc.reads++ // unless := follows (LOAD DATA reads the variables its column list assigns)
	}
	sc.token(false)
	sc.intoList = into
}

// limitWord follows a LIMIT clause outside parentheses to its offset
// (Stmt.LimitOffset).
func (sc *stmtScanner) limitWord(w string) {
	num := isDigit(w[0])
	var n uint64
	if num {
		for i := 0; i < len(w); i++ {
			if !isDigit(w[i]) {
				num = false
				break
			}
			n = n*10 + uint64(w[i]-'0')
		}
	}
	switch {
	case sc.parens == 0 && equalFoldASCII(w, "LIMIT"):
		sc.limit = 1
	case sc.limit == 1 && num:
		sc.limit, sc.limitA = 2, n
	case sc.limit == 2 && equalFoldASCII(w, "OFFSET"):
		sc.limit = 4
	case sc.limit == 3 && num:
		sc.st.LimitOffset, sc.limit = sc.limitA, 0
	case sc.limit == 4 && num:
		sc.st.LimitOffset, sc.limit = n, 0
	default:
		sc.limit = 0
	}
}

// nameRead records a word or quoted name read (w, with its quotes): a
// '(' right after it makes it a call (call). qualified: it follows '.'.
func (sc *stmtScanner) nameRead(w string, qualified bool) {
	sc.lastWord, sc.lastWordTok, sc.qualified = w, sc.ntok, qualified
	switch {
	case qualified:
		// db.t keeps what db was: a table's name or not.
	case sc.tableCtx:
		sc.tableName = true
		switch knownWord(w) {
		case "INTO", "IGNORE", "LOW_PRIORITY", "DELAYED", "HIGH_PRIORITY", "QUICK", "RECURSIVE":
			// INSERT IGNORE INTO t: the table's name is still to come.
		default:
			sc.tableCtx = false
		}
	default:
		sc.tableName = false
	}
}

// call reads the '(' after the last word: a call of a stored function
// unless the word names a table (its column list follows), is a keyword
// or a native function (notRoutine); a qualified name (db.f) is one.
func (sc *stmtScanner) call() {
	w := sc.lastWord
	if len(w) > 1 && w[0] == '`' {
		w = w[1 : len(w)-1]
	}
	switch {
	case sc.tableName:
	case sc.qualified || !notRoutine(w):
		sc.st.CallsRoutine = true
	}
}

// notRoutine reports whether w (any case) is a keyword or a native
// function (notRoutines), without allocating.
func notRoutine(w string) bool {
	if len(w) > 64 {
		return false
	}
	var buf [64]byte
	for i := 0; i < len(w); i++ {
		c := w[i]
		if 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		buf[i] = c
	}
	_, ok := notRoutines[string(buf[:len(w)])]
	return ok
}

// collect adds the user variable written v (@name, @'name', @`name`) to
// the variables AssignedVars returns.
func (sc *stmtScanner) collect(v string) {
	if sc.vars == nil || len(v) < 2 {
		return
	}
	name := v[1:]
	if q := name[0]; q == '\'' || q == '"' || q == '`' {
		name = unquoteName(name, q)
	}
	name = strings.ToLower(name)
	for _, have := range *sc.vars {
		if have.Name == name {
			return
		}
	}
	*sc.vars = append(*sc.vars, SetVar{Name: name, User: true})
}

// unquoteName returns the content of a name quoted with q, doubled
// quotes (and, in strings, backslash escapes) read as one character.
func unquoteName(s string, q byte) string {
	if len(s) < 2 || s[len(s)-1] != q {
		return s
	}
	s = s[1 : len(s)-1]
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == q && i+1 < len(s) && s[i+1] == q:
			i++
		case c == '\\' && q != '`' && i+1 < len(s):
			i++
			c = s[i]
		}
		b.WriteByte(c)
	}
	return b.String()
}

// AssignedVars returns the user variables a statement may assign outside
// SET (Stmt.AssignsVars): those after INTO, before :=, and those a LOAD
// DATA names. The session reads their values back after the statement.
func AssignedVars(sql string, mode Mode) []SetVar {
	var vars []SetVar
	sc := stmtScanner{s: sql, mode: mode, vars: &vars}
	sc.run()
	return vars
}

// target reports whether the token at hand is where SET names what it
// assigns: right after SET, or after a comma.
func (sc *stmtScanner) target() bool {
	return sc.words == 1 && sc.lastEnd == sc.firstWordEnd || sc.lastComma
}

// punct reads one byte of punctuation.
func (sc *stmtScanner) punct(c byte) {
	s := sc.s
	if sc.words == 0 && (c == '(' || c == ';') {
		sc.i++ // before the first keyword, as the server skips them
		return
	}
	if c == '(' && sc.lastWordTok == sc.ntok && sc.ntok > 0 && !sc.program {
		sc.call()
	}
	if c != ',' {
		sc.intoList = false
	}
	switch {
	case c == '(':
		sc.parens++
	case c == ')':
		sc.parens--
	case c == ',' && sc.limit == 2:
		sc.limit = 3
	default:
		sc.limit = 0
	}
	switch c {
	case ';':
		if sc.pendingEnd {
			sc.pendingEnd = false
			sc.depth--
		}
		sc.ended = sc.words > 0 && sc.depth <= 0
		sc.i++
		sc.lastEnd = sc.i
		return
	case ':':
		if sc.i+1 < len(s) && s[sc.i+1] == '=' {
			sc.assignOp = true
			if sc.lastVarTok == sc.ntok && !sc.program {
				sc.collect(sc.lastVar) // @v := expr
				sc.reads--
			}
		}
	case '(':
		if sc.lidOpen == 1 {
			sc.seen()
			sc.lidOpen = 2
			sc.i++
			sc.lastEnd = sc.i
			return
		}
	case ')':
		if sc.lidOpen == 2 {
			sc.lidOpen = 0 // LAST_INSERT_ID(): reads it
		}
	}
	sc.seen()
	sc.lidOpen = 0
	sc.i++
	numeric := sc.lastNumeric && sc.lastEnd == sc.i-1
	sc.token(false)
	// t.temporary names a column; 1. is a number, and the word after it
	// is read as a word.
	sc.afterDot = c == '.' && !numeric
	sc.lastComma = c == ','
}

// word reads one word: the first is the statement's keyword; later ones
// are matched against the keywords that decide a fact.
func (sc *stmtScanner) word(w string) {
	afterEnd := sc.pendingEnd
	if afterEnd {
		sc.pendingEnd = false
		switch knownWord(w) {
		case "IF", "LOOP", "WHILE", "REPEAT":
			// END IF, END LOOP, ...: those open no block here.
		default:
			sc.depth-- // END, END CASE, END label
		}
	}
	sc.seen()
	name := sc.afterDot // t.temporary is a column
	target := sc.target()
	sc.lastEnd, sc.lastQuoted, sc.afterDot = sc.i, false, false
	sc.lastComma, sc.lastNumeric = false, isDigit(w[0])
	sc.intoList = false
	sc.nameRead(w, name)
	sc.limitWord(w)
	sc.words++
	if sc.words == 1 {
		sc.firstWordEnd = sc.i
		sc.st.Keyword = keyword(w)
		sc.prev2, sc.prev = "", sc.st.Keyword
		switch sc.st.Keyword {
		case "INSERT", "REPLACE", "UPDATE", "DELETE", "WITH":
			sc.tableCtx = true // WITH cte (a, b): a name too
		case "CALL":
			sc.st.CallsRoutine = true
		}
		return
	}
	if sc.words == 2 {
		sc.st.second = w
		if sc.st.Keyword == "BEGIN" && equalFoldASCII(w, "NOT") {
			sc.compound, sc.depth = true, 1 // BEGIN NOT ATOMIC ... END
		}
	}
	kw := ""
	if !name {
		kw = knownWord(w)
	}
	st := &sc.st
	switch kw {
	case "PROCEDURE", "FUNCTION", "TRIGGER", "EVENT":
		if (st.Keyword == "CREATE" || st.Keyword == "ALTER") && !sc.tableSeen && !sc.program && sc.words <= 8 {
			sc.program, sc.compound = true, true
		}
	case "BEGIN", "CASE":
		if sc.compound && !afterEnd {
			sc.depth++
		}
	case "END":
		if sc.compound {
			sc.pendingEnd = true
		}
	}
	if sc.program {
		sc.prev2, sc.prev = sc.prev, kw
		return // the body runs later, when the program is called
	}
	if kw == "UPDATE" && sc.prev != "FOR" {
		sc.tableCtx = true // ON DUPLICATE KEY UPDATE c: a column, read as a name
	}
	switch kw {
	case "TEMPORARY":
		st.Sticky = true
		if !sc.tableSeen {
			sc.tempTable = true
		}
	case "TABLE", "TABLES":
		sc.tableSeen = true
		sc.tableCtx = true
	case "FROM", "JOIN", "STRAIGHT_JOIN":
		sc.tableCtx = true
	case "SELECT":
		st.InsertSelect = st.InsertSelect || st.Keyword == "INSERT" || st.Keyword == "REPLACE"
	case "IS_USED_LOCK", "IS_FREE_LOCK", "LASTVAL", "CONNECTION_ID", "PSEUDO_THREAD_ID":
		st.Sticky, st.ReadsHeld = true, true
	case "SQL_LOG_BIN":
		st.Sticky = true
	case "RELEASE_LOCK", "RELEASE_ALL_LOCKS":
		st.Sticky, st.Effects, st.ReadsHeld = true, true, true
	case "GET_LOCK", "SETVAL":
		st.Sticky, st.Effects = true, true
	case "SQL_CALC_FOUND_ROWS":
		st.Sticky, st.CalcFoundRows = true, true
	case "FOUND_ROWS", "ROW_COUNT":
		st.ReadsCounts, sc.carried = true, true
	case "NEXTVAL":
		st.Sticky, st.Effects, sc.masterOnly = true, true, true
	case "VALUE":
		switch sc.prev {
		case "PREVIOUS":
			st.Sticky, st.ReadsHeld = true, true
		case "NEXT":
			st.Sticky, st.Effects, sc.masterOnly = true, true, true
		}
	case "LAST_INSERT_ID":
		st.UsesLastInsertID = true
		sc.lidOpen = 1
	case "UPDATE", "SHARE":
		if sc.prev == "FOR" || kw == "SHARE" && sc.prev == "IN" && sc.prev2 == "LOCK" {
			sc.masterOnly = true // a locking read
		}
	case "INTO", "MASTER_GTID_WAIT", "MASTER_POS_WAIT", "SLEEP", "BENCHMARK":
		sc.masterOnly = true
		sc.tableCtx = kw == "INTO"
	case "LOCK":
		if sc.prev == "READ" {
			sc.readLock = true
		}
	case "EXPORT":
		if sc.prev == "FOR" {
			sc.readLock = true
		}
	case "GLOBAL":
		if st.Keyword == "SET" && target {
			st.SetsGlobal = true
		}
	}
	if kw != "LAST_INSERT_ID" {
		sc.lidOpen = 0
	}
	sc.prev2, sc.prev = sc.prev, kw
}

// finish derives the facts that depend on the whole text.
func (sc *stmtScanner) finish() Stmt {
	st := sc.st
	st.Program = sc.program
	switch st.Keyword {
	case "":
		st.Kind = KindEmpty
		return st
	case "SELECT", "SHOW", "DESC", "DESCRIBE", "EXPLAIN", "WITH", "VALUES", "TABLE", "DO", "HELP", "CHECKSUM":
		st.Kind = KindRead
	case "INSERT", "UPDATE", "DELETE", "REPLACE", "LOAD":
		st.Kind = KindWrite
	case "CREATE", "ALTER", "DROP", "TRUNCATE", "RENAME", "GRANT", "REVOKE", "ANALYZE", "OPTIMIZE", "REPAIR", "CHECK", "FLUSH":
		st.Kind = KindDDL
	case "BEGIN", "COMMIT", "ROLLBACK":
		st.Kind = KindTxn
	case "START":
		st.Kind = KindTxn
		if !st.SecondIs("TRANSACTION") {
			st.Kind, st.Sticky = KindOther, true // START SLAVE and friends
		}
	case "KILL":
		st.Kind = KindKill
	default:
		st.Kind = KindOther
		st.Sticky = true
	}
	switch st.Keyword {
	case "SHOW":
		st.Diagnostics = st.Diagnostics || st.SecondIs("WARNINGS") || st.SecondIs("ERRORS") || st.SecondIs("COUNT")
	case "GET":
		st.Diagnostics = st.Diagnostics || st.SecondIs("DIAGNOSTICS") || st.SecondIs("CURRENT") || st.SecondIs("STACKED")
	}
	switch st.Keyword {
	case "LOCK":
		st.LockTables = st.SecondIs("TABLES") || st.SecondIs("TABLE")
		st.OutsideTxn = true
		st.ImplicitCommit = st.LockTables // as in MariaDB: the open transaction commits first
	case "UNLOCK":
		st.UnlockTables = sc.words == 2 && (st.SecondIs("TABLES") || st.SecondIs("TABLE")) && !st.Multi
		st.OutsideTxn = true
	case "LOAD":
		if sc.userVar {
			st.AssignsVars, sc.carried = true, true // LOAD DATA ... (@v) SET c = @v assigns @v
		}
	case "FLUSH":
		if sc.readLock {
			st.Sticky = true
		}
	}
	if sc.lidOpen == 2 {
		st.Sticky = true // LAST_INSERT_ID( at the end of a cut text
	}
	if sc.userVar && sc.assignOp && !sc.program {
		st.AssignsVars, sc.carried = true, true // @v := expr outside SET
	}
	if st.Kind == KindDDL {
		st.CallsRoutine = false // KEY k(a), CHECK (f(a)) define; creating runs nothing
	}
	if st.CallsRoutine {
		st.Effects = true
	}
	if st.Effects {
		st.Sticky = true
	}
	st.ReadsVars = sc.reads > 0 && !sc.program
	st.Carried = sc.carried && !st.Sticky
	if sc.carried {
		st.Sticky = true
	}
	if st.Kind == KindDDL {
		// CREATE and DROP TEMPORARY TABLE neither commit nor leave the
		// transaction: they run inside it, as on the server.
		st.ImplicitCommit = !(sc.tempTable && (st.Keyword == "CREATE" || st.Keyword == "DROP"))
		st.OutsideTxn = st.ImplicitCommit
	}
	switch {
	case st.Kind != KindRead || st.Sticky || st.UsesLastInsertID || st.Multi || sc.hintMaster:
		st.Replica = ReplicaNever
	case st.Keyword != "SELECT" && st.Keyword != "WITH":
		st.Replica = ReplicaFollow
	case sc.masterOnly:
		st.Replica = ReplicaNever
	default:
		st.Replica = ReplicaAny
	}
	return st
}

// keyword returns the first keyword in upper case: the keywords the
// proxy acts on are constants (no allocation on the hot path).
func keyword(w string) string {
	if k := knownWord(w); k != "" {
		return k
	}
	return strings.ToUpper(w)
}

// knownWords are the words Classify acts on: first keywords the layers
// above compare, and the words and pairs of words that decide a fact.
var knownWords = func() map[string]string {
	m := map[string]string{}
	for _, w := range []string{
		"SELECT", "INSERT", "UPDATE", "DELETE", "REPLACE", "SHOW", "SET", "BEGIN", "START", "COMMIT", "ROLLBACK",
		"WITH", "LOAD", "CREATE", "DROP", "ALTER", "USE", "LOCK", "UNLOCK", "FLUSH", "KILL", "PREPARE", "EXECUTE",
		"DEALLOCATE", "SAVEPOINT", "RELEASE", "TEMPORARY", "TABLE", "TABLES", "GET_LOCK", "RELEASE_LOCK",
		"RELEASE_ALL_LOCKS", "IS_USED_LOCK", "IS_FREE_LOCK", "SQL_CALC_FOUND_ROWS", "FOUND_ROWS", "ROW_COUNT",
		"LASTVAL", "SETVAL", "NEXTVAL", "CONNECTION_ID", "PSEUDO_THREAD_ID", "SQL_LOG_BIN", "PREVIOUS", "NEXT",
		"VALUE", "LAST_INSERT_ID", "FOR", "IN", "SHARE", "INTO", "MASTER_GTID_WAIT", "MASTER_POS_WAIT", "SLEEP",
		"BENCHMARK", "READ", "EXPORT", "GLOBAL", "DESC", "DESCRIBE", "EXPLAIN", "VALUES", "DO", "PROCEDURE",
		"FUNCTION", "TRIGGER", "EVENT", "CASE", "END", "IF", "LOOP", "WHILE", "REPEAT", "FROM", "JOIN",
		"STRAIGHT_JOIN", "CALL", "IGNORE", "LOW_PRIORITY", "DELAYED", "HIGH_PRIORITY", "QUICK",
		"RECURSIVE",
	} {
		m[w] = w
	}
	return m
}()

// knownWord returns w in upper case when it is a word Classify acts on
// (knownWords), "" otherwise, without allocating.
func knownWord(w string) string {
	if len(w) < 2 || len(w) > 20 {
		return ""
	}
	var buf [20]byte
	for i := 0; i < len(w); i++ {
		c := w[i]
		if 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		buf[i] = c
	}
	return knownWords[string(buf[:len(w)])]
}

// MultiSticky reports whether a multi-statement text of user's session
// leaves state on its connection. With shard rules each statement is
// classified (a batch of INSERTs, as Connector/J rewrites one, leaves none,
// so it does not tie the session to a node); without, the whole text
// counts as leaving state: the session uses one node anyway, and the text
// is not parsed.
func (r *Router) MultiSticky(sql, user string, mode Mode) bool {
	if !r.Sharded(user) {
		return true
	}
	texts, ok := SplitStatements(sql, mode)
	if !ok {
		return true
	}
	for _, q := range texts {
		if st := Classify(q, mode); st.Sticky || st.Kind == KindOther || st.Kind == KindTxn || st.Kind == KindEmpty {
			return true
		}
	}
	return false
}
