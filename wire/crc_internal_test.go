package wire

import (
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

// TestCRCUpdate compares the package's slicing-by-8 CRC with hash/crc32
// for every length up to 200 and for chained updates.
func TestCRCUpdate(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 200)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	for n := 0; n <= len(buf); n++ {
		for _, seed := range []uint32{0, icrcSeed, 0xFFFFFFFF} {
			if got, want := crcUpdate(seed, buf[:n]), crc32.Update(seed, crc32.IEEETable, buf[:n]); got != want {
				t.Fatalf("n=%d seed=%#x: crcUpdate = %#x, crc32.Update = %#x", n, seed, got, want)
			}
		}
		if got, want := crc32.Update(crcUpdate(0, buf[:n/3]), crc32.IEEETable, buf[n/3:n]), crc32.ChecksumIEEE(buf[:n]); got != want {
			t.Fatalf("n=%d: chained = %#x, want %#x", n, got, want)
		}
	}
}

// TestICRCSeed checks the constant against its definition: the CRC of the
// 8 bytes of 0xFF that stand for the masked LRH, which rxe expresses as the
// internal state 0xdebb20e3.
func TestICRCSeed(t *testing.T) {
	ff := []byte{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}
	if got := crc32.ChecksumIEEE(ff); got != icrcSeed {
		t.Errorf("CRC of 8 x 0xFF = %#x, icrcSeed = %#x", got, uint32(icrcSeed))
	}
	if ^uint32(icrcSeed) != 0xdebb20e3 {
		t.Errorf("^icrcSeed = %#x, want rxe's 0xdebb20e3", ^uint32(icrcSeed))
	}
}
