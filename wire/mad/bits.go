package mad

// field is where a field lies in a MAD: byte offset from the MAD's start,
// bit offset from that byte's most significant bit, width in bits (at
// most 64).
type field struct {
	off   uint16
	bit   uint8
	width uint8
}

// get reads field f of b, big-endian.
func (f field) get(b []byte) uint64 {
	var v uint64
	pos := uint(f.off)*8 + uint(f.bit)
	for i := uint(0); i < uint(f.width); i++ {
		p := pos + i
		v = v<<1 | uint64(b[p/8]>>(7-p%8)&1)
	}
	return v
}

// put writes the low f.width bits of v into field f of b, leaving the
// bits around it as they are.
func (f field) put(b []byte, v uint64) {
	pos := uint(f.off)*8 + uint(f.bit)
	for i := uint(0); i < uint(f.width); i++ {
		p := pos + i
		bit := byte(v>>(uint(f.width)-1-i)) & 1
		b[p/8] = b[p/8]&^(1<<(7-p%8)) | bit<<(7-p%8)
	}
}
