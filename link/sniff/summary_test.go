package sniff_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/rnic/rnic/link/sniff"
	"github.com/rnic/rnic/wire"
	"github.com/rnic/rnic/wire/pcap"
)

const captures = "../../testdata/roce"

// readCapture returns the records of a capture in testdata/roce, each the
// IP packet it carries (nil for a record that is not IP, such as ARP),
// indexed from 1 as tshark numbers them.
func readCapture(t *testing.T, name string) [][]byte {
	t.Helper()
	f, err := os.Open(filepath.Join(captures, name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcap.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	recs := [][]byte{nil}
	for {
		data, _, err := r.Next()
		if err == io.EOF {
			return recs
		}
		if err != nil {
			t.Fatal(err)
		}
		ip, _ := pcap.IPPacket(r.LinkType(), data)
		recs = append(recs, bytes.Clone(ip))
	}
}

// oracleLine matches a packet line of icrc-check.txt, the decode of the
// captures by an independent script (shared/tools/rxe-peer).
var oracleLine = regexp.MustCompile(`^(\S+\.pcap) #(\d+)\s+(\S+)\s+dqp=0x([0-9a-f]+) psn=(\d+)\s+A=(\d) pad=\d pkey=0x[0-9a-f]+ sport=\d+ payload=(\d+)\s+icrc=[0-9a-f]+ OK ?(.*)$`)

// oracleCount matches a file's total line of icrc-check.txt.
var oracleCount = regexp.MustCompile(`^(\S+\.pcap): (\d+) RoCEv2 packets`)

// TestSummaryCaptures checks Summary on every packet of the Linux rxe
// captures that icrc-check.txt decodes, against the fields that decode
// reports, and checks that exactly the RoCEv2 packets of each capture
// parse (the others, TCP and ARP, are described as malformed).
func TestSummaryCaptures(t *testing.T) {
	f, err := os.Open(filepath.Join(captures, "icrc-check.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	files := map[string][][]byte{}
	checked := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if m := oracleCount.FindStringSubmatch(line); m != nil {
			want, _ := strconv.Atoi(m[2])
			if got := countRoCE(t, m[1]); got != want {
				t.Errorf("%s: %d records summarized as RoCEv2, want %d", m[1], got, want)
			}
			continue
		}
		m := oracleLine.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("unrecognized line in icrc-check.txt: %q", line)
		}
		recs, ok := files[m[1]]
		if !ok {
			recs = readCapture(t, m[1])
			files[m[1]] = recs
		}
		n, _ := strconv.Atoi(m[2])
		if n >= len(recs) || recs[n] == nil {
			t.Fatalf("%s #%d: no such IP record", m[1], n)
		}
		want := expectedSummary(t, recs[n], m)
		if got := sniff.Summary(recs[n]); got != want {
			t.Errorf("%s #%d:\n got  %s\n want %s", m[1], n, got, want)
		}
		checked++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if checked < 500 {
		t.Fatalf("only %d packets checked", checked)
	}
}

// countRoCE returns how many records of a capture Summary describes as
// RoCEv2 packets rather than as malformed.
func countRoCE(t *testing.T, name string) int {
	n := 0
	for _, ip := range readCapture(t, name) {
		if ip != nil && !strings.Contains(sniff.Summary(ip), "malformed") {
			n++
		}
	}
	return n
}

// expectedSummary builds the line Summary should print from the oracle's
// decode m, translating its notation into Summary's: opcode names as the
// IBTA spells them, header fields as Summary names them.
func expectedSummary(t *testing.T, ip []byte, m []string) string {
	t.Helper()
	op := m[3]
	op = strings.Replace(op, "_WRITE_", "_RDMA_WRITE_", 1)
	op = strings.Replace(op, "_READ_", "_RDMA_READ_", 1)
	qpn, _ := strconv.ParseUint(m[4], 16, 32)
	src, dst := netip.AddrFrom4([4]byte(ip[12:16])), netip.AddrFrom4([4]byte(ip[16:20]))
	s := fmt.Sprintf("%v → %v %s qp=0x%06x psn=%s ack=%s len=%s", src, dst, op, qpn, m[5], m[6], m[7])

	fields := strings.Fields(m[8])
	val := func(kv string) string { return kv[strings.IndexByte(kv, '=')+1:] }
	dec := func(kv string) uint64 {
		v, err := strconv.ParseUint(val(kv), 0, 64)
		if err != nil {
			t.Fatalf("field %q: %v", kv, err)
		}
		return v
	}
	for i := 0; i < len(fields); {
		switch h := fields[i]; h {
		case "RETH": // va= rkey= len=
			s += fmt.Sprintf(" RETH va=%s rkey=%s dlen=%s", val(fields[i+1]), val(fields[i+2]), val(fields[i+3]))
			i += 4
		case "AETH": // ACK credits= syndrome= MSN=  |  NAK_<code> syndrome= MSN=
			if fields[i+1] == "ACK" {
				s += fmt.Sprintf(" AETH ACK msn=%s", val(fields[i+4]))
				i += 5
			} else {
				s += fmt.Sprintf(" AETH %s msn=%s", strings.Replace(fields[i+1], "_", " ", 1), val(fields[i+3]))
				i += 4
			}
		case "AtomicAckETH": // orig=
			s += fmt.Sprintf(" AtomicAckETH orig=%d", dec(fields[i+1]))
			i += 2
		case "AtomicETH": // va= rkey= swap/add= cmp=
			s += fmt.Sprintf(" AtomicETH va=%s rkey=%s", val(fields[i+1]), val(fields[i+2]))
			if op == "RC_FETCH_ADD" {
				s += fmt.Sprintf(" add=%d", dec(fields[i+3]))
			} else {
				s += fmt.Sprintf(" cmp=%d swap=%d", dec(fields[i+4]), dec(fields[i+3]))
			}
			i += 5
		case "DETH": // qkey= srcqp=
			s += fmt.Sprintf(" DETH qkey=%s srcqp=0x%06x", val(fields[i+1]), dec(fields[i+2]))
			i += 3
		default:
			t.Fatalf("oracle header %q not understood", h)
		}
	}
	return s
}

// TestSummary checks Summary on hand-built frames covering every header,
// the ACK, NAK and RNR NAK syndromes, flags, IPv6 and malformed frames.
func TestSummary(t *testing.T) {
	v6a, v6b := netip.MustParseAddr("fd00::1"), netip.MustParseAddr("fd00::2")
	const va, rkey = 0x7f3a00001000, 0x1234
	reth := func(n uint32) func(*wire.Packet) { return func(p *wire.Packet) { p.RETH.Encode(va, rkey, n) } }
	aeth := func(s wire.Syndrome, msn uint32) func(*wire.Packet) {
		return func(p *wire.Packet) { p.AETH.Encode(s, msn) }
	}
	badOpcode := sendFrame(addrA, addrB, 1)
	badOpcode[28] = 0x15 // RESYNC, RD only
	tests := []struct {
		name  string
		frame []byte
		want  string
	}{
		{"write first", buildFrame(addrA, addrB, wire.OpRCWriteFirst, 0x12, 1193046, 4096, hdrs{fill: reth(1 << 20)}),
			"10.0.0.1 → 10.0.0.2 RC_RDMA_WRITE_FIRST qp=0x000012 psn=1193046 ack=0 len=4096 RETH va=0x7f3a00001000 rkey=0x1234 dlen=1048576"},
		{"write last", buildFrame(addrA, addrB, wire.OpRCWriteLast, 0x12, 1193301, 5, hdrs{ackReq: true}),
			"10.0.0.1 → 10.0.0.2 RC_RDMA_WRITE_LAST qp=0x000012 psn=1193301 ack=1 len=5"},
		{"ack", buildFrame(addrB, addrA, wire.OpRCAck, 0x11, 1193301, 0, hdrs{fill: aeth(wire.SyndromeACK(wire.CreditsInvalid), 3)}),
			"10.0.0.2 → 10.0.0.1 RC_ACK qp=0x000011 psn=1193301 ack=0 len=0 AETH ACK msn=3"},
		{"ack with credits", buildFrame(addrB, addrA, wire.OpRCAck, 0x11, 7, 0, hdrs{fill: aeth(wire.SyndromeACK(5), 4)}),
			"10.0.0.2 → 10.0.0.1 RC_ACK qp=0x000011 psn=7 ack=0 len=0 AETH ACK credits=5 msn=4"},
		{"nak", buildFrame(addrB, addrA, wire.OpRCAck, 0x11, 9, 0, hdrs{fill: aeth(wire.SyndromeNAK(wire.NAKPSNSeqErr), 2)}),
			"10.0.0.2 → 10.0.0.1 RC_ACK qp=0x000011 psn=9 ack=0 len=0 AETH NAK PSN_SEQ_ERR msn=2"},
		{"remote access nak", buildFrame(addrB, addrA, wire.OpRCAck, 0x11, 9, 0, hdrs{fill: aeth(wire.SyndromeNAK(wire.NAKRemoteAccessErr), 2)}),
			"10.0.0.2 → 10.0.0.1 RC_ACK qp=0x000011 psn=9 ack=0 len=0 AETH NAK REMOTE_ACCESS_ERR msn=2"},
		{"rnr nak", buildFrame(addrB, addrA, wire.OpRCAck, 0x11, 9, 0, hdrs{fill: aeth(wire.SyndromeRNR(14), 2)}),
			"10.0.0.2 → 10.0.0.1 RC_ACK qp=0x000011 psn=9 ack=0 len=0 AETH RNR_NAK timer=14 msn=2"},
		{"read response first", buildFrame(addrB, addrA, wire.OpRCReadRespFirst, 0x11, 20, 1024, hdrs{fill: aeth(wire.SyndromeACK(wire.CreditsInvalid), 6)}),
			"10.0.0.2 → 10.0.0.1 RC_RDMA_READ_RESP_FIRST qp=0x000011 psn=20 ack=0 len=1024 AETH ACK msn=6"},
		{"fetch add", buildFrame(addrA, addrB, wire.OpRCFetchAdd, 0x12, 30, 0, hdrs{ackReq: true, fill: func(p *wire.Packet) { p.AtomicETH.Encode(va, rkey, 5, 0) }}),
			"10.0.0.1 → 10.0.0.2 RC_FETCH_ADD qp=0x000012 psn=30 ack=1 len=0 AtomicETH va=0x7f3a00001000 rkey=0x1234 add=5"},
		{"compare swap", buildFrame(addrA, addrB, wire.OpRCCompareSwap, 0x12, 31, 0, hdrs{ackReq: true, fill: func(p *wire.Packet) { p.AtomicETH.Encode(va, rkey, 7, 105) }}),
			"10.0.0.1 → 10.0.0.2 RC_CMP_SWAP qp=0x000012 psn=31 ack=1 len=0 AtomicETH va=0x7f3a00001000 rkey=0x1234 cmp=105 swap=7"},
		{"atomic ack", buildFrame(addrB, addrA, wire.OpRCAtomicAck, 0x11, 31, 0, hdrs{fill: func(p *wire.Packet) {
			p.AETH.Encode(wire.SyndromeACK(wire.CreditsInvalid), 9)
			p.AtomicAckETH.SetOrigData(105)
		}}), "10.0.0.2 → 10.0.0.1 RC_ATOMIC_ACK qp=0x000011 psn=31 ack=0 len=0 AETH ACK msn=9 AtomicAckETH orig=105"},
		{"write only imm", buildFrame(addrA, addrB, wire.OpRCWriteOnlyImm, 0x12, 40, 8, hdrs{ackReq: true, fill: func(p *wire.Packet) {
			p.RETH.Encode(va, rkey, 8)
			p.ImmDt.SetImm(0x1234abcd)
		}}), "10.0.0.1 → 10.0.0.2 RC_RDMA_WRITE_ONLY_IMM qp=0x000012 psn=40 ack=1 len=8 RETH va=0x7f3a00001000 rkey=0x1234 dlen=8 imm=0x1234abcd"},
		{"send with invalidate, solicited", buildFrame(addrA, addrB, wire.OpRCSendOnlyInv, 0x12, 41, 3, hdrs{se: true, fill: func(p *wire.Packet) { p.IETH.SetRKey(0xab01) }}),
			"10.0.0.1 → 10.0.0.2 RC_SEND_ONLY_INV qp=0x000012 psn=41 ack=0 len=3 IETH rkey=0xab01 se"},
		{"ud send", buildFrame(addrA, addrB, wire.OpUDSendOnly, 0x1, 0, 256, hdrs{fill: func(p *wire.Packet) { p.DETH.Encode(0x11111111, 0x42) }}),
			"10.0.0.1 → 10.0.0.2 UD_SEND_ONLY qp=0x000001 psn=0 ack=0 len=256 DETH qkey=0x11111111 srcqp=0x000042"},
		{"ecn", buildFrame(addrA, addrB, wire.OpRCSendOnly, 0x12, 2, 0, hdrs{tos: 3, fecn: true, becn: true}),
			"10.0.0.1 → 10.0.0.2 RC_SEND_ONLY qp=0x000012 psn=2 ack=0 len=0 fecn becn ce"},
		{"cnp", buildFrame(addrB, addrA, wire.OpCNP, 0x11, 0, 0, hdrs{becn: true}),
			"10.0.0.2 → 10.0.0.1 CNP qp=0x000011 psn=0 ack=0 len=0 becn"},
		{"ipv6", buildFrame(v6a, v6b, wire.OpRCSendOnly, 0xabcdef, 0xffffff, 1, hdrs{}),
			"fd00::1 → fd00::2 RC_SEND_ONLY qp=0xabcdef psn=16777215 ack=0 len=1"},
		{"bad opcode", badOpcode, "10.0.0.1 → 10.0.0.2 malformed (wire: invalid opcode), 112 bytes"},
		{"truncated", badOpcode[:30], "10.0.0.1 → 10.0.0.2 malformed (wire: IP length does not match frame), 30 bytes"},
		{"runt", []byte{0x45, 0}, "malformed (wire: truncated frame), 2 bytes"},
		{"empty", nil, "malformed (wire: truncated frame), 0 bytes"},
	}
	for _, tt := range tests {
		if got := sniff.Summary(tt.frame); got != tt.want {
			t.Errorf("%s:\n got  %s\n want %s", tt.name, got, tt.want)
		}
	}
}

func BenchmarkSummary(b *testing.B) {
	f := buildFrame(addrA, addrB, wire.OpRCWriteFirst, 0x12, 1193046, 4096, hdrs{fill: func(p *wire.Packet) { p.RETH.Encode(1, 2, 3) }})
	b.ReportAllocs()
	for b.Loop() {
		sniff.Summary(f)
	}
}
