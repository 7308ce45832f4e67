package perftest

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// DestSize is the size of a QP-info message with a GID (KEY_MSG_SIZE_GID).
const DestSize = 108

// Dest is what one side tells the other about one of its QPs (struct
// pingpong_dest): enough to connect to it and to reach its buffer.
type Dest struct {
	LID      uint16
	OutReads uint16 // max outstanding RDMA READs / atomics it accepts
	QPN      uint32 // 24 bits
	PSN      uint32 // 24 bits: the first PSN it sends
	RKey     uint32
	VAddr    uint64 // the remote-access part of its buffer
	GID      [16]byte
	SRQN     uint32
}

// Marshal encodes d as perftest's 108-byte message (KEY_PRINT_FMT_GID):
//
//	%04x:%04x:%06x:%06x:%08x:%016llx: + 16 × %02x: + %08x: + NUL
//
// QPN and PSN are cut to their 24 bits so the message keeps its size.
func (d *Dest) Marshal() []byte {
	var b strings.Builder
	b.Grow(DestSize)
	fmt.Fprintf(&b, "%04x:%04x:%06x:%06x:%08x:%016x:", d.LID, d.OutReads, d.QPN&0xffffff, d.PSN&0xffffff, d.RKey, d.VAddr)
	for _, g := range d.GID {
		fmt.Fprintf(&b, "%02x:", g)
	}
	fmt.Fprintf(&b, "%08x:", d.SRQN)
	b.WriteByte(0)
	return []byte(b.String())
}

// destFields are the widths of the message's colon-separated fields.
var destFields = func() []int {
	w := []int{4, 4, 6, 6, 8, 16}
	for range 16 {
		w = append(w, 2)
	}
	return append(w, 8)
}()

// ParseDest decodes a 108-byte QP-info message. It is strict: every field
// must be hexadecimal of perftest's width, and the message must end with
// ":" and a NUL, so that garbage and truncated messages are reported
// rather than half-parsed.
func ParseDest(msg []byte) (Dest, error) {
	var d Dest
	if len(msg) != DestSize {
		return d, fmt.Errorf("QP info is %d bytes, want %d", len(msg), DestSize)
	}
	text := msg[:DestSize-1]
	if msg[DestSize-1] != 0 || bytes.IndexByte(text, 0) >= 0 {
		return d, fmt.Errorf("QP info %q is not a NUL-terminated string of %d characters", msg, DestSize-1)
	}
	parts := strings.Split(string(text), ":")
	if len(parts) != len(destFields)+1 || parts[len(parts)-1] != "" {
		return d, fmt.Errorf("QP info %q: want %d colon-terminated fields", text, len(destFields))
	}
	v := make([]uint64, len(destFields))
	for i, w := range destFields {
		p := parts[i]
		if len(p) != w {
			return d, fmt.Errorf("QP info %q: field %d is %q, want %d hex digits", text, i+1, p, w)
		}
		n, err := strconv.ParseUint(p, 16, 64)
		if err != nil {
			return d, fmt.Errorf("QP info %q: field %d %q is not hexadecimal", text, i+1, p)
		}
		v[i] = n
	}
	d.LID, d.OutReads, d.QPN, d.PSN = uint16(v[0]), uint16(v[1]), uint32(v[2]), uint32(v[3])
	d.RKey, d.VAddr = uint32(v[4]), v[5]
	for i := range d.GID {
		d.GID[i] = byte(v[6+i])
	}
	d.SRQN = uint32(v[22])
	return d, nil
}
