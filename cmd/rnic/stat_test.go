package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rnic/rnic"
	"github.com/rnic/rnic/internal/statsrv"
	"github.com/rnic/rnic/link/mem"
)

// TestFormatStatLine checks rdma statistic's line format.
func TestFormatStatLine(t *testing.T) {
	tests := []struct {
		dev      string
		counters []statsrv.Counter
		want     string
	}{
		{"rnic_127.0.0.1", []statsrv.Counter{{Name: "tx_packets", Value: 12}, {Name: "rx_packets", Value: 10}}, "link rnic_127.0.0.1/1 tx_packets 12 rx_packets 10"},
		{"rnic_::1", nil, "link rnic_::1/1"},
	}
	for _, tt := range tests {
		if got := formatStatLine(tt.dev, tt.counters); got != tt.want {
			t.Errorf("got %q, want %q", got, tt.want)
		}
	}
}

// TestStatTarget: the device argument as rdma takes it.
func TestStatTarget(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // device name, or "error: ..."
	}{
		{nil, ""},
		{[]string{"rnic0"}, "rnic0"},
		{[]string{"rnic0/1"}, "rnic0"},
		{[]string{"link", "rnic0/1"}, "rnic0"},
		{[]string{"link", "rnic0"}, "rnic0"},
		{[]string{"rnic0/2"}, "error: rnic0/2: rnic devices have one port, 1"},
		{[]string{"link"}, `error: "link" needs a device`},
		{[]string{"rnic0", "rnic1"}, `error: unexpected "rnic1"`},
	} {
		got, err := statTarget(tc.args)
		if err != nil {
			got = "error: " + err.Error()
		}
		if !strings.HasPrefix(got, tc.want) || (tc.want == "" && got != "") {
			t.Errorf("%q: %q, want %q", tc.args, got, tc.want)
		}
	}
}

// kvProgram is what a library program does: two devices over link/mem,
// published with Options.Publish, an RC connection between them that has
// moved n WRITEs, and a UD QP on the first.
type kvProgram struct {
	a, b       *rnic.Device
	qpa, qpb   *rnic.QP
	ud         *rnic.QP
	psnA, psnB rnic.PSN
	writes     int
}

func startKVProgram(t *testing.T) *kvProgram {
	t.Helper()
	pa, pb, err := mem.Pipe(netip.MustParseAddr("10.7.0.1"), netip.MustParseAddr("10.7.0.2"), mem.Faults{}, mem.Faults{})
	if err != nil {
		t.Fatal(err)
	}
	p := &kvProgram{psnA: 0xfffff0, psnB: 0x123456, writes: 20} // A's PSNs wrap
	open := func(name string, l *mem.Port) *rnic.Device {
		d, err := rnic.Open(rnic.Options{Link: l, Name: name, Publish: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		return d
	}
	p.a, p.b = open("kv_client", pa), open("kv_server", pb)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	qp := func(d *rnic.Device, typ rnic.QPType) (*rnic.QP, *rnic.PD, *rnic.CQ) {
		pd, err := d.AllocPD()
		must(err)
		cq, err := d.CreateCQ(64)
		must(err)
		q, err := pd.CreateQP(rnic.QPInitAttr{Type: typ, SendCQ: cq, RecvCQ: cq,
			Cap: rnic.QPCap{MaxSendWR: 32, MaxRecvWR: 32, MaxSendSGE: 1, MaxRecvSGE: 1}})
		must(err)
		return q, pd, cq
	}
	var pda *rnic.PD
	var cqa *rnic.CQ
	p.qpa, pda, cqa = qp(p.a, rnic.RC)
	var pdb *rnic.PD
	p.qpb, pdb, _ = qp(p.b, rnic.RC)
	p.ud, _, _ = qp(p.a, rnic.UD)
	access := rnic.AccessLocalWrite | rnic.AccessRemoteWrite
	ca, cb := rnic.ConnParams{PSN: p.psnA, Access: access}, rnic.ConnParams{PSN: p.psnB, Access: access}
	must(p.qpa.Connect(p.qpb.Endpoint(cb), ca))
	must(p.qpb.Connect(p.qpa.Endpoint(ca), cb))
	must(p.ud.Connect(rnic.Endpoint{}, rnic.ConnParams{}))
	src, err := pda.RegMR(make([]byte, 64), rnic.AccessLocalWrite)
	must(err)
	dst, err := pdb.RegMR(make([]byte, 64), access)
	must(err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	wcs := make([]rnic.WC, 1)
	for range p.writes {
		must(p.qpa.PostSend(rnic.SendWR{Opcode: rnic.WRRDMAWrite, Flags: rnic.SendSignaled,
			SGL: []rnic.SGE{{Addr: src.Addr(), Length: 64, LKey: src.LKey()}}, RemoteAddr: dst.Addr(), RKey: dst.RKey()}))
		if n, err := cqa.Wait(ctx, wcs); err != nil || n != 1 || wcs[0].Status != rnic.WCSuccess {
			t.Fatalf("WRITE: %d completions, %v, %+v", n, err, wcs[0])
		}
	}
	return p
}

// TestStatLibraryProgram: any program that opens its devices with
// Options.Publish is seen by "rnic stat" (before, only devices opened by
// "rnic perf" were): its counters, its QPs with their state and PSNs, in
// rdma's text and JSON forms; and its sockets go with its devices.
func TestStatLibraryProgram(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	p := startKVProgram(t)
	comm := strings.TrimSpace(readTextFile(t, "/proc/self/comm"))

	// rnic stat: one line per device, in name order, with its counters.
	out, _, err := runRnic(t, "stat")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "link kv_client/1 ") || !strings.HasPrefix(lines[1], "link kv_server/1 ") {
		t.Fatalf("rnic stat:\n%s", out)
	}
	rx, _ := p.b.Counter("rx_write_requests")
	if rx != uint64(p.writes) || !strings.Contains(lines[1], fmt.Sprintf(" rx_write_requests %d ", rx)) {
		t.Errorf("rx_write_requests %d on the device; rnic stat says:\n%s", rx, lines[1])
	}

	// rnic stat -j: [{"ifname": ..., "port": 1, counter: value, ...}].
	out, _, err = runRnic(t, "stat", "-j", "kv_server")
	if err != nil {
		t.Fatal(err)
	}
	objs := jsonObjects(t, out)
	if len(objs) != 1 {
		t.Fatalf("rnic stat -j kv_server: %d objects:\n%s", len(objs), out)
	}
	keys, vals := objs[0].keys, objs[0].vals
	want := []string{"ifname", "port"}
	for _, c := range p.b.Counters() {
		want = append(want, c.Name)
	}
	if !reflect.DeepEqual(keys, want) {
		t.Errorf("keys %q,\nwant %q", keys, want)
	}
	if vals["ifname"] != "kv_server" || vals["port"] != json.Number("1") || vals["rx_write_requests"] != json.Number(fmt.Sprint(p.writes)) {
		t.Errorf("values %v", vals)
	}

	// rnic stat qp: rdma resource show qp's lines.
	out, _, err = runRnic(t, "stat", "qp")
	if err != nil {
		t.Fatal(err)
	}
	wantLines := []string{
		fmt.Sprintf("link kv_client/1 lqpn %d rqpn %d type RC state RTS rq-psn %d sq-psn %d path-mig-state MIGRATED pdn 1 pid %d comm %s",
			p.qpa.QPN(), p.qpb.QPN(), p.psnB, (p.psnA+rnic.PSN(p.writes))&0xffffff, os.Getpid(), comm),
		fmt.Sprintf("link kv_client/1 lqpn %d type UD state RTS sq-psn 0 pdn 2 pid %d comm %s", p.ud.QPN(), os.Getpid(), comm),
		fmt.Sprintf("link kv_server/1 lqpn %d rqpn %d type RC state RTS rq-psn %d sq-psn %d path-mig-state MIGRATED pdn 1 pid %d comm %s",
			p.qpb.QPN(), p.qpa.QPN(), (p.psnA+rnic.PSN(p.writes))&0xffffff, p.psnB, os.Getpid(), comm),
	}
	if got := strings.Split(strings.TrimSpace(out), "\n"); !reflect.DeepEqual(got, wantLines) {
		t.Errorf("rnic stat qp:\n%s\nwant:\n%s", out, strings.Join(wantLines, "\n"))
	}

	// rnic stat qp -j link kv_client/1: the same as JSON, rdma's keys.
	out, _, err = runRnic(t, "stat", "qp", "-j", "link", "kv_client/1")
	if err != nil {
		t.Fatal(err)
	}
	objs = jsonObjects(t, out)
	rcKeys := []string{"ifindex", "ifname", "port", "lqpn", "rqpn", "type", "state", "rq-psn", "sq-psn", "path-mig-state", "pdn", "pid", "comm"}
	udKeys := []string{"ifindex", "ifname", "port", "lqpn", "type", "state", "sq-psn", "pdn", "pid", "comm"}
	if len(objs) != 2 || !reflect.DeepEqual(objs[0].keys, rcKeys) || !reflect.DeepEqual(objs[1].keys, udKeys) {
		t.Fatalf("rnic stat qp -j:\n%s\nwant keys %q and %q", out, rcKeys, udKeys)
	}
	rc := objs[0].vals
	if rc["ifindex"] != json.Number("0") || rc["lqpn"] != json.Number(fmt.Sprint(p.qpa.QPN())) || rc["rqpn"] != json.Number(fmt.Sprint(p.qpb.QPN())) ||
		rc["type"] != "RC" || rc["state"] != "RTS" || rc["comm"] != comm || rc["pid"] != json.Number(fmt.Sprint(os.Getpid())) {
		t.Errorf("RC QP: %v", rc)
	}

	// A QP's state follows the QP: moved to ERR, it says so.
	if err := p.qpa.Modify(&rnic.QPAttr{State: rnic.QPSErr}, rnic.QPAttrState); err != nil {
		t.Fatal(err)
	}
	out, _, _ = runRnic(t, "stat", "qp", "kv_client")
	if !strings.Contains(out, fmt.Sprintf("lqpn %d rqpn %d type RC state ERR ", p.qpa.QPN(), p.qpb.QPN())) {
		t.Errorf("after Modify to ERR:\n%s", out)
	}

	// The sockets go with the devices.
	for _, d := range []*rnic.Device{p.a, p.b} {
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(controlDir(), d.Name())); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: socket still there after Close: %v", d.Name(), err)
		}
	}
	if _, _, err := runRnic(t, "stat", "kv_client"); err == nil || !strings.Contains(err.Error(), `no running device "kv_client"`) {
		t.Errorf("stat of a closed device: %v", err)
	}
	out, errw, err := runRnic(t, "stat", "qp", "-j")
	if err != nil || out != "[]\n" || !strings.Contains(errw, "no running rnic devices") {
		t.Errorf("stat qp -j with no devices: %v %q %q", err, out, errw)
	}
}

// TestStatSkipsStale: a socket left by a process that died is skipped by
// the listing and replaced by the next device of that name.
func TestStatSkipsStale(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	dir := controlDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(dir, "rnic_dup")
	if err := os.WriteFile(stale, nil, 0o600); err != nil { // not even a socket
		t.Fatal(err)
	}
	out, _, err := runRnic(t, "stat")
	if err != nil || out != "" {
		t.Errorf("stat with only a stale file: %v %q", err, out)
	}
	os.Remove(stale)
	port, err := mem.NewSwitch().Port(netip.MustParseAddr("10.1.1.1"), mem.Faults{})
	if err != nil {
		t.Fatal(err)
	}
	dev, err := rnic.Open(rnic.Options{Link: port, Name: "rnic_dup", Publish: true})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	out, _, err = runRnic(t, "stat")
	if err != nil || !strings.HasPrefix(out, "link rnic_dup/1 ") {
		t.Errorf("stat: %v %q", err, out)
	}
}

// orderedObject is one object of a JSON array, with its keys in order.
type orderedObject struct {
	keys []string
	vals map[string]any
}

// jsonObjects parses a one-line JSON array of flat objects, as rdma -j
// prints, keeping each object's key order.
func jsonObjects(t *testing.T, s string) []orderedObject {
	t.Helper()
	if strings.Count(s, "\n") != 1 || !strings.HasSuffix(s, "\n") {
		t.Errorf("not one line: %q", s)
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.UseNumber()
	tok := func() json.Token {
		t.Helper()
		tk, err := dec.Token()
		if err != nil {
			t.Fatalf("%v in %s", err, s)
		}
		return tk
	}
	if tok() != json.Delim('[') {
		t.Fatalf("not an array: %s", s)
	}
	var out []orderedObject
	for dec.More() {
		if tok() != json.Delim('{') {
			t.Fatalf("not an object: %s", s)
		}
		o := orderedObject{vals: map[string]any{}}
		for dec.More() {
			k := tok().(string)
			var v any
			if err := dec.Decode(&v); err != nil {
				t.Fatal(err)
			}
			o.keys = append(o.keys, k)
			o.vals[k] = v
		}
		tok() // }
		out = append(out, o)
	}
	return out
}

func readTextFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
