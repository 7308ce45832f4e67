package mad

// coder reads or writes a message's fields, so that each message lists
// its fields once (a fields method) for both Decode and Encode.
type coder struct {
	b   []byte // the whole MAD
	enc bool
}

// at is a field of a CM message: offset off of the message's data (the
// spec's tables count from there), bit bit, width w.
func at(off uint16, bit, w uint8) field { return field{off: HeaderSize + off, bit: bit, width: w} }

func (c *coder) u8(f field, p *uint8) {
	if c.enc {
		f.put(c.b, uint64(*p))
	} else {
		*p = uint8(f.get(c.b))
	}
}

func (c *coder) u16(f field, p *uint16) {
	if c.enc {
		f.put(c.b, uint64(*p))
	} else {
		*p = uint16(f.get(c.b))
	}
}

func (c *coder) u32(f field, p *uint32) {
	if c.enc {
		f.put(c.b, uint64(*p))
	} else {
		*p = uint32(f.get(c.b))
	}
}

func (c *coder) u64(f field, p *uint64) {
	if c.enc {
		f.put(c.b, *p)
	} else {
		*p = f.get(c.b)
	}
}

func (c *coder) flag(f field, p *bool) {
	if c.enc {
		v := uint64(0)
		if *p {
			v = 1
		}
		f.put(c.b, v)
	} else {
		*p = f.get(c.b) != 0
	}
}

// bytes copies len(p) bytes at offset off of the message's data.
func (c *coder) bytes(off uint16, p []byte) {
	o := HeaderSize + int(off)
	if c.enc {
		copy(c.b[o:o+len(p)], p)
	} else {
		copy(p, c.b[o:o+len(p)])
	}
}

// decode fills a message's fields from m.
func decode(m MAD, fields func(*coder)) { fields(&coder{b: m}) }

// encode writes a message's fields into m's data, its reserved bits zero.
func encode(m MAD, fields func(*coder)) {
	clear(m[HeaderSize:Size])
	fields(&coder{b: m, enc: true})
}
