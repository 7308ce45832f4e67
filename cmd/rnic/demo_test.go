package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rnic/rnic/wire"
	"github.com/rnic/rnic/wire/pcap"
)

// TestDemo runs the demo in-process, quietly, and checks that every step
// ran and every check passed.
func TestDemo(t *testing.T) {
	var out bytes.Buffer
	cfg := defaultDemoConfig()
	cfg.quiet = true
	if err := runDemo(context.Background(), &out, cfg); err != nil {
		t.Fatalf("demo failed: %v\n%s", err, out.String())
	}
	s := out.String()
	for _, want := range []string{
		"1. RDMA WRITE", "2. RDMA WRITE WITH IMMEDIATE", "3. RDMA READ", "4. SEND / RECV",
		"5. SEND WITH IMMEDIATE", "6. ATOMIC FETCH_AND_ADD", "7. ATOMIC COMPARE_AND_SWAP", "8. Losing packets",
		"rnic1's memory: all 64 KiB match", "imm=0x1234abcd", "rnic0 got back 100, rnic1's counter is now 105",
		"(not equal: left alone)", "rnic1's memory: all 1 MiB match", "roce_retrans_packets", "All checks passed",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if strings.Contains(s, "✗") || strings.Contains(s, "10.0.0.1 → 10.0.0.2") {
		t.Errorf("quiet output shows packets or failures:\n%s", s)
	}
}

// TestDemoCommand runs "rnic demo" through cobra with flags, showing
// packets, at a small MTU and size.
func TestDemoCommand(t *testing.T) {
	var out bytes.Buffer
	root := newRootCmd()
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs([]string{"demo", "--size", "5000", "--mtu", "1024", "--loss", "0.02"})
	if err := root.Execute(); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	s := out.String()
	for _, want := range []string{
		"path MTU 1024", "rnic0 writes 5000 bytes", "all 5000 bytes match",
		"RC_RDMA_WRITE_FIRST qp=", "len=1024 RETH", "RC_RDMA_READ_RESP_LAST", "AETH ACK msn=",
		"drops 2 % of frames", "All checks passed",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

// TestDemoFlags checks that out-of-range flags are refused before any
// NIC is opened.
func TestDemoFlags(t *testing.T) {
	for _, args := range [][]string{
		{"demo", "--mtu", "1500"}, {"demo", "--size", "0"}, {"demo", "--size", "100000000"},
		{"demo", "--loss", "1"}, {"demo", "--loss", "-0.1"}, {"demo", "extra"},
	} {
		root := newRootCmd()
		root.SetOut(io.Discard)
		root.SetErr(io.Discard)
		root.SetArgs(args)
		if err := root.Execute(); err == nil {
			t.Errorf("rnic %s: no error", strings.Join(args, " "))
		}
	}
}

// TestDemoPcap writes the capture and reads it back: every record must be
// a RoCEv2 frame that parses and whose ICRC verifies, and both directions
// and every operation of the demo must be there.
func TestDemoPcap(t *testing.T) {
	path := filepath.Join(t.TempDir(), "demo.pcap")
	cfg := defaultDemoConfig()
	cfg.quiet, cfg.pcap = true, path
	var out bytes.Buffer
	if err := runDemo(context.Background(), &out, cfg); err != nil {
		t.Fatalf("demo failed: %v\n%s", err, out.String())
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcap.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	ops := map[wire.Opcode]int{}
	srcs := map[string]int{}
	n := 0
	for {
		data, _, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		n++
		ip, ok := pcap.IPPacket(r.LinkType(), data)
		if !ok {
			t.Fatalf("record %d is not IP", n)
		}
		var p wire.Packet
		if err := p.Parse(ip); err != nil {
			t.Fatalf("record %d: %v", n, err)
		}
		if err := wire.CheckICRC(ip); err != nil {
			t.Fatalf("record %d: %v", n, err)
		}
		ops[p.Op]++
		srcs[p.Src.Addr().String()]++
	}
	for _, op := range []wire.Opcode{
		wire.OpRCWriteFirst, wire.OpRCWriteMiddle, wire.OpRCWriteLast, wire.OpRCWriteLastImm,
		wire.OpRCReadRequest, wire.OpRCReadRespFirst, wire.OpRCReadRespLast, wire.OpRCSendOnly,
		wire.OpRCSendOnlyImm, wire.OpRCFetchAdd, wire.OpRCCompareSwap, wire.OpRCAtomicAck, wire.OpRCAck,
	} {
		if ops[op] == 0 {
			t.Errorf("no %v in the capture (%v)", op, ops)
		}
	}
	if srcs["10.0.0.1"] == 0 || srcs["10.0.0.2"] == 0 {
		t.Errorf("capture lacks a direction: %v", srcs)
	}
	if n < 300 {
		t.Errorf("only %d records", n)
	}
}

// TestChecks checks the demo's own comparisons, so that a demo whose
// checks could not fail does not pass for a working one.
func TestChecks(t *testing.T) {
	a := []byte("abcdef")
	if _, err := checkBytes(a, []byte("abcdef"), "x"); err != nil {
		t.Error(err)
	}
	if _, err := checkBytes(a, []byte("abXdef"), "x"); err == nil || !strings.Contains(err.Error(), "byte 2") {
		t.Errorf("mismatch at 2: %v", err)
	}
	if _, err := checkBytes(a[:5], a, "x"); err == nil {
		t.Error("short buffer accepted")
	}
}
