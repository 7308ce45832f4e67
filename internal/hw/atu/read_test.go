package atu

import (
	"math"
	"testing"
)

// TestRead checks Read, the host CPU's copy of inline send data out of a
// registered region: the right bytes across 4 KiB and 2 MiB page
// boundaries, the faults a local key can take (key, PD, bounds; IBTA Vol 1
// §10.6: an lkey names a region of the QP's PD), and that it neither
// touches the NIC's caches nor counts a translation.
func TestRead(t *testing.T) {
	for _, cs := range cacheShapes {
		t.Run(cs.name, func(t *testing.T) {
			u := newATU(t, 8, cs)
			const iova, n = 0x3000_0f00, 3*4096 + 77
			buf := pattern(n, 4)
			k := mustReg(t, u, MRSpec{PD: 1, Buf: buf, IOVA: iova, Access: MWBind})
			big := pattern(5000, 5)
			const iova2 = 9<<21 - 2000
			k2 := mustReg(t, u, MRSpec{PD: 1, Buf: big, IOVA: iova2, PageShift: 21})
			zb := pattern(300, 6)
			kz := mustReg(t, u, MRSpec{PD: 2, Buf: zb, IOVA: 0x1234, Access: ZeroBased})
			w := mustAllocMW(t, u, 1, KindMW1)
			mustBind(t, u, Bind{MW: w, NewKey: w, MR: k, PD: 1, VA: iova, Length: n, Access: RemoteRead})
			gone := mustReg(t, u, MRSpec{PD: 1, Buf: buf, IOVA: iova})
			if err := u.DeregMR(gone); err != nil {
				t.Fatal(err)
			}
			// Warm the caches, so that a Read that used them would show
			// in their statistics.
			if _, f := u.Translate(&Request{Key: k, PD: 1, VA: iova, Len: n}, nil); f != OK {
				t.Fatal(f)
			}
			tests := []struct {
				name string
				pd   uint32
				key  uint32
				va   uint64
				n    int
				want []byte // nil: the fault
				f    Fault
			}{
				{"whole region", 1, k, iova, n, buf, OK},
				{"first byte", 1, k, iova, 1, buf[:1], OK},
				{"last byte", 1, k, iova + n - 1, 1, buf[n-1:], OK},
				{"across the first boundary", 1, k, iova + 0xf0, 0x20, buf[0xf0:0x110], OK},
				{"across two boundaries", 1, k, iova + 0x100, 4097, buf[0x100 : 0x100+4097], OK},
				{"empty at the end", 1, k, iova + n, 0, []byte{}, OK},
				{"2 MiB pages, across the boundary", 1, k2, iova2 + 1990, 20, big[1990:2010], OK},
				{"2 MiB pages, whole", 1, k2, iova2, 5000, big, OK},
				{"zero-based", 2, kz, 7, 100, zb[7:107], OK},
				{"zero-based named by its IOVA", 2, kz, 0x1234, 1, nil, FaultBounds},
				{"one past the end", 1, k, iova + n - 1, 2, nil, FaultBounds},
				{"below the start", 1, k, iova - 1, 2, nil, FaultBounds},
				{"va+n wraps", 1, k, math.MaxUint64 - 2, 8, nil, FaultBounds},
				{"PD mismatch", 2, k, iova, 1, nil, FaultPD},
				{"key 0", 1, 0, iova, 1, nil, FaultKey},
				{"wrong variant", 1, k ^ 0x10, iova, 1, nil, FaultKey},
				{"deregistered", 1, gone, iova, 1, nil, FaultKey},
				{"a window's key", 1, w, iova, 1, nil, FaultKey},
				{"index past MaxMR", 1, 200 << 8, iova, 1, nil, FaultKey},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					dst := make([]byte, tt.n)
					for i := range dst {
						dst[i] = 0xa5
					}
					before := u.Stats()
					f := u.Read(tt.pd, tt.key, tt.va, dst)
					if after := u.Stats(); after != before {
						t.Fatalf("Read changed the NIC's statistics:\n%+v\n%+v", before, after)
					}
					if f != tt.f {
						t.Fatalf("Read = %v, want %v", f, tt.f)
					}
					if f == OK && string(dst) != string(tt.want) {
						t.Fatal("Read copied the wrong bytes")
					}
					if f != OK {
						for i, b := range dst {
							if b != 0xa5 {
								t.Fatalf("faulted Read wrote dst[%d]", i)
							}
						}
					}
				})
			}
		})
	}
}
