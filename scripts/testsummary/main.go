// Command testsummary reads `go test -json` and prints what go test prints
// without -json: each package's ok line, or for a failing package its
// failures (each failed test's output under its "--- FAIL" line, failed
// subtests nested under their parent), panics, build errors and the FAIL
// line. Tests that did not finish (a timeout, a crash) are printed too.
// It also records every test that skipped, with its skip message, and
// prints the skipped tests grouped by that message, one line per reason:
//
//	skipped: TestProvider, TestVerbs in ./cmd/rnic (no <infiniband/verbs.h> ...; Debian: apt-get install libibverbs-dev)
//
// A subtest whose parent skipped too is folded into its parent; more than
// three subtests of one test skipped for one reason are counted, not
// named; a test that skipped in one run and ran in another (the matrix
// cases skipped under -race and run without it) is not listed.
//
//	go test -json ./... | go run ./scripts/testsummary     # go test's output, then the skips
//
// scripts/test.sh runs go test more than once and prints the skips of all
// runs at the end:
//
//	go test -json -race ./... | testsummary -record FILE   # the output; the results appended to FILE
//	go test -json ./sim/perf | testsummary -record FILE
//	testsummary -summary FILE                              # the skips of both runs
//
// Reading a stream it exits 1 if a test, a package or a build failed, else
// 0. Packages are printed in the order they started, as go test prints
// them. It uses only the standard library.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json's TestEvent, and
// cmd/go's build events).
type event struct {
	Action      string
	Package     string
	Test        string
	Output      string
	ImportPath  string // build-output, build-fail
	FailedBuild string
}

// test is one test or subtest of a package being read.
type test struct {
	name   string
	parent *test
	subs   []*test // its subtests, in the order they started
	items  []item  // its output and its finished subtests, in the order they came
	result string  // "pass", "fail" or "skip"; "" while it runs
}

// item is a piece of a test's output, or a subtest that finished.
type item struct {
	text string
	sub  *test
}

// pkgState is a package whose end has not been read yet.
type pkgState struct {
	path   string
	tests  map[string]*test
	order  []*test // in the order they started
	chunks []item  // package-level output and finished top-level tests
	done   bool    // ended; text is what to print
	text   string
}

// Record is one test's result, as written with -record: "skip" with its
// reason, or "ran" (passed or failed).
type Record struct {
	Package string `json:"pkg"`
	Test    string `json:"test"`
	Result  string `json:"result"`
	Reason  string `json:"reason,omitempty"`
}

// filter reads a go test -json stream.
type filter struct {
	out     io.Writer
	pkgs    map[string]*pkgState
	open    []string // packages not yet ended, in the order they started
	records []Record
	failed  bool
	flush   func([]Record) error // called with new records at each package end
}

func newFilter(out io.Writer) *filter {
	return &filter{out: out, pkgs: map[string]*pkgState{}}
}

func (f *filter) pkg(path string) *pkgState {
	p := f.pkgs[path]
	if p == nil {
		p = &pkgState{path: path, tests: map[string]*test{}}
		f.pkgs[path] = p
		f.open = append(f.open, path)
	}
	return p
}

// line handles one line of the stream.
func (f *filter) line(b []byte) error {
	var e event
	if len(b) == 0 || b[0] != '{' || json.Unmarshal(b, &e) != nil || e.Action == "" {
		// Not an event (go test prints some errors plainly): as it is.
		_, err := fmt.Fprintf(f.out, "%s\n", b)
		return err
	}
	switch e.Action {
	case "build-output":
		_, err := io.WriteString(f.out, e.Output)
		return err
	case "build-fail":
		f.failed = true
		return nil
	}
	if e.Package == "" {
		return nil
	}
	p := f.pkg(e.Package)
	if p.done {
		return nil // nothing comes after a package's end
	}
	if e.Test == "" {
		switch e.Action {
		case "output":
			p.chunks = appendText(p.chunks, e.Output)
		case "pass", "fail", "skip":
			return f.end(p, e.Action)
		}
		return nil
	}
	t := p.tests[e.Test]
	if t == nil {
		t = &test{name: e.Test}
		// The parent is the longest prefix ending before a '/' that is a
		// test (a subtest's own name may contain '/').
		for i := strings.LastIndexByte(e.Test, '/'); i > 0; i = strings.LastIndexByte(e.Test[:i], '/') {
			if par := p.tests[e.Test[:i]]; par != nil {
				t.parent = par
				par.subs = append(par.subs, t)
				break
			}
		}
		p.tests[e.Test] = t
		p.order = append(p.order, t)
	}
	switch e.Action {
	case "output":
		t.items = appendText(t.items, e.Output)
	case "pass", "fail", "skip":
		if t.result != "" {
			return nil
		}
		t.result = e.Action
		if t.parent != nil {
			t.parent.items = append(t.parent.items, item{sub: t})
		} else {
			p.chunks = append(p.chunks, item{sub: t})
		}
		r := Record{Package: p.path, Test: t.name, Result: "ran"}
		if e.Action == "skip" {
			r.Result, r.Reason = "skip", skipReason(t)
		}
		f.records = append(f.records, r)
		if e.Action != "fail" {
			t.items, t.subs = nil, nil // never printed: go test does not print passed or skipped tests' output
		}
	}
	return nil
}

// appendText appends output to items, joining it to the last item if that
// is a line not yet ended (test2json splits very long lines).
func appendText(items []item, s string) []item {
	if n := len(items); n > 0 && items[n-1].sub == nil && !strings.HasSuffix(items[n-1].text, "\n") {
		items[n-1].text += s
		return items
	}
	return append(items, item{text: s})
}

// end prints a package that ended with result as go test would, once the
// packages that started before it have ended (go test prints packages in
// order).
func (f *filter) end(p *pkgState, result string) error {
	var b strings.Builder
	switch result {
	case "pass":
		// go test prints a passing package's "ok" line only.
		last := ""
		for _, c := range p.chunks {
			if c.sub != nil {
				continue
			}
			if strings.HasPrefix(c.text, "ok ") || strings.HasPrefix(c.text, "ok\t") {
				b.WriteString(c.text)
			}
			last = c.text
		}
		if b.Len() == 0 {
			b.WriteString(last)
		}
	case "skip": // no test files
		for _, c := range p.chunks {
			if c.sub == nil {
				b.WriteString(c.text)
			}
		}
	default:
		f.failed = true
		// Tests that never finished (a timeout, a crash) go before the
		// package's closing FAIL lines.
		k := len(p.chunks)
		for k > 0 && p.chunks[k-1].sub == nil && strings.HasPrefix(p.chunks[k-1].text, "FAIL") {
			k--
		}
		for _, c := range p.chunks[:k] {
			writeChunk(&b, c)
		}
		for _, t := range p.order {
			if t.result == "" && (t.parent == nil || t.parent.result != "") {
				writeTest(&b, t, depth(t))
			}
		}
		for _, c := range p.chunks[k:] {
			writeChunk(&b, c)
		}
	}
	if b.Len() > 0 && !strings.HasSuffix(b.String(), "\n") {
		b.WriteString("\n")
	}
	p.done, p.text = true, b.String()
	for len(f.open) > 0 && f.pkgs[f.open[0]].done {
		q := f.pkgs[f.open[0]]
		delete(f.pkgs, q.path)
		f.open = f.open[1:]
		if _, err := io.WriteString(f.out, q.text); err != nil {
			return err
		}
	}
	if f.flush != nil {
		if err := f.flush(f.records); err != nil {
			return err
		}
		f.records = f.records[:0]
	}
	return nil
}

func writeChunk(b *strings.Builder, c item) {
	if c.sub != nil {
		if c.sub.result == "fail" {
			writeTest(b, c.sub, 0)
		}
		return
	}
	if !isFrame(c.text) {
		b.WriteString(c.text)
	}
}

func depth(t *test) int {
	d := 0
	for p := t.parent; p != nil; p = p.parent {
		d++
	}
	return d
}

// writeTest writes a failed (or unfinished) test as go test without -v
// does: its "--- FAIL" line, then its output and its failed subtests in
// the order they came, the log lines indented by depth. Passed and
// skipped subtests are left out, as their output is.
func writeTest(b *strings.Builder, t *test, d int) {
	ind := strings.Repeat("    ", d)
	for _, it := range t.items {
		if it.sub == nil && isResult(it.text, t.name) {
			b.WriteString(ind + strings.TrimLeft(it.text, " "))
		}
	}
	if t.result == "" {
		b.WriteString(ind + "=== RUN   " + t.name + " (did not finish)\n")
	}
	for _, it := range t.items {
		switch {
		case it.sub != nil:
			if it.sub.result == "fail" || it.sub.result == "" {
				writeTest(b, it.sub, d+1)
			}
		case isFrame(it.text) || isResult(it.text, t.name):
		case strings.HasPrefix(it.text, " "):
			b.WriteString(ind + it.text) // a log line: nested as go test nests it
		default:
			b.WriteString(it.text) // a panic, or what the test printed itself
		}
	}
	if t.result == "" {
		for _, s := range t.subs {
			if s.result == "" {
				writeTest(b, s, d+1)
			}
		}
	}
}

// isFrame reports whether s is one of the lines go test -v adds around
// tests' output, which go test without -v does not print.
func isFrame(s string) bool {
	for _, p := range []string{"=== RUN ", "=== PAUSE ", "=== CONT ", "=== NAME ", "PASS\n"} {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// isResult reports whether s is test name's own "--- PASS/FAIL/SKIP" line.
func isResult(s, name string) bool {
	s = strings.TrimLeft(s, " ")
	for _, r := range []string{"--- PASS: ", "--- FAIL: ", "--- SKIP: "} {
		if strings.HasPrefix(s, r+name+" (") {
			return true
		}
	}
	return false
}

// logLine is the start of a t.Log/t.Skip line: the file and line it came from.
var logLine = regexp.MustCompile(`^\s+[^\s:]+\.go:\d+: `)

// skipReason is a skipped test's skip message: its last log entry (the
// t.Skip call), its lines joined with "; ", without a leading "skipped: ".
func skipReason(t *test) string {
	var lines []string
	for _, it := range t.items {
		if it.sub == nil && !isFrame(it.text) && !isResult(it.text, t.name) {
			lines = append(lines, strings.TrimRight(it.text, "\n"))
		}
	}
	start := -1
	for i := len(lines) - 1; i >= 0; i-- {
		if logLine.MatchString(lines[i]) {
			start = i
			break
		}
	}
	if start < 0 {
		for i := len(lines) - 1; i >= 0; i-- {
			if strings.TrimSpace(lines[i]) != "" {
				start = i
				break
			}
		}
	}
	if start < 0 {
		return "no message"
	}
	msg := logLine.ReplaceAllString(lines[start], "")
	for _, l := range lines[start+1:] {
		if l = strings.TrimSpace(l); l != "" {
			msg += "; " + l
		}
	}
	msg = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(msg), "skipped: "))
	if msg == "" {
		return "no message"
	}
	return msg
}

// run reads a stream from r, printing to f.out, and ends the packages left
// open when it ends (go test was killed) as failed.
func (f *filter) run(r io.Reader) error {
	br := bufio.NewReader(r)
	for {
		b, err := br.ReadBytes('\n')
		if len(b) > 0 {
			if err := f.line([]byte(strings.TrimRight(string(b), "\r\n"))); err != nil {
				return err
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
	}
	for _, path := range append([]string(nil), f.open...) {
		if p := f.pkgs[path]; p != nil && !p.done {
			p.chunks = appendText(p.chunks, "FAIL\t"+path+" (the output ended before the package did)\n")
			if err := f.end(p, "fail"); err != nil {
				return err
			}
		}
	}
	return nil
}

// aptInstall finds the packages of "apt-get install a b" in a reason.
var aptInstall = regexp.MustCompile(`apt-get install((?: -\S+)*)((?: [a-z0-9][a-z0-9.+:-]*)+)`)

// summary writes the skipped tests of records, one line per reason.
func summary(w io.Writer, records []Record, module string, root bool) {
	type key struct{ pkg, test string }
	ran := map[key]bool{}
	for _, r := range records {
		if r.Result != "skip" {
			ran[key{r.Package, r.Test}] = true
		}
	}
	skipped := map[key]bool{}
	var skips []Record
	for _, r := range records {
		k := key{r.Package, r.Test}
		if r.Result == "skip" && !ran[k] && !skipped[k] {
			skipped[k] = true
			skips = append(skips, r)
		}
	}
	// Fold subtests into a parent that skipped.
	kept := skips[:0:0]
	for _, r := range skips {
		folded := false
		for i := strings.IndexByte(r.Test, '/'); i > 0; i = nextSlash(r.Test, i) {
			if skipped[key{r.Package, r.Test[:i]}] {
				folded = true
				break
			}
		}
		if !folded {
			kept = append(kept, r)
		}
	}
	if len(kept) == 0 {
		if len(records) > 0 {
			fmt.Fprintln(w, "\nno test skipped")
		}
		return
	}
	var reasons []string
	byReason := map[string][]Record{}
	for _, r := range kept {
		if byReason[r.Reason] == nil {
			reasons = append(reasons, r.Reason)
		}
		byReason[r.Reason] = append(byReason[r.Reason], r)
	}
	// Reasons that name a package to install first: those a reader can do
	// something about.
	sort.SliceStable(reasons, func(i, j int) bool {
		return aptInstall.MatchString(reasons[i]) && !aptInstall.MatchString(reasons[j])
	})
	fmt.Fprintf(w, "\n%d %s skipped, by the reason each gave:\n", len(kept), plural(len(kept), "test", "tests"))
	var debs []string
	seenDeb := map[string]bool{}
	for _, reason := range reasons {
		var groups []string
		var pkgs []string
		byPkg := map[string][]string{}
		for _, r := range byReason[reason] {
			if byPkg[r.Package] == nil {
				pkgs = append(pkgs, r.Package)
			}
			byPkg[r.Package] = append(byPkg[r.Package], r.Test)
		}
		for _, p := range pkgs {
			groups = append(groups, strings.Join(compact(byPkg[p]), ", ")+" in "+relPkg(p, module))
		}
		fmt.Fprintf(w, "skipped: %s (%s)\n", strings.Join(groups, ", "), reason)
		for _, m := range aptInstall.FindAllStringSubmatch(reason, -1) {
			for _, d := range strings.Fields(m[2]) {
				if !seenDeb[d] {
					seenDeb[d] = true
					debs = append(debs, d)
				}
			}
		}
	}
	if len(debs) > 0 {
		cmd := "apt-get install -y " + strings.Join(debs, " ")
		if !root {
			cmd = "sudo " + cmd
		}
		fmt.Fprintf(w, "to install the Debian packages named above: %s\n", cmd)
	}
}

func plural(n int, one, more string) string {
	if n == 1 {
		return one
	}
	return more
}

func nextSlash(s string, i int) int {
	j := strings.IndexByte(s[i+1:], '/')
	if j < 0 {
		return -1
	}
	return i + 1 + j
}

// compact names tests, counting instead of naming more than three
// subtests of one test.
func compact(tests []string) []string {
	top := func(t string) string { return strings.SplitN(t, "/", 2)[0] }
	subs := map[string]int{}
	for _, t := range tests {
		if strings.Contains(t, "/") {
			subs[top(t)]++
		}
	}
	var out []string
	done := map[string]bool{}
	for _, t := range tests {
		tp := top(t)
		switch {
		case !strings.Contains(t, "/") || subs[tp] <= 3:
			out = append(out, t)
		case !done[tp]:
			done[tp] = true
			out = append(out, fmt.Sprintf("%s (%d subtests)", tp, subs[tp]))
		}
	}
	return out
}

// relPkg names a package as go test's arguments would: "." for the
// module's root, "./dir" below it.
func relPkg(p, module string) string {
	switch {
	case module == "":
		return p
	case p == module:
		return "."
	case strings.HasPrefix(p, module+"/"):
		return "./" + p[len(module)+1:]
	}
	return p
}

// moduleOf reads the module path from the go.mod of the current
// directory or the nearest above it, "" if there is none.
func moduleOf() string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	var b []byte
	for {
		if b, err = os.ReadFile(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		up := filepath.Dir(dir)
		if up == dir {
			return ""
		}
		dir = up
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "module" {
			return strings.Trim(f[1], `"`)
		}
	}
	return ""
}

func readRecords(path string) ([]Record, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var rs []Record
	for _, l := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(l) == "" {
			continue
		}
		var r Record
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			return nil, fmt.Errorf("%s: %v", path, err)
		}
		rs = append(rs, r)
	}
	return rs, nil
}

func appendRecords(path string, rs []Record) error {
	if len(rs) == 0 {
		return nil
	}
	fh, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(fh)
	enc := json.NewEncoder(w)
	for _, r := range rs {
		if err := enc.Encode(r); err != nil {
			fh.Close()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		fh.Close()
		return err
	}
	return fh.Close()
}

// Main is the command with its arguments, input and output; it returns
// the exit status.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("testsummary", flag.ContinueOnError)
	fs.SetOutput(stderr)
	record := fs.String("record", "", "append the results to `file` instead of printing the skips")
	sumFile := fs.String("summary", "", "print the skips recorded in `file` (no stream read)")
	module := fs.String("module", "", "the module path, to name packages relative to it (default: from go.mod)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "testsummary: no arguments expected, got %q\n", fs.Args())
		return 2
	}
	if *module == "" {
		*module = moduleOf()
	}
	root := isRoot()
	if *sumFile != "" {
		rs, err := readRecords(*sumFile)
		if err != nil {
			fmt.Fprintf(stderr, "testsummary: %v\n", err)
			return 1
		}
		summary(stdout, rs, *module, root)
		return 0
	}
	f := newFilter(stdout)
	if *record != "" {
		f.flush = func(rs []Record) error { return appendRecords(*record, rs) }
	}
	if err := f.run(stdin); err != nil {
		fmt.Fprintf(stderr, "testsummary: %v\n", err)
		return 1
	}
	if *record == "" {
		summary(stdout, f.records, *module, root)
	}
	if f.failed {
		return 1
	}
	return 0
}

// isRoot reports whether the summary's install command needs no sudo.
var isRoot = func() bool { return os.Geteuid() == 0 }

func main() {
	os.Exit(Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
