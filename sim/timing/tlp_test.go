package timing

import "testing"

func TestReadTLPs(t *testing.T) {
	for _, tc := range []struct {
		n, mrrs, mps int
		reqs, cpls   int
		upB, downB   int // bytes on the link, framing included
	}{
		{n: 64, mrrs: 512, mps: 256, reqs: 1, cpls: 1, upB: 24, downB: 64 + 20},
		{n: 4096, mrrs: 512, mps: 256, reqs: 8, cpls: 16, upB: 8 * 24, downB: 4096 + 16*20},
		{n: 512, mrrs: 512, mps: 256, reqs: 1, cpls: 2, upB: 24, downB: 512 + 2*20},
		{n: 513, mrrs: 512, mps: 256, reqs: 2, cpls: 3, upB: 48, downB: 513 + 3*20},
		{n: 600, mrrs: 512, mps: 256, reqs: 2, cpls: 3, upB: 48, downB: 600 + 3*20},
		{n: 4096, mrrs: 4096, mps: 128, reqs: 1, cpls: 32, upB: 24, downB: 4096 + 32*20},
		{n: 1, mrrs: 512, mps: 256, reqs: 1, cpls: 1, upB: 24, downB: 21},
		{n: 0, mrrs: 512, mps: 256},
	} {
		reqs, cpls := ReadTLPs(tc.n, tc.mrrs, tc.mps)
		if reqs != tc.reqs || cpls != tc.cpls {
			t.Errorf("ReadTLPs(%d, %d, %d) = %d, %d; want %d, %d", tc.n, tc.mrrs, tc.mps, reqs, cpls, tc.reqs, tc.cpls)
		}
		if up, down := reqs*ReadReqOverheadBytes, tc.n+cpls*CplOverheadBytes; tc.n > 0 && (up != tc.upB || down != tc.downB) {
			t.Errorf("read of %d: %d B up, %d B down; want %d, %d", tc.n, up, down, tc.upB, tc.downB)
		}
	}
	for _, tc := range []struct{ n, mps, want int }{{0, 256, 0}, {1, 256, 1}, {256, 256, 1}, {257, 256, 2}, {4096, 256, 16}} {
		if got := WriteTLPs(tc.n, tc.mps); got != tc.want {
			t.Errorf("WriteTLPs(%d, %d) = %d, want %d", tc.n, tc.mps, got, tc.want)
		}
	}
}

func TestGenBytesPerSec(t *testing.T) {
	for _, tc := range []struct {
		gen, lanes int
		want       int64
	}{
		{3, 8, 7876923077},   // 8 GT/s × 8 × 128/130 / 8
		{3, 16, 15753846154}, // the ConnectX-6 in a Gen3 slot
		{4, 16, 31507692308}, // Gen4 x16 ≈ 31.5 GB/s
		{1, 1, 250000000},    // 2.5 GT/s × 8/10 / 8
		{7, 16, 0},
	} {
		if got := GenBytesPerSec(tc.gen, tc.lanes); got != tc.want {
			t.Errorf("GenBytesPerSec(%d, %d) = %d, want %d", tc.gen, tc.lanes, got, tc.want)
		}
	}
}
