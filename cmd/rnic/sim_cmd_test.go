package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rnic/rnic/sim/profile"
)

// runRnic runs "rnic args..." and returns its standard output and error.
func runRnic(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errw bytes.Buffer
	root := newRootCmd()
	root.SetOut(&out)
	root.SetErr(&errw)
	root.SetArgs(args)
	err = root.Execute()
	return out.String(), errw.String(), err
}

// tableColumn returns the values of the column called name in a table
// that WriteTable printed.
func tableColumn(t *testing.T, table, name string) []string {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(table), "\n")
	header := strings.Fields(lines[0])
	for i, h := range header {
		if h == name {
			var out []string
			for _, l := range lines[1:] {
				out = append(out, strings.Fields(l)[i])
			}
			return out
		}
	}
	t.Fatalf("no column %s in:\n%s", name, table)
	return nil
}

func TestSimLatency(t *testing.T) {
	out, errw, err := runRnic(t, "sim", "--test", "write_lat", "--size", "8", "--iters", "50", "--warmup", "5", "--quiet")
	if err != nil || errw != "" {
		t.Fatalf("err %v, stderr %q", err, errw)
	}
	for _, col := range []string{"lat_avg_ns", "lat_p50_ns", "lat_p99_ns"} {
		v := tableColumn(t, out, col)
		ns, err := strconv.ParseFloat(v[0], 64)
		// A small WRITE on a ConnectX-6 class NIC takes around a microsecond.
		if len(v) != 1 || err != nil || ns < 300 || ns > 5000 {
			t.Errorf("%s = %v: not a plausible one-way latency:\n%s", col, v, out)
		}
	}
	if got := tableColumn(t, out, "test"); got[0] != "write_lat" {
		t.Errorf("test column %v", got)
	}
}

func TestSimBreakdown(t *testing.T) {
	out, _, err := runRnic(t, "sim", "--breakdown")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"cx6: one 8-byte RDMA WRITE", "at[ns]", "doorbell", "host starts posting the WRITE", "payload written, visible to host", "host polls the completion"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
}

func TestSimProfile(t *testing.T) {
	out, _, err := runRnic(t, "sim", "profile", "list")
	if err != nil || !strings.Contains(out, "cx6 ") || !strings.Contains(out, "hangu ") || !strings.Contains(out, "ConnectX-6") {
		t.Errorf("profile list: %v\n%s", err, out)
	}
	out, _, err = runRnic(t, "sim", "profile", "show", "cx6")
	if err != nil {
		t.Fatal(err)
	}
	p, err := profile.Load(strings.NewReader(out))
	if err != nil || p.Name != "cx6" || !strings.Contains(out, "# ") {
		t.Errorf("profile show cx6: %v; want TOML with comments that loads:\n%s", err, out)
	}
	out, _, err = runRnic(t, "sim", "profile", "show", "cx6", "--set", "caches.qpc.entries=4096")
	if err != nil {
		t.Fatal(err)
	}
	if p, err := profile.Load(strings.NewReader(out)); err != nil || p.Caches.QPC.Entries != 4096 {
		t.Errorf("profile show --set: %v, %+v", err, p)
	}
	if _, _, err := runRnic(t, "sim", "profile", "show", "cx7"); err == nil || !strings.Contains(err.Error(), "cx6") {
		t.Errorf("profile show cx7: %v; want an error naming the built-in profiles", err)
	}
}

func TestSimFiles(t *testing.T) {
	dir := t.TempDir()
	file := func(name string) string { return filepath.Join(dir, name) }
	mine := file("mine.toml")
	show, _, err := runRnic(t, "sim", "profile", "show", "cx6")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(mine, []byte(show), 0o644); err != nil {
		t.Fatal(err)
	}
	sweep := []string{"sim", "--profile", mine, "--set", "caches.qpc.entries=1024,2048", "--test", "write_bw,read_bw", "--size", "64",
		"--qps", "1,2", "--iters", "40", "--metadata", "-j", "2"}
	out, errw, err := runRnic(t, slices.Concat(sweep, []string{"--wall", "--csv", file("r.csv"), "--json", file("r.json"),
		"--plot", file("r.svg"), "--y", "gbps", "--series", "test", "--logx"})...)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(errw, "\n"); n != 8 || !strings.Contains(errw, "[8/8] ") || !strings.Contains(errw, "caches.qpc.entries=2048") {
		t.Errorf("progress: %d lines, want 8:\n%s", n, errw)
	}
	if got := tableColumn(t, out, "caches.qpc.entries"); len(got) != 8 || got[0] != "1024" || got[7] != "2048" {
		t.Errorf("table's override column %v:\n%s", got, out)
	}
	csv, err := os.ReadFile(file("r.csv"))
	if err != nil || !strings.HasPrefix(string(csv), "profile,caches.qpc.entries,test,size,qps,") || strings.Count(string(csv), "\n") != 9 {
		t.Errorf("CSV: %v\n%s", err, csv)
	}
	var objs []map[string]any
	if b, err := os.ReadFile(file("r.json")); err != nil || json.Unmarshal(b, &objs) != nil || len(objs) != 8 ||
		objs[3]["test"] != "read_bw" || objs[3]["metadata"] != true || objs[3]["wall_s"] == nil {
		t.Errorf("JSON: %v %v", err, objs)
	}
	if b, err := os.ReadFile(file("r.svg")); err != nil || !bytes.Contains(b, []byte("<svg")) {
		t.Errorf("plot: %v, %d bytes", err, len(b))
	}

	// Without --wall, the same flags write the same bytes.
	var first string
	for i := range 2 {
		out, _, err := runRnic(t, slices.Concat(sweep, []string{"-q", "--csv", "-"})...)
		if err != nil || !strings.HasPrefix(out, "profile,") {
			t.Fatalf("--csv -: %v\n%s", err, out)
		}
		if i == 0 {
			first = out
		} else if out != first {
			t.Errorf("two runs differ:\n%s\n%s", first, out)
		}
	}
}

// TestSimBoolSweeps: the boolean workload flags take a bare flag (true) or
// a list to sweep, and reach the runs (their columns, and the results:
// random offsets over a footprint larger than the MTT cache lose hits).
func TestSimBoolSweeps(t *testing.T) {
	out, _, err := runRnic(t, "sim", "-q", "--test", "write_bw", "--size", "64", "--qps", "4", "--iters", "300",
		"--footprint", "64M", "--random=false,true", "--mr-per-qp", "--metadata", "--csv", "-")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d CSV lines, want a header and 2 runs:\n%s", len(lines), out)
	}
	col := func(name string) []string {
		head := strings.Split(lines[0], ",")
		i := slices.Index(head, name)
		if i < 0 {
			t.Fatalf("no column %q in %s", name, lines[0])
		}
		return []string{strings.Split(lines[1], ",")[i], strings.Split(lines[2], ",")[i]}
	}
	if got := col("random"); got[0] != "false" || got[1] != "true" {
		t.Errorf("random column %v", got)
	}
	if got := col("mr_per_qp"); got[0] != "true" || got[1] != "true" {
		t.Errorf("mr_per_qp column %v", got)
	}
	hit := col("s_mtt_hit")
	inOrder, err1 := strconv.ParseFloat(hit[0], 64)
	random, err2 := strconv.ParseFloat(hit[1], 64)
	if err1 != nil || err2 != nil || inOrder <= random {
		t.Errorf("server MTT hit rate in order %s, random %s: random offsets over 64 MiB should miss more", hit[0], hit[1])
	}
}

func TestSimErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--qps", "many"}, "--qps"},
		{[]string{"--size", "1..x"}, "--size"},
		{[]string{"--test", "write_mops"}, "--test: unknown test"},
		{[]string{"--mr-churn", "often"}, "--mr-churn"},
		{[]string{"--seed", "-1"}, "--seed"},
		{[]string{"--limit", "0"}, "--limit"},
		{[]string{"-j", "0"}, "-j 0"},
		{[]string{"--set", "caches.qpc.entrys=5"}, `no parameter "entrys" in [caches.qpc]`},
		{[]string{"--set", "caches.qpc.entries"}, "want key=value"},
		{[]string{"--profile", "cx7"}, "neither built in"},
		{[]string{"--columns", "mops,speed"}, `--columns: no column "speed"`},
		{[]string{"--x", "qps"}, "need --plot"},
		{[]string{"--plot", "p.gif", "--qps", "1,2"}, "--plot p.gif: the file name must end in .png"},
		{[]string{"--plot", "p.png"}, "no numeric parameter is swept"},
		{[]string{"--plot", "p.png", "--x", "qps", "--y", "speed"}, `--y: no column "speed"`},
		{[]string{"--iters", "5", "--warmup", "5"}, "--warmup 5: want fewer than iters (5)"},
		{[]string{"--timeline-qp", "-1"}, "--timeline-qp -1"},
		{[]string{"--pairs", "2", "--timeline-qp", "2"}, "--timeline-qp 2: want one of the 2 client QPs"},
		{[]string{"--timeline-port", "leaf0"}, "--timeline-port leaf0: want NODE:PORT"},
		{[]string{"unexpected"}, "unknown command"},
	} {
		_, _, err := runRnic(t, append([]string{"sim", "-q"}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("sim %v: error %v, want %q", tc.args, err, tc.want)
		}
	}
}

// TestSimRefuses: values that are not meaningful are refused, naming the
// flag, before anything runs; they used to run as something else (--qps 0
// ran 1 QP, --random with a latency test ran in order) while the table
// and CSV reported them as asked.
func TestSimRefuses(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--qps", "0"}, "--qps 0: want at least 1"},
		{[]string{"--qps", "1,0"}, "--qps 0: want at least 1"},
		{[]string{"--qps=-1"}, `--qps: "-1" is not a non-negative number`},
		{[]string{"--size", "0"}, "--size 0: want at least 1 byte"},
		{[]string{"--pairs", "0"}, "--pairs 0"},
		{[]string{"--iters", "0"}, "--iters 0"},
		{[]string{"--tx-depth", "0"}, "--tx-depth 0"},
		{[]string{"--threads", "0"}, "--threads 0"},
		{[]string{"--cq-mod", "0"}, "--cq-mod 0"},
		{[]string{"--footprint", "0"}, "--footprint 0: want at least one message"},
		{[]string{"--footprint", "1K", "--size", "4K"}, "--footprint 1024: smaller than one message (size 4096)"},
		{[]string{"--page-size", "0"}, "--page-size 0: want a power of two"},
		{[]string{"--page-size", "3000"}, "--page-size 3000: want a power of two"},
		{[]string{"--test", "write_lat", "--random"}, `--random true: write_lat ping-pongs one buffer; random offsets apply to bandwidth tests (in run "write_lat")`},
		{[]string{"--test", "write_bw,read_lat", "--random=false,true"}, `--random true: read_lat ping-pongs one buffer`},
		{[]string{"--test", "send_lat", "--tx-depth", "16"}, "--tx-depth 16: send_lat keeps one operation outstanding"},
		{[]string{"--test", "write_lat", "--cq-mod", "8"}, "--cq-mod 8: write_lat signals every operation"},
		{[]string{"--test", "read_bw", "--inline", "64"}, "--inline 64: read_bw sends no payload"},
		{[]string{"--tx-depth", "4", "--cq-mod", "8"}, "--tx-depth 4: below the completion moderation"},
		{[]string{"--mr-churn", "-1us"}, "--mr-churn"},
		{[]string{"--csv", "-", "--json", "-"}, "only one of them can go to standard output"},
	} {
		out, errw, err := runRnic(t, append([]string{"sim"}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("sim %v: error %v, want %q", tc.args, err, tc.want)
		}
		if out != "" || strings.Contains(errw, "[1/") {
			t.Errorf("sim %v ran something: %q %q", tc.args, out, errw)
		}
	}
}

// TestSimInlineZero: --inline 0 sends nothing inline (it ran write_lat
// with the default 220), and the table says so.
func TestSimInlineZero(t *testing.T) {
	out, _, err := runRnic(t, "sim", "-q", "--test", "write_lat", "--size", "8", "--iters", "100", "--inline", "0,220", "--columns", "inline,lat_avg_ns")
	if err != nil {
		t.Fatal(err)
	}
	inl, lat := tableColumn(t, out, "inline"), tableColumn(t, out, "lat_avg_ns")
	none, err1 := strconv.ParseFloat(lat[0], 64)
	inline, err2 := strconv.ParseFloat(lat[1], 64)
	if len(inl) != 2 || inl[0] != "0" || inl[1] != "220" || err1 != nil || err2 != nil || none <= inline {
		t.Errorf("inline %v, latency %v: without inline data a WRITE should take longer\n%s", inl, lat, out)
	}
}

// TestSimScenario runs the repository's example scenario as its comment
// says to: a row per tenant per run, the sweep of a tenant's parameter
// in its column, a timeline per run; and refuses what a scenario does not
// take.
func TestSimScenario(t *testing.T) {
	dir := t.TempDir()
	file := "../../examples/scenarios/victim-bully.toml"
	out, _, err := runRnic(t, "sim", "--scenario", file, "--set", "tenant.bully.size=4K,64K", "-q",
		"--timeline", filepath.Join(dir, "tl.png"), "--csv", filepath.Join(dir, "rows.csv"))
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if got := tableColumn(t, out, "tenant"); !slices.Equal(got, []string{"victim", "bully", "victim", "bully"}) {
		t.Errorf("tenant column %q\n%s", got, out)
	}
	if got := tableColumn(t, out, "size"); !slices.Equal(got, []string{"64", "4096", "64", "65536"}) {
		t.Errorf("size column %q", got)
	}
	for _, f := range []string{"tl-0.png", "tl-1.png", "rows.csv"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	for _, args := range [][]string{
		{"--scenario", file, "--test", "read_bw"},
		{"--scenario", file, "--set", "tenant.nobody.size=64"},
		{"--scenario", "no-such-file.toml"},
		{"--set", "tenant.bully.size=64"},
		{"--scenario", file, "--timeline", "tl.txt"},
		{"--scenario", file, "--timeline-qp", "1"},
	} {
		if _, _, err := runRnic(t, append([]string{"sim", "-q"}, args...)...); err == nil {
			t.Errorf("rnic sim %q: no error", args)
		}
	}
}
