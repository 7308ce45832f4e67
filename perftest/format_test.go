package perftest

import (
	"fmt"
	"net/netip"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/rnic/rnic"
)

// perftestLogs are real perftest 4.5 runs between two rxe devices
// (testdata/*.log, from shared/testdata/roce/logs).
var perftestLogs = []string{
	"rc_write_bw", "rc_read_bw", "rc_send_bw", "rc_atomic_fadd", "rc_atomic_cas",
	"rc_write_lat", "rc_read_lat", "rc_send_lat", "uc_write_bw", "ud_send_bw",
}

// logSide is one program's output in a log, with its command line.
type logSide struct {
	client bool
	cmd    []string
	out    string
}

// inlineWarning is what perftest prints about rxe, which it does not
// know; rnic is a device it treats as known, so the line is not ours.
const inlineWarning = resultLine + "Device not recognized to implement inline feature. Disabling it\n"

// readLog splits a log into the client's and the server's output.
func readLog(t *testing.T, name string) [2]logSide {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name + ".log")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	cmd := func(who string) []string {
		m := regexp.MustCompile(`(?m)^=== ` + who + ` \([^)]*\): (.*)$`).FindStringSubmatch(s)
		if m == nil {
			t.Fatalf("%s: no %s command", name, who)
		}
		return strings.Fields(m[1])
	}
	between := func(from, to string) string {
		i := strings.Index(s, from)
		j := strings.Index(s, to)
		if i < 0 || j < i {
			t.Fatalf("%s: no section %q…%q", name, from, to)
		}
		i += len(from)
		i += strings.Index(s[i:], "\n") + 1
		return strings.Replace(s[i:j], inlineWarning, "", 1)
	}
	return [2]logSide{
		{true, cmd("client"), between("=== client (", "=== client exit status")},
		{false, cmd("server"), between("=== server output:", "=== server exit status")},
	}
}

// configFromArgs parses the perftest command lines of the logs.
func configFromArgs(t *testing.T, args []string) Config {
	t.Helper()
	test, err := ParseTest(args[0])
	if err != nil {
		t.Fatal(err)
	}
	c := NewConfig(test)
	for i := 1; i < len(args); i++ {
		a := args[i]
		next := func() string { i++; return args[i] }
		switch a {
		case "-F":
		case "-d", "-x":
			next()
		case "-s":
			if c.Size, err = ParseSize(next()); err != nil {
				t.Fatal(err)
			}
		case "-n":
			c.Iters, _ = strconv.Atoi(next())
		case "-c":
			if c.Conn, err = ParseConn(next()); err != nil {
				t.Fatal(err)
			}
		case "-A":
			if c.Atomic, err = ParseAtomicType(next()); err != nil {
				t.Fatal(err)
			}
		default:
			c.Peer = a
		}
	}
	c.Open = func(netip.Addr) (*rnic.Device, error) { return nil, nil }
	return c
}

// logParams are the parameters perftest ran with on rxe: what resolve
// derives from the command line, plus what the devices and the exchange
// settled (IB MTU 1024, GID index 1, 128 outstanding reads, and no
// inline data: perftest does not know rxe, and disables inline for
// devices it does not know).
func logParams(t *testing.T, sd logSide) *params {
	t.Helper()
	p, err := configFromArgs(t, sd.cmd).resolve()
	if err != nil {
		t.Fatal(err)
	}
	if p.client != sd.client {
		t.Fatalf("command %q: client=%v", sd.cmd, p.client)
	}
	p.mtu, p.gidIndex, p.outReads, p.inline = rnic.MTU1024, 1, 128, 0
	return p
}

// TestTestInfoGolden checks the header block of every log's client and
// server, from the same command line.
func TestTestInfoGolden(t *testing.T) {
	for _, name := range perftestLogs {
		for _, sd := range readLog(t, name) {
			p := logParams(t, sd)
			var b strings.Builder
			printTestInfo(&b, p, "rxe0")
			if !strings.Contains(sd.out, b.String()) {
				t.Errorf("%s %v: header differs; ours:\n%s\nperftest's:\n%s", name, sd.cmd, b.String(), sd.out)
			}
		}
	}
}

var (
	addrRe = regexp.MustCompile(`(?m)^ (local|remote) address: LID (\S+) QPN (\S+) PSN (\S+)(?: OUT (\S+))?(?: RKey (\S+) VAddr (\S+))?\n GID: (\S+)\n`)
	rowRe  = regexp.MustCompile(`(?m)^ [0-9].*\n`)
)

// TestDestLinesGolden parses every address line of the logs and prints
// it again: the same bytes.
func TestDestLinesGolden(t *testing.T) {
	n := 0
	for _, name := range perftestLogs {
		for _, sd := range readLog(t, name) {
			verb := configFromArgs(t, sd.cmd).Test.Verb()
			for _, m := range addrRe.FindAllStringSubmatch(sd.out, -1) {
				var d Dest
				d.LID = uint16(num(t, m[2]))
				d.QPN, d.PSN = uint32(num(t, m[3])), uint32(num(t, m[4]))
				if m[5] != "" {
					d.OutReads = uint16(num(t, m[5]))
				}
				if m[6] != "" {
					d.RKey, d.VAddr = uint32(num(t, m[6])), num(t, m[7])
				}
				for i, g := range strings.Split(m[8], ":") {
					v, err := strconv.Atoi(g)
					if err != nil {
						t.Fatal(err)
					}
					d.GID[i] = byte(v)
				}
				var b strings.Builder
				printDest(&b, verb, m[1], d)
				if b.String() != m[0] {
					t.Errorf("%s:\n got %q\nwant %q", name, b.String(), m[0])
				}
				n++
			}
		}
	}
	if n != 4*len(perftestLogs) {
		t.Errorf("checked %d address lines, want %d", n, 4*len(perftestLogs))
	}
}

// num parses a number as perftest prints it: 0x hex, or "0000".
func num(t *testing.T, s string) uint64 {
	t.Helper()
	v, err := strconv.ParseUint(s, 0, 64)
	if err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return v
}

// TestResultRowsGolden parses every result row of the logs and formats
// it again: the same bytes, tabs included.
func TestResultRowsGolden(t *testing.T) {
	n := 0
	for _, name := range perftestLogs {
		for _, sd := range readLog(t, name) {
			lat := strings.Contains(sd.out, resultFmtLat)
			if !lat && !strings.Contains(sd.out, resultFmt) && name != "rc_read_lat" {
				t.Errorf("%s: no table header", name)
			}
			for _, row := range rowRe.FindAllString(sd.out, -1) {
				f := strings.Fields(row)
				v := make([]float64, len(f))
				for i, s := range f {
					var err error
					if v[i], err = strconv.ParseFloat(s, 64); err != nil {
						t.Fatalf("%s: row %q: %v", name, row, err)
					}
				}
				var got string
				if lat {
					got = formatLat(LatReport{Size: int(v[0]), Iters: uint64(v[1]), Min: v[2], Max: v[3], Typical: v[4], Avg: v[5], Stdev: v[6], P99: v[7], P999: v[8]})
				} else {
					got = formatBW(BWReport{Size: uint64(v[0]), Iters: uint64(v[1]), BWPeak: v[2], BWAvg: v[3], MsgRate: v[4]}, false)
				}
				if got != row {
					t.Errorf("%s:\n got %q\nwant %q", name, got, row)
				}
				n++
			}
		}
	}
	if n != 2*len(perftestLogs)-1 { // read_lat's server prints no row
		t.Errorf("checked %d rows, want %d", n, 2*len(perftestLogs)-1)
	}
}

// TestFormatGbits checks the Gb/s table: its header, and six decimals
// below 0.1 Gb/s (REPORT_FMT_EXT).
func TestFormatGbits(t *testing.T) {
	tests := []struct {
		r    BWReport
		want string
	}{
		{BWReport{65536, 5000, 97.53, 97.51, 0.186}, " 65536      5000             97.53              97.51  \t\t   0.186000\n"},
		{BWReport{2, 1000, 0.012345, 0.0123456, 0.77}, " 2          1000           0.012345            0.012346            0.770000\n"},
	}
	for _, tt := range tests {
		if got := formatBW(tt.r, true); got != tt.want {
			t.Errorf("formatBW(%+v):\n got %q\nwant %q", tt.r, got, tt.want)
		}
	}
	if bwTableHeader(true) != " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n" {
		t.Error("Gb/s header")
	}
}

// TestFormatLatDuration checks the -D latency table (REPORT_FMT_LAT_DUR).
func TestFormatLatDuration(t *testing.T) {
	got := latTableHeader(true) + formatLat(LatReport{Size: 2, Iters: 123456, Avg: 3.25, TPS: 153846.15, Duration: true})
	want := " #bytes        #iterations       t_avg[usec]    tps average\n 2             123456            3.25           153846.15\n"
	if got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
}

// TestCHex checks C's "%#0Nx", which prints 0 without "0x".
func TestCHex(t *testing.T) {
	tests := []struct {
		v     uint64
		width int
		want  string
	}{
		{0, 4, "0000"}, {0x11, 6, "0x0011"}, {0x349ca, 6, "0x349ca"}, {0x2dd, 8, "0x0002dd"},
		{0, 8, "00000000"}, {0x563ada716000, 16, "0x00563ada716000"}, {0, 16, "0000000000000000"}, {0x80, 4, "0x80"},
	}
	for _, tt := range tests {
		if got := cHex(tt.v, tt.width); got != tt.want {
			t.Errorf("cHex(%#x, %d) = %q, want %q", tt.v, tt.width, got, tt.want)
		}
	}
}

// TestShapeOfOutput compares the order and layout of the lines of a run
// over link/mem with the real logs: every line, with numbers and the
// device name blanked, must match.
func TestShapeOfOutput(t *testing.T) {
	for _, name := range perftestLogs {
		t.Run(name, func(t *testing.T) {
			log := readLog(t, name)
			cfg := configFromArgs(t, log[0].cmd)
			cfg.Peer, cfg.MTU = "", 1024
			srv, cli := runPair(t, cfg, memOpener(t), memSrv, memCli)
			for i, got := range []string{cli.out.String(), srv.out.String()} {
				if g, w := shape(got), shape(log[i].out); g != w {
					t.Errorf("%s side: shape differs\n got:\n%s\nwant:\n%s", [2]string{"client", "server"}[i], g, w)
				}
			}
		})
	}
}

var (
	hexRe  = regexp.MustCompile(`0x[0-9a-f]+`)
	numRe2 = regexp.MustCompile(`[0-9]+(\.[0-9]+)?`)
	devRe  = regexp.MustCompile(`Device         : \S+`)
)

// shape blanks what differs between runs: numbers and the device name;
// a result row becomes its number of columns, as the padding varies with
// the numbers' widths.
func shape(s string) string {
	s = devRe.ReplaceAllString(s, "Device         : DEV")
	s = hexRe.ReplaceAllString(s, "0x#")
	s = numRe2.ReplaceAllString(s, "#")
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if l != "" && strings.Trim(l, "# \t") == "" {
			lines[i] = fmt.Sprintf("<row of %d numbers>", strings.Count(l, "#"))
		}
	}
	return strings.Join(lines, "\n")
}
