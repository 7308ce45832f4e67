package wire

import (
	"encoding/binary"
	"hash/crc32"
)

// ICRCCache computes ICRCs the way a NIC's ICRC engine can: the bytes of
// a flow's packets up to the PSN — IPv4 and UDP headers, the BTH's first
// eight bytes — are the same packet after packet (a QP's ACKs, a stream
// of WRITEs of one size), so the CRC state after them is kept per flow
// and each packet's CRC continues from it over the PSN and what follows.
// An ACK's ICRC then covers 8 bytes instead of 44, and no field is masked
// (the state was computed with the variant fields masked).
//
// The cache is direct-mapped on the destination QP and the IP length. A
// frame whose first 36 bytes differ from its entry's (a miss) refills
// the entry, computing the state from its masked bytes, and goes on from
// there; an IPv6 frame or one with IPv4 options is computed in place, as
// SetICRC does. The results are ComputeICRC's (TestICRCCache, and
// FuzzParse for any bytes). A cache serves one goroutine; the zero value
// is empty.
type ICRCCache struct {
	e       [icrcCacheEntries]icrcCacheEntry
	scratch [icrcPrefix]byte
	// Hits and Misses count lookups of IPv4 frames without options.
	Hits, Misses uint64
}

const (
	icrcCacheEntries = 16
	// icrcPrefix: IPv4 (20) + UDP (8) + the BTH up to its PSN (8).
	icrcPrefix = IPv4HeaderSize + UDPHeaderSize + bthPSN
)

type icrcCacheEntry struct {
	prefix [icrcPrefix]byte // the frame's bytes as they were, unmasked
	state  uint32           // the CRC after the masked prefix
	valid  bool
}

// Set computes the ICRC of a complete frame that is the caller's alone
// and stores it in its last 4 bytes, as SetICRC does.
func (c *ICRCCache) Set(frame []byte) {
	crc, err := c.compute(frame)
	if err != nil {
		panic("wire: ICRCCache.Set: " + err.Error())
	}
	binary.LittleEndian.PutUint32(frame[len(frame)-ICRCSize:], crc)
}

// Check verifies the ICRC of a frame that is the caller's alone, as
// CheckICRCOwned does.
func (c *ICRCCache) Check(frame []byte) error {
	crc, err := c.compute(frame)
	return stored(frame, crc, err)
}

func (c *ICRCCache) compute(frame []byte) (uint32, error) {
	if len(frame) < IPv4HeaderSize+UDPHeaderSize+BTHSize+ICRCSize || frame[0] != 4<<4|IPv4HeaderSize/4 {
		return icrcInPlace(frame) // short (its error), IPv6, or options
	}
	p := frame[:icrcPrefix]
	// The entry: the destination QP's low bits, and the IP length's.
	e := &c.e[(uint(p[IPv4HeaderSize+UDPHeaderSize+bthDestQP+3])^uint(p[ipv4TotalLength+1]))%icrcCacheEntries]
	if !e.valid || [icrcPrefix]byte(p) != e.prefix {
		c.Misses++
		e.prefix = [icrcPrefix]byte(p)
		// In the cache's scratch: a local array would escape through
		// crc32's implementation, one allocation per miss.
		masked := &c.scratch
		*masked = e.prefix
		maskVariant(masked[:], IPv4HeaderSize)
		e.state = crc32.Update(icrcSeed, crc32.IEEETable, masked[:])
		e.valid = true
	} else {
		c.Hits++
	}
	return crc32.Update(e.state, crc32.IEEETable, frame[icrcPrefix:len(frame)-ICRCSize]), nil
}
