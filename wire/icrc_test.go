package wire_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math/rand/v2"
	"testing"

	"github.com/rnic/rnic/wire"
)

// capturedReadRequest is host_read.pcap #20 from its IP header: an RC
// RDMA READ request whose ICRC bytes are b0 87 74 9d.
const capturedReadRequest = "4500003c000040004011ae80c6120001c612000b12b712b700288c6a" +
	"0c00ffff0000001e808b261a000055deeccdf0000000112f00000040" + "b087749d"

// referenceICRC computes the ICRC the slow, obvious way: mask a copy of the
// whole frame and run crc32.ChecksumIEEE over 8 bytes of 0xFF and the copy.
func referenceICRC(frame []byte) uint32 {
	m := append([]byte(nil), frame[:len(frame)-wire.ICRCSize]...)
	var hl int
	if m[0]>>4 == 4 {
		hl = int(m[0]&0xF) * 4
		m[1], m[8], m[10], m[11] = 0xFF, 0xFF, 0xFF, 0xFF // TOS, TTL, checksum
	} else {
		hl = 40
		m[0] |= 0x0F // traffic class, flow label, hop limit
		m[1], m[2], m[3], m[7] = 0xFF, 0xFF, 0xFF, 0xFF
	}
	m[hl+6], m[hl+7] = 0xFF, 0xFF // UDP checksum
	m[hl+8+4] = 0xFF              // BTH resv8a
	return crc32.ChecksumIEEE(append(bytes.Repeat([]byte{0xFF}, 8), m...))
}

// maskedBytes returns the frame offsets the ICRC does not cover (besides
// the ICRC itself), with the bits of each that are masked.
func maskedBytes(frame []byte) map[int]byte {
	if frame[0]>>4 == 4 {
		hl := int(frame[0]&0xF) * 4
		return map[int]byte{1: 0xFF, 8: 0xFF, 10: 0xFF, 11: 0xFF, hl + 6: 0xFF, hl + 7: 0xFF, hl + 12: 0xFF}
	}
	return map[int]byte{0: 0x0F, 1: 0xFF, 2: 0xFF, 3: 0xFF, 7: 0xFF, 46: 0xFF, 47: 0xFF, 52: 0xFF}
}

func TestICRCCaptured(t *testing.T) {
	frame := unhex(t, capturedReadRequest)
	got, err := wire.ComputeICRC(frame)
	if err != nil {
		t.Fatal(err)
	}
	if want := binary.LittleEndian.Uint32(unhex(t, "b087749d")); got != want || referenceICRC(frame) != want {
		t.Errorf("ComputeICRC = %#x, reference %#x, want %#x", got, referenceICRC(frame), want)
	}
	if err := wire.CheckICRC(frame); err != nil {
		t.Errorf("CheckICRC: %v", err)
	}
	// SetICRC writes it back little-endian.
	clear(frame[len(frame)-4:])
	wire.SetICRC(frame)
	if got := hexOf(frame[len(frame)-4:]); got != "b087749d" {
		t.Errorf("SetICRC wrote %s", got)
	}
}

// icrcFrames returns frames of every shape the ICRC code distinguishes:
// IPv4, IPv4 with options, IPv6, short and long payloads.
func icrcFrames(t testing.TB) map[string][]byte {
	frames := map[string][]byte{
		"captured": unhex(t, capturedReadRequest),
		"v4 ack":   build(opSpec(false, wire.OpRCAck, 0)),
		"v6 ack":   build(opSpec(true, wire.OpRCAck, 0)),
		"v4 write": build(opSpec(false, wire.OpRCWriteOnlyImm, 1021)),
		"v6 write": build(opSpec(true, wire.OpRCWriteFirst, 4096)),
		"v6 cnp":   build(opSpec(true, wire.OpCNP, 0)),
	}
	// IPv4 with 8 bytes of options, ICRC set by SetICRC.
	plain := build(opSpec(false, wire.OpUDSendOnlyImm, 33))
	opt := append(append(append([]byte(nil), plain[:20]...), 0x94, 0x04, 0, 0, 1, 1, 1, 0), plain[20:]...)
	ip := wire.IPv4(opt)
	ip.SetIHL(7)
	ip.SetTotalLength(uint16(len(opt)))
	ip.SetChecksum(ip.ComputeChecksum())
	wire.SetICRC(opt)
	frames["v4 options"] = opt
	return frames
}

// TestICRCCoverage flips every bit of each frame: the ICRC must change
// exactly when the bit is covered, so the masks are neither too wide nor
// too narrow.
func TestICRCCoverage(t *testing.T) {
	for name, frame := range icrcFrames(t) {
		if got, want := mustICRC(t, frame), referenceICRC(frame); got != want {
			t.Errorf("%s: ComputeICRC = %#x, reference %#x", name, got, want)
		}
		if err := wire.CheckICRC(frame); err != nil {
			t.Errorf("%s: CheckICRC: %v", name, err)
		}
		orig := mustICRC(t, frame)
		masked := maskedBytes(frame)
		if len(frame) > 200 {
			continue // the headers are what matter; long payloads are slow to flip
		}
		for i := 0; i < len(frame)-wire.ICRCSize; i++ {
			for bit := range 8 {
				frame[i] ^= 1 << bit
				crc, err := wire.ComputeICRC(frame)
				covered := masked[i]&(1<<bit) == 0
				// Bits that locate headers may turn the frame unparsable.
				if err == nil && (crc != orig) != covered {
					t.Errorf("%s: byte %d bit %d: covered=%v but ICRC changed=%v", name, i, bit, covered, crc != orig)
				}
				frame[i] ^= 1 << bit
			}
		}
	}
}

// TestSetICRCInPlace checks that SetICRC, which masks the variant fields
// in the frame while it computes, stores ComputeICRC's value and leaves
// every other byte as it was, masked bits with random values included,
// and that CheckICRCOwned then accepts the frame and leaves it as it was.
func TestSetICRCInPlace(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	for name, frame := range icrcFrames(t) {
		masked := maskedBytes(frame)
		for range 20 {
			for i, m := range masked {
				frame[i] ^= m & byte(r.Uint32())
			}
			before := bytes.Clone(frame)
			wire.SetICRC(frame)
			end := len(frame) - wire.ICRCSize
			if !bytes.Equal(frame[:end], before[:end]) {
				t.Fatalf("%s: SetICRC changed the frame:\n% x\nwas\n% x", name, frame[:end], before[:end])
			}
			if got, want := binary.LittleEndian.Uint32(frame[end:]), mustICRC(t, frame); got != want {
				t.Fatalf("%s: SetICRC stored %#x, ComputeICRC says %#x", name, got, want)
			}
			before = bytes.Clone(frame)
			if err := wire.CheckICRCOwned(frame); err != nil || !bytes.Equal(frame, before) {
				t.Fatalf("%s: CheckICRCOwned = %v, frame changed %v", name, err, !bytes.Equal(frame, before))
			}
		}
	}
}

func mustICRC(t *testing.T, frame []byte) uint32 {
	t.Helper()
	crc, err := wire.ComputeICRC(frame)
	if err != nil {
		t.Fatal(err)
	}
	return crc
}

// TestICRCErrors checks that every prefix of a frame fails cleanly, without
// a panic, and that a wrong ICRC is ErrICRC.
func TestICRCErrors(t *testing.T) {
	for name, frame := range icrcFrames(t) {
		for n := range len(frame) {
			if err := wire.CheckICRC(frame[:n]); err == nil {
				t.Errorf("%s: CheckICRC of %d-byte prefix = nil", name, n)
			}
			if err := wire.CheckICRCOwned(frame[:n]); err == nil {
				t.Errorf("%s: CheckICRCOwned of %d-byte prefix = nil", name, n)
			}
		}
		bad := append([]byte(nil), frame...)
		bad[len(bad)-1] ^= 0x80
		if err := wire.CheckICRC(bad); !errors.Is(err, wire.ErrICRC) {
			t.Errorf("%s: wrong ICRC: %v", name, err)
		}
		if err := wire.CheckICRCOwned(bad); !errors.Is(err, wire.ErrICRC) {
			t.Errorf("%s: wrong ICRC, CheckICRCOwned: %v", name, err)
		}
	}
	tests := []struct {
		frame string
		err   error
	}{
		{"", wire.ErrTruncated},
		{"45", wire.ErrTruncated},
		{"75000000", wire.ErrIPVersion},
		{"4400003c000040004011ae80c6120001c612000b", wire.ErrIPHeader},  // IHL 4
		{"4f00003c000040004011ae80c6120001c612000b", wire.ErrTruncated}, // IHL 15, 20 bytes
		{"60000000", wire.ErrTruncated},
		{capturedReadRequest[:2*40], wire.ErrTruncated}, // no room for BTH and ICRC
	}
	for _, tt := range tests {
		frame := unhex(t, tt.frame)
		if _, err := wire.ComputeICRC(frame); !errors.Is(err, tt.err) {
			t.Errorf("ComputeICRC(%s) = %v, want %v", tt.frame, err, tt.err)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("SetICRC on a malformed frame did not panic")
		}
	}()
	wire.SetICRC([]byte{0x45})
}

func TestICRCAllocs(t *testing.T) {
	var hits, misses wire.ICRCCache
	for name, frame := range icrcFrames(t) {
		if n := testing.AllocsPerRun(100, func() {
			wire.SetICRC(frame)
			_ = wire.CheckICRC(frame)
			_ = wire.CheckICRCOwned(frame)
			misses = wire.ICRCCache{} // empty: a miss fills an entry
			misses.Set(frame)
			hits.Set(frame)
			_ = hits.Check(frame)
		}); n != 0 {
			t.Errorf("%s: %v allocations per SetICRC+CheckICRC+CheckICRCOwned and the cache's", name, n)
		}
	}
}

// TestICRCCache: the cache's ICRCs are ComputeICRC's for streams of
// frames of a few flows (the same first 36 bytes, other PSNs, AETHs and
// payloads), with the fields the ICRC masks changed at random between
// frames (a hit must not depend on them) and flows that share an entry;
// frames of other kinds (IPv6, IPv4 options, the capture) take the
// in-place path. A stream of one flow's frames hits.
func TestICRCCache(t *testing.T) {
	r := rand.New(rand.NewPCG(28, 36))
	var c wire.ICRCCache
	for name, frame := range icrcFrames(t) {
		masked := maskedBytes(frame)
		for range 200 {
			f := bytes.Clone(frame)
			for i := 36; i < len(f)-wire.ICRCSize; i++ {
				f[i] = byte(r.Uint32()) // the PSN on: what varies in a flow
			}
			if r.IntN(4) == 0 {
				for i, m := range masked {
					f[i] ^= m & byte(r.Uint32())
				}
			}
			if r.IntN(8) == 0 {
				f[20+8+7] ^= 0x10 // another QP in the same entry
			}
			want := mustICRC(t, f)
			if err := c.Check(f); (err == nil) != (binary.LittleEndian.Uint32(f[len(f)-wire.ICRCSize:]) == want) {
				t.Fatalf("%s: Check = %v with the stored ICRC %s", name, err,
					map[bool]string{true: "right", false: "wrong"}[binary.LittleEndian.Uint32(f[len(f)-wire.ICRCSize:]) == want])
			}
			before := bytes.Clone(f)
			c.Set(f)
			end := len(f) - wire.ICRCSize
			if got := binary.LittleEndian.Uint32(f[end:]); got != want || !bytes.Equal(f[:end], before[:end]) {
				t.Fatalf("%s: Set stored %#x, ComputeICRC says %#x (frame changed: %v)", name, got, want, !bytes.Equal(f[:end], before[:end]))
			}
			if err := c.Check(f); err != nil {
				t.Fatalf("%s: Check after Set: %v", name, err)
			}
		}
	}
	if c.Hits == 0 || c.Misses == 0 {
		t.Errorf("hits %d, misses %d: want both", c.Hits, c.Misses)
	}
	// One flow's ACKs: every one but the first hits.
	var one wire.ICRCCache
	ack := build(opSpec(false, wire.OpRCAck, 0))
	for i := range 100 {
		binary.BigEndian.PutUint32(ack[20+8+8:], uint32(i))
		one.Set(ack)
	}
	if one.Hits != 99 || one.Misses != 1 {
		t.Errorf("100 ACKs of one flow: %d hits, %d misses; want 99, 1", one.Hits, one.Misses)
	}
}
