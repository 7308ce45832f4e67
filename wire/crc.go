package wire

import (
	"encoding/binary"
	"hash/crc32"
)

// crcUpdate is crc32.Update(crc, crc32.IEEETable, p) implemented here
// (slicing-by-8) for the ICRC's masked header copy. hash/crc32 dispatches
// through a function variable, so a stack buffer passed to it escapes to
// the heap; calling this instead keeps the ICRC free of allocations. The
// payload, which is long and lives in the caller's frame, still goes
// through crc32.Update and its CLMUL code.
func crcUpdate(crc uint32, p []byte) uint32 {
	crc = ^crc
	for len(p) >= 8 {
		lo := binary.LittleEndian.Uint32(p) ^ crc
		hi := binary.LittleEndian.Uint32(p[4:])
		crc = crcTables[7][byte(lo)] ^ crcTables[6][byte(lo>>8)] ^
			crcTables[5][byte(lo>>16)] ^ crcTables[4][lo>>24] ^
			crcTables[3][byte(hi)] ^ crcTables[2][byte(hi>>8)] ^
			crcTables[1][byte(hi>>16)] ^ crcTables[0][hi>>24]
		p = p[8:]
	}
	for _, b := range p {
		crc = crcTables[0][byte(crc)^b] ^ crc>>8
	}
	return ^crc
}

// crcTables[k][b] is the CRC state after feeding byte b followed by k zero
// bytes, which lets crcUpdate consume 8 bytes per step.
var crcTables = func() (t [8][256]uint32) {
	t[0] = *crc32.IEEETable
	for i := range 256 {
		for k := 1; k < 8; k++ {
			prev := t[k-1][i]
			t[k][i] = t[0][byte(prev)] ^ prev>>8
		}
	}
	return t
}()
