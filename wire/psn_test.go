package wire_test

import (
	"testing"

	"github.com/rnic/rnic/wire"
)

func TestPSNAdd(t *testing.T) {
	tests := []struct {
		p    wire.PSN
		n    uint32
		want wire.PSN
	}{
		{0, 0, 0},
		{0, 1, 1},
		{0xFFFFFE, 1, 0xFFFFFF},
		{0xFFFFFF, 1, 0},
		{0xFFFFFF, 2, 1},
		{0x800000, 0x800000, 0},
		{5, 0xFFFFFF, 4}, // adding 2^24-1 steps back one
		{5, 1 << 24, 5},  // a full circle
		{123, 0xFFFFFFFF, 122},
	}
	for _, tt := range tests {
		if got := tt.p.Add(tt.n); got != tt.want {
			t.Errorf("PSN(%#x).Add(%#x) = %#x, want %#x", uint32(tt.p), tt.n, uint32(got), uint32(tt.want))
		}
	}
	if got := wire.PSN(0xFFFFFF).Next(); got != 0 {
		t.Errorf("PSN(0xFFFFFF).Next() = %v, want 0", got)
	}
	if got := wire.PSN(41).Next(); got != 42 {
		t.Errorf("PSN(41).Next() = %v, want 42", got)
	}
}

func TestPSNCompare(t *testing.T) {
	tests := []struct {
		p, q wire.PSN
		diff int32
	}{
		{0, 0, 0},
		{1, 0, 1},
		{0, 1, -1},
		{0, 0xFFFFFF, 1}, // wrap: 0 comes right after 0xFFFFFF
		{0xFFFFFF, 0, -1},
		{5, 0xFFFFFA, 11},
		{0xFFFFFA, 5, -11},
		{0x7FFFFF, 0, 0x7FFFFF},  // largest positive distance
		{0x800000, 0, -0x800000}, // 2^23 ahead reads as 2^23 behind
		{0, 0x800000, -0x800000},
		{0x800001, 0, -0x7FFFFF},
		{0, 0x7FFFFF, -0x7FFFFF},
		{0xC00000, 0x400000, -0x800000},
	}
	for _, tt := range tests {
		d := tt.p.Diff(tt.q)
		if d != tt.diff {
			t.Errorf("PSN(%#x).Diff(%#x) = %d, want %d", uint32(tt.p), uint32(tt.q), d, tt.diff)
		}
		if got := tt.p.Before(tt.q); got != (tt.diff < 0) {
			t.Errorf("PSN(%#x).Before(%#x) = %v, want %v", uint32(tt.p), uint32(tt.q), got, tt.diff < 0)
		}
		if got := tt.p.After(tt.q); got != (tt.diff > 0) {
			t.Errorf("PSN(%#x).After(%#x) = %v, want %v", uint32(tt.p), uint32(tt.q), got, tt.diff > 0)
		}
		if got := tt.q.Add(uint32(tt.diff)); got != tt.p {
			t.Errorf("PSN(%#x).Add(Diff) = %#x, want %#x", uint32(tt.q), uint32(got), uint32(tt.p))
		}
	}
}

func TestPSNInWindow(t *testing.T) {
	tests := []struct {
		p, first wire.PSN
		n        uint32
		want     bool
	}{
		{10, 10, 1, true},
		{10, 10, 0, false},
		{11, 10, 1, false},
		{9, 10, 100, false},
		{109, 10, 100, true},
		{110, 10, 100, false},
		{0xFFFFFF, 0xFFFFF0, 32, true}, // window across the wrap
		{0, 0xFFFFF0, 32, true},
		{15, 0xFFFFF0, 32, true},
		{16, 0xFFFFF0, 32, false},
		{0xFFFFEF, 0xFFFFF0, 32, false},
		{0x123456, 0, 1 << 24, true}, // the whole space
	}
	for _, tt := range tests {
		if got := tt.p.InWindow(tt.first, tt.n); got != tt.want {
			t.Errorf("PSN(%#x).InWindow(%#x, %d) = %v, want %v", uint32(tt.p), uint32(tt.first), tt.n, got, tt.want)
		}
	}
}

func TestPSNString(t *testing.T) {
	if got := wire.PSN(9119258).String(); got != "9119258" {
		t.Errorf("String() = %q", got)
	}
}
