package wire_test

import (
	"testing"
	"time"

	"github.com/rnic/rnic/wire"
)

// TestSyndrome checks the syndrome encodings of IBTA Table 42 and the
// values rxe puts on the wire.
func TestSyndrome(t *testing.T) {
	tests := []struct {
		s     wire.Syndrome
		value uint8
		kind  wire.AckKind
		field uint8 // credits, timer or NAK code
		str   string
	}{
		{wire.SyndromeACK(wire.CreditsInvalid), 0x1F, wire.AckKindACK, 31, "ACK credits=31"},
		{wire.SyndromeACK(0), 0x00, wire.AckKindACK, 0, "ACK credits=0"},
		{wire.SyndromeACK(0xFF), 0x1F, wire.AckKindACK, 31, "ACK credits=31"}, // masked to 5 bits
		{wire.SyndromeRNR(14), 0x2E, wire.AckKindRNRNAK, 14, "RNR_NAK timer=14"},
		{wire.SyndromeRNR(0), 0x20, wire.AckKindRNRNAK, 0, "RNR_NAK timer=0"},
		{wire.SyndromeNAK(wire.NAKPSNSeqErr), 0x60, wire.AckKindNAK, 0, "NAK PSN_SEQ_ERR"},
		{wire.SyndromeNAK(wire.NAKInvalidRequest), 0x61, wire.AckKindNAK, 1, "NAK INVALID_REQUEST"},
		{wire.SyndromeNAK(wire.NAKRemoteAccessErr), 0x62, wire.AckKindNAK, 2, "NAK REMOTE_ACCESS_ERR"},
		{wire.SyndromeNAK(wire.NAKRemoteOpErr), 0x63, wire.AckKindNAK, 3, "NAK REMOTE_OP_ERR"},
		{wire.SyndromeNAK(wire.NAKInvalidRDRequest), 0x64, wire.AckKindNAK, 4, "NAK INVALID_RD_REQUEST"},
		{wire.SyndromeNAK(9), 0x69, wire.AckKindNAK, 9, "NAK NAK_CODE(9)"},
		{wire.Syndrome(0x45), 0x45, wire.AckKindReserved, 5, "RESERVED(0x45)"},
		{wire.Syndrome(0x9F), 0x9F, wire.AckKindACK, 31, "ACK credits=31"}, // bit 7 is reserved
	}
	for _, tt := range tests {
		if uint8(tt.s) != tt.value {
			t.Errorf("%v: value %#x, want %#x", tt.s, uint8(tt.s), tt.value)
		}
		if tt.s.Kind() != tt.kind {
			t.Errorf("%#x: Kind() = %v, want %v", tt.value, tt.s.Kind(), tt.kind)
		}
		var field uint8
		switch tt.kind {
		case wire.AckKindACK:
			field = tt.s.Credits()
		case wire.AckKindRNRNAK:
			field = tt.s.RNRTimer()
		default:
			field = uint8(tt.s.NAKCode())
		}
		if field != tt.field {
			t.Errorf("%#x: field = %d, want %d", tt.value, field, tt.field)
		}
		if got := tt.s.String(); got != tt.str {
			t.Errorf("%#x: String() = %q, want %q", tt.value, got, tt.str)
		}
	}
}

func TestAckKindString(t *testing.T) {
	for k, want := range map[wire.AckKind]string{
		wire.AckKindACK: "ACK", wire.AckKindRNRNAK: "RNR_NAK", wire.AckKindReserved: "RESERVED", wire.AckKindNAK: "NAK",
	} {
		if got := k.String(); got != want {
			t.Errorf("AckKind(%d).String() = %q, want %q", k, got, want)
		}
	}
}

// TestRNRTimerDuration checks IBTA Table 45 at its ends and a few points.
func TestRNRTimerDuration(t *testing.T) {
	tests := []struct {
		timer uint8
		want  time.Duration
	}{
		{0, 655360 * time.Microsecond},
		{1, 10 * time.Microsecond},
		{2, 20 * time.Microsecond},
		{12, 640 * time.Microsecond},
		{14, 1280 * time.Microsecond},
		{18, 5120 * time.Microsecond},
		{31, 491520 * time.Microsecond},
		{32 + 1, 10 * time.Microsecond}, // high bits ignored
	}
	for _, tt := range tests {
		if got := wire.RNRTimerDuration(tt.timer); got != tt.want {
			t.Errorf("RNRTimerDuration(%d) = %v, want %v", tt.timer, got, tt.want)
		}
	}
	for i := uint8(2); i < 32; i++ {
		if wire.RNRTimerDuration(i) <= wire.RNRTimerDuration(i-1) {
			t.Errorf("RNR timer %d is not longer than %d", i, i-1)
		}
	}
}

func TestMTU(t *testing.T) {
	tests := []struct {
		m     wire.MTU
		bytes int
		str   string
	}{
		{wire.MTU256, 256, "256"},
		{wire.MTU512, 512, "512"},
		{wire.MTU1024, 1024, "1024"},
		{wire.MTU2048, 2048, "2048"},
		{wire.MTU4096, 4096, "4096"},
		{0, 0, "MTU(0)"},
		{6, 0, "MTU(6)"},
	}
	for _, tt := range tests {
		if got := tt.m.Bytes(); got != tt.bytes {
			t.Errorf("MTU(%d).Bytes() = %d, want %d", tt.m, got, tt.bytes)
		}
		if got := tt.m.String(); got != tt.str {
			t.Errorf("MTU(%d).String() = %q, want %q", tt.m, got, tt.str)
		}
		if tt.bytes != 0 {
			if m, ok := wire.MTUFromBytes(tt.bytes); !ok || m != tt.m {
				t.Errorf("MTUFromBytes(%d) = %d, %v", tt.bytes, m, ok)
			}
		}
	}
	for _, n := range []int{0, 128, 1000, 1500, 8192, -256} {
		if m, ok := wire.MTUFromBytes(n); ok {
			t.Errorf("MTUFromBytes(%d) = %d, true; want false", n, m)
		}
	}
}
