package pcap_test

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rnic/rnic/wire/pcap"
)

// TestReadCaptures reads the real captures: record counts (as tshark and
// icrc_check.py count them), link type, ordered timestamps, and that every
// record is an IPv4 packet or ARP.
func TestReadCaptures(t *testing.T) {
	want := map[string]int{
		"host_read.pcap": 48, "host_write.pcap": 54, "rc_atomic_cas.pcap": 57, "rc_atomic_fadd.pcap": 57,
		"rc_pingpong.pcap": 27, "rc_read_bw.pcap": 71, "rc_read_lat.pcap": 45, "rc_send_bw.pcap": 66,
		"rc_send_lat.pcap": 63, "rc_write_bw.pcap": 75, "rc_write_lat.pcap": 57, "rc_write_loss.pcap": 328,
		"rdmacm_rping.pcap": 29, "uc_write_bw.pcap": 63, "ud_send_bw.pcap": 39,
	}
	paths, err := filepath.Glob(filepath.Join("..", "..", "testdata", "roce", "*.pcap"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no captures: %v", err)
	}
	for _, path := range paths {
		name := filepath.Base(path)
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		r, err := pcap.NewReader(f)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if r.LinkType() != pcap.LinkTypeEthernet || r.SnapLen() == 0 {
			t.Errorf("%s: link type %v snaplen %d", name, r.LinkType(), r.SnapLen())
		}
		n, ip := 0, 0
		var last time.Time
		for {
			data, ts, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s record %d: %v", name, n+1, err)
			}
			n++
			if ts.Before(last) || ts.Year() < 2020 {
				t.Errorf("%s record %d: timestamp %v after %v", name, n, ts, last)
			}
			last = ts
			if pkt, ok := pcap.IPPacket(r.LinkType(), data); ok {
				ip++
				if pkt[0]>>4 != 4 || int(binary.BigEndian.Uint16(pkt[2:])) != len(pkt) {
					t.Errorf("%s record %d: IP packet %x...", name, n, pkt[:20])
				}
			} else if binary.BigEndian.Uint16(data[12:]) != 0x0806 {
				t.Errorf("%s record %d: neither IP nor ARP", name, n)
			}
		}
		f.Close()
		if n != want[name] {
			t.Errorf("%s: %d records, want %d", name, n, want[name])
		}
		if ip == 0 {
			t.Errorf("%s: no IP packets", name)
		}
	}
}

type record struct {
	ts   time.Time
	data []byte
}

func readAll(t *testing.T, b []byte) (pcap.LinkType, []record) {
	t.Helper()
	r, err := pcap.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	var recs []record
	for {
		data, ts, err := r.Next()
		if err == io.EOF {
			return r.LinkType(), recs
		}
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, record{ts, append([]byte(nil), data...)})
	}
}

// ipv4Packet is a minimal IPv4 header (total length 20) for tests.
var ipv4Packet = mustHex("45000014000040004011" + "0000" + "c6120001c612000b")

func mustHex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

func TestWriteRead(t *testing.T) {
	ts := []time.Time{
		time.Unix(1700000000, 123456789),
		time.Unix(1700000001, 0),
		time.Unix(0, 999),
	}
	ipv6 := append([]byte{0x60, 0, 0, 0, 0, 0, 17, 64}, make([]byte, 32)...)
	for _, lt := range []pcap.LinkType{pcap.LinkTypeRaw, pcap.LinkTypeEthernet} {
		var buf bytes.Buffer
		w, err := pcap.NewWriter(&buf, lt)
		if err != nil {
			t.Fatal(err)
		}
		if w.LinkType() != lt {
			t.Errorf("LinkType() = %v", w.LinkType())
		}
		pkts := [][]byte{ipv4Packet, ipv6, {}}
		for i, p := range pkts {
			if err := w.WriteIPPacket(ts[i], p); err != nil {
				t.Fatal(err)
			}
		}
		raw := []byte("not an IP packet at all")
		if err := w.WritePacket(ts[0], raw); err != nil {
			t.Fatal(err)
		}
		gotLT, recs := readAll(t, buf.Bytes())
		if gotLT != lt || len(recs) != len(pkts)+1 {
			t.Fatalf("%v: read link type %v and %d records", lt, gotLT, len(recs))
		}
		for i, p := range pkts {
			if want := ts[i].Truncate(time.Microsecond); !recs[i].ts.Equal(want) {
				t.Errorf("%v record %d: ts %v, want %v", lt, i, recs[i].ts, want)
			}
			got, ok := pcap.IPPacket(lt, recs[i].data)
			if len(p) == 0 {
				if ok {
					t.Errorf("%v: empty packet read back as IP", lt)
				}
				continue
			}
			if !ok || !bytes.Equal(got, p) {
				t.Errorf("%v record %d: %x, want %x", lt, i, got, p)
			}
			if lt == pcap.LinkTypeEthernet {
				wantType := []byte{0x08, 0x00}
				if p[0]>>4 == 6 {
					wantType = []byte{0x86, 0xDD}
				}
				if !bytes.Equal(recs[i].data[:12], make([]byte, 12)) || !bytes.Equal(recs[i].data[12:14], wantType) {
					t.Errorf("Ethernet header %x", recs[i].data[:14])
				}
			}
		}
		if !bytes.Equal(recs[len(pkts)].data, raw) {
			t.Errorf("%v: WritePacket record %q", lt, recs[len(pkts)].data)
		}
	}
}

func TestWriteTimestampRange(t *testing.T) {
	w, err := pcap.NewWriter(io.Discard, pcap.LinkTypeEthernet)
	if err != nil {
		t.Fatal(err)
	}
	for _, ts := range []time.Time{time.Unix(-1, 0), time.Unix(math.MaxUint32+1, 0)} {
		if err := w.WritePacket(ts, ipv4Packet); !errors.Is(err, pcap.ErrTimestamp) {
			t.Errorf("WritePacket(%v) = %v, want ErrTimestamp", ts, err)
		}
		if err := w.WriteIPPacket(ts, ipv4Packet); !errors.Is(err, pcap.ErrTimestamp) {
			t.Errorf("WriteIPPacket(%v) = %v, want ErrTimestamp", ts, err)
		}
	}
	if err := w.WritePacket(time.Unix(math.MaxUint32, 999999999), ipv4Packet); err != nil {
		t.Errorf("last representable second: %v", err)
	}
}

// TestReadFormats reads hand-made files in both byte orders and both
// timestamp resolutions.
func TestReadFormats(t *testing.T) {
	tests := []struct {
		name  string
		order binary.AppendByteOrder
		magic uint32
		frac  uint32
		want  time.Time
	}{
		{"little micro", binary.LittleEndian, 0xa1b2c3d4, 654321, time.Unix(1000, 654321000)},
		{"big micro", binary.BigEndian, 0xa1b2c3d4, 654321, time.Unix(1000, 654321000)},
		{"little nano", binary.LittleEndian, 0xa1b23c4d, 987654321, time.Unix(1000, 987654321)},
		{"big nano", binary.BigEndian, 0xa1b23c4d, 987654321, time.Unix(1000, 987654321)},
	}
	for _, tt := range tests {
		file := pcapFile(tt.order, tt.magic, uint32(pcap.LinkTypeLinuxSLL), [][]byte{{1, 2, 3}, {}}, tt.frac)
		lt, recs := readAll(t, file)
		if lt != pcap.LinkTypeLinuxSLL || len(recs) != 2 || !bytes.Equal(recs[0].data, []byte{1, 2, 3}) || len(recs[1].data) != 0 {
			t.Errorf("%s: link type %v records %v", tt.name, lt, recs)
			continue
		}
		if !recs[0].ts.Equal(tt.want) {
			t.Errorf("%s: ts %v, want %v", tt.name, recs[0].ts, tt.want)
		}
	}
}

// pcapFile builds a capture by hand, independently of Writer.
func pcapFile(order binary.AppendByteOrder, magic, linkType uint32, recs [][]byte, frac uint32) []byte {
	b := order.AppendUint32(nil, magic)
	b = order.AppendUint16(b, 2)
	b = order.AppendUint16(b, 4)
	b = order.AppendUint32(b, 0)
	b = order.AppendUint32(b, 0)
	b = order.AppendUint32(b, 65535)
	b = order.AppendUint32(b, linkType)
	for _, r := range recs {
		b = order.AppendUint32(b, 1000)
		b = order.AppendUint32(b, frac)
		b = order.AppendUint32(b, uint32(len(r)))
		b = order.AppendUint32(b, uint32(len(r)))
		b = append(b, r...)
	}
	return b
}

func TestReadErrors(t *testing.T) {
	good := pcapFile(binary.LittleEndian, 0xa1b2c3d4, 1, [][]byte{{1, 2, 3, 4}}, 0)
	if _, err := pcap.NewReader(bytes.NewReader(good[:10])); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("short global header: %v", err)
	}
	if _, err := pcap.NewReader(bytes.NewReader(nil)); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("empty file: %v", err)
	}
	pcapng := append([]byte{0x0A, 0x0D, 0x0D, 0x0A}, good[4:]...)
	if _, err := pcap.NewReader(bytes.NewReader(pcapng)); !errors.Is(err, pcap.ErrNotPcap) {
		t.Errorf("pcapng: %v", err)
	}
	badVersion := append([]byte(nil), good...)
	badVersion[4] = 3
	if _, err := pcap.NewReader(bytes.NewReader(badVersion)); !errors.Is(err, pcap.ErrNotPcap) {
		t.Errorf("version 3: %v", err)
	}
	for _, tt := range []struct {
		name string
		file []byte
		err  error
	}{
		{"cut in record header", good[:24+10], io.ErrUnexpectedEOF},
		{"cut in record data", good[:len(good)-1], io.ErrUnexpectedEOF},
		{"huge record", func() []byte {
			b := append([]byte(nil), good...)
			binary.LittleEndian.PutUint32(b[24+8:], pcap.MaxRecordSize+1)
			return b
		}(), pcap.ErrRecordTooLarge},
	} {
		r, err := pcap.NewReader(bytes.NewReader(tt.file))
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := r.Next(); !errors.Is(err, tt.err) {
			t.Errorf("%s: Next = %v, want %v", tt.name, err, tt.err)
		}
	}
	r, _ := pcap.NewReader(bytes.NewReader(good))
	if _, _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.Next(); err != io.EOF {
		t.Errorf("at end: %v, want io.EOF", err)
	}
}

func TestIPPacket(t *testing.T) {
	v4 := ipv4Packet
	v6 := append([]byte{0x60, 0, 0, 0, 0, 4, 17, 64}, make([]byte, 36)...) // payload length 4
	eth := func(etherType string, rest ...[]byte) []byte {
		b := append(make([]byte, 12), mustHex(etherType)...)
		for _, r := range rest {
			b = append(b, r...)
		}
		return b
	}
	sll := func(proto string, p []byte) []byte {
		return append(append(make([]byte, 14), mustHex(proto)...), p...)
	}
	tests := []struct {
		name string
		lt   pcap.LinkType
		data []byte
		want []byte // nil: not IP
	}{
		{"Ethernet IPv4", pcap.LinkTypeEthernet, eth("0800", v4), v4},
		{"Ethernet IPv6", pcap.LinkTypeEthernet, eth("86dd", v6), v6},
		{"Ethernet padding", pcap.LinkTypeEthernet, eth("0800", v4, make([]byte, 26)), v4},
		{"802.1Q", pcap.LinkTypeEthernet, eth("8100", mustHex("0064"+"0800"), v4), v4},
		{"802.1ad + 802.1Q", pcap.LinkTypeEthernet, eth("88a8", mustHex("00c8"+"8100"+"0064"+"86dd"), v6), v6},
		{"ARP", pcap.LinkTypeEthernet, eth("0806", make([]byte, 28)), nil},
		{"Ethernet runt", pcap.LinkTypeEthernet, make([]byte, 13), nil},
		{"VLAN runt", pcap.LinkTypeEthernet, eth("8100", []byte{0, 1}), nil},
		{"EtherType IPv4, IPv6 inside", pcap.LinkTypeEthernet, eth("0800", v6), nil},
		{"IPv4 header runt", pcap.LinkTypeEthernet, eth("0800", v4[:19]), nil},
		{"IPv4 length beyond record", pcap.LinkTypeEthernet, eth("0800", mustHex("45000100"), v4[4:]), append(mustHex("45000100"), v4[4:]...)},
		{"SLL IPv4", pcap.LinkTypeLinuxSLL, sll("0800", v4), v4},
		{"SLL IPv6", pcap.LinkTypeLinuxSLL, sll("86dd", v6), v6},
		{"SLL runt", pcap.LinkTypeLinuxSLL, make([]byte, 15), nil},
		{"raw IPv4", pcap.LinkTypeRaw, v4, v4},
		{"raw IPv6", pcap.LinkTypeRaw, v6, v6},
		{"raw garbage", pcap.LinkTypeRaw, []byte{0x12, 0x34}, nil},
		{"raw empty", pcap.LinkTypeRaw, nil, nil},
		{"unknown link type", 147, v4, nil},
	}
	for _, tt := range tests {
		got, ok := pcap.IPPacket(tt.lt, tt.data)
		if ok != (tt.want != nil) || !bytes.Equal(got, tt.want) {
			t.Errorf("%s: IPPacket = %x, %v; want %x", tt.name, got, ok, tt.want)
		}
	}
}

func TestLinkTypeString(t *testing.T) {
	for lt, want := range map[pcap.LinkType]string{
		pcap.LinkTypeEthernet: "ETHERNET", pcap.LinkTypeRaw: "RAW", pcap.LinkTypeLinuxSLL: "LINUX_SLL", 0: "LINKTYPE(0)", 4294967295: "LINKTYPE(4294967295)",
	} {
		if got := lt.String(); got != want {
			t.Errorf("LinkType(%d).String() = %q, want %q", uint32(lt), got, want)
		}
	}
}

// TestTshark checks that tshark decodes a file the Writer produced as
// RoCE; it is skipped where tshark is not installed.
func TestTshark(t *testing.T) {
	tshark, err := exec.LookPath("tshark")
	if err != nil {
		t.Skip("tshark not on PATH")
	}
	// host_write.pcap #25: an RC RDMA WRITE ONLY, from its IP header.
	frame := mustHex("4500007c000040004011ae40c6120001c612000b12b712b700688caa0a00ffff0000001d809b535a" +
		"00005641cc8630000000102d00000040" +
		"00070e151c232a31383f464d545b626970777e858c939aa1a8afb6bdc4cbd2d9e0e7eef5fc030a11181f262d343b424950575e656c737a81888f969da4abb2b9" +
		"9369699a")
	for _, lt := range []pcap.LinkType{pcap.LinkTypeRaw, pcap.LinkTypeEthernet} {
		path := filepath.Join(t.TempDir(), "w.pcap")
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		w, err := pcap.NewWriter(f, lt)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.WriteIPPacket(time.Now(), frame); err != nil {
			t.Fatal(err)
		}
		f.Close()
		out, err := exec.Command(tshark, "-r", path, "-V").CombinedOutput()
		if err != nil {
			t.Fatalf("tshark: %v\n%s", err, out)
		}
		if s := string(out); !strings.Contains(s, "InfiniBand") || !strings.Contains(s, "RDMA WRITE Only") {
			t.Errorf("%v: tshark does not decode RoCE:\n%s", lt, s)
		}
	}
}

// FuzzPcapReader reads arbitrary files: the reader must never panic, and
// the records of a file it reads to the end must survive a write and a
// second read unchanged.
func FuzzPcapReader(f *testing.F) {
	f.Add(pcapFile(binary.LittleEndian, 0xa1b2c3d4, 1, [][]byte{{1, 2, 3}, ipv4Packet}, 5))
	f.Add(pcapFile(binary.BigEndian, 0xa1b23c4d, 101, [][]byte{ipv4Packet}, 999999999))
	if b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "roce", "host_read.pcap")); err == nil {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, file []byte) {
		r, err := pcap.NewReader(bytes.NewReader(file))
		if err != nil {
			return
		}
		var recs []record
		for {
			data, ts, err := r.Next()
			if err != nil {
				if err != io.EOF {
					return
				}
				break
			}
			if len(data) > pcap.MaxRecordSize {
				t.Fatalf("record of %d bytes", len(data))
			}
			pcap.IPPacket(r.LinkType(), data)
			recs = append(recs, record{ts, append([]byte(nil), data...)})
		}
		var buf bytes.Buffer
		w, err := pcap.NewWriter(&buf, r.LinkType())
		if err != nil {
			t.Fatal(err)
		}
		for i, rec := range recs {
			if err := w.WritePacket(rec.ts, rec.data); err != nil {
				// Records may carry a fraction of a second of a million
				// microseconds or more, pushing the time past 2106.
				if errors.Is(err, pcap.ErrTimestamp) && rec.ts.Unix() > math.MaxUint32 {
					recs = recs[:i]
					break
				}
				t.Fatal(err)
			}
		}
		lt, again := readAll(t, buf.Bytes())
		if lt != r.LinkType() || len(again) != len(recs) {
			t.Fatalf("re-read %v %d records, want %v %d", lt, len(again), r.LinkType(), len(recs))
		}
		for i := range recs {
			if !bytes.Equal(again[i].data, recs[i].data) || !again[i].ts.Equal(recs[i].ts.Truncate(time.Microsecond)) {
				t.Fatalf("record %d changed", i)
			}
		}
	})
}

// TestSnapLen writes packets longer and shorter than the snapshot length:
// the global header declares it, each record keeps at most that many
// bytes (the Ethernet header counted, as tcpdump -s counts it) and its
// original length is the packet's, and RecordSize says what a record
// costs in the file.
func TestSnapLen(t *testing.T) {
	long := append(append([]byte(nil), ipv4Packet...), make([]byte, 300)...)
	tests := []struct {
		lt       pcap.LinkType
		snap     int
		pkt      []byte
		incl     int
		origLen  int
		wantSnap uint32
	}{
		{pcap.LinkTypeEthernet, 64, long, 64, 14 + len(long), 64},
		{pcap.LinkTypeEthernet, 64, ipv4Packet, 14 + 20, 14 + 20, 64},
		{pcap.LinkTypeEthernet, 10, long, 10, 14 + len(long), 10}, // inside the Ethernet header
		{pcap.LinkTypeEthernet, 0, long, 14 + len(long), 14 + len(long), pcap.SnapLen},
		{pcap.LinkTypeRaw, 64, long, 64, len(long), 64},
		{pcap.LinkTypeRaw, 64, ipv4Packet, 20, 20, 64},
	}
	for _, tt := range tests {
		var buf bytes.Buffer
		w, err := pcap.NewWriterSnapLen(&buf, tt.lt, tt.snap)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.WriteIPPacket(time.Unix(1700000000, 0), tt.pkt); err != nil {
			t.Fatal(err)
		}
		r, err := pcap.NewReader(bytes.NewReader(buf.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		if r.SnapLen() != tt.wantSnap || uint32(w.SnapLen()) != tt.wantSnap {
			t.Errorf("%v snap %d: file snaplen %d, writer %d, want %d", tt.lt, tt.snap, r.SnapLen(), w.SnapLen(), tt.wantSnap)
		}
		rec, err := r.NextRecord()
		if err != nil {
			t.Fatal(err)
		}
		if len(rec.Data) != tt.incl || rec.OrigLen != tt.origLen {
			t.Errorf("%v snap %d, %d-byte packet: incl_len %d orig_len %d, want %d and %d", tt.lt, tt.snap, len(tt.pkt), len(rec.Data), rec.OrigLen, tt.incl, tt.origLen)
		}
		head := tt.pkt
		if tt.lt == pcap.LinkTypeEthernet {
			head = append(mustHex("000000000000000000000000"+"0800"), tt.pkt...)
		}
		if !bytes.Equal(rec.Data, head[:tt.incl]) {
			t.Errorf("%v snap %d: record %x, want the first %d bytes %x", tt.lt, tt.snap, rec.Data, tt.incl, head[:tt.incl])
		}
		if got := buf.Len() - 24; got != w.RecordSize(len(head)) {
			t.Errorf("%v snap %d: record took %d bytes, RecordSize says %d", tt.lt, tt.snap, got, w.RecordSize(len(head)))
		}
	}
	for _, bad := range []int{-1, pcap.MaxRecordSize + 1} {
		if _, err := pcap.NewWriterSnapLen(io.Discard, pcap.LinkTypeRaw, bad); err == nil {
			t.Errorf("snapshot length %d accepted", bad)
		}
	}
}

// TestTsharkSnapLen checks how tshark reads records cut by the snapshot
// length: it gives the frame's length on the wire and the captured length,
// decodes the headers a record kept, and says "Packet size limited during
// capture" where a header itself was cut.
func TestTsharkSnapLen(t *testing.T) {
	tshark, err := exec.LookPath("tshark")
	if err != nil {
		t.Skip("tshark not on PATH")
	}
	// host_write.pcap #25 again: 124 bytes of IP packet, 138 with Ethernet.
	frame := mustHex("4500007c000040004011ae40c6120001c612000b12b712b700688caa0a00ffff0000001d809b535a" +
		"00005641cc8630000000102d00000040" +
		"00070e151c232a31383f464d545b626970777e858c939aa1a8afb6bdc4cbd2d9e0e7eef5fc030a11181f262d343b424950575e656c737a81888f969da4abb2b9" +
		"9369699a")
	tests := []struct {
		snap int
		want []string
	}{
		// Ethernet, IPv4, UDP, BTH and RETH are 70 bytes: all kept.
		{80, []string{"138 bytes on wire", "80 bytes captured", "RDMA WRITE Only", "DMA Length: 64"}},
		// Cut inside the UDP header.
		{40, []string{"138 bytes on wire", "40 bytes captured", "Packet size limited during capture"}},
	}
	for _, tt := range tests {
		path := filepath.Join(t.TempDir(), "snap.pcap")
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		w, err := pcap.NewWriterSnapLen(f, pcap.LinkTypeEthernet, tt.snap)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.WriteIPPacket(time.Now(), frame); err != nil {
			t.Fatal(err)
		}
		f.Close()
		out, err := exec.Command(tshark, "-r", path, "-V").CombinedOutput()
		if err != nil {
			t.Fatalf("tshark: %v\n%s", err, out)
		}
		for _, want := range tt.want {
			if !strings.Contains(string(out), want) {
				t.Errorf("snaplen %d: tshark output lacks %q:\n%s", tt.snap, want, out)
			}
		}
	}
}
