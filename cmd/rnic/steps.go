package main

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/rnic/rnic"
	"github.com/rnic/rnic/link/mem"
)

// steps returns the demo's operations, in order.
func (d *demo) steps() []step {
	n := size(d.cfg.size)
	return []step{
		{"RDMA WRITE: rnic0 writes " + n + " into rnic1's memory",
			"rnic1's NIC checks the rkey and places the data in the registered region;\n" +
				"rnic1 posts nothing and gets no completion: its CPU is not involved.", (*demo).write},
		{"RDMA WRITE WITH IMMEDIATE: the same, plus 32 bits that wake the target",
			"The data lands like a WRITE; the immediate value consumes a receive rnic1\n" +
				"posted and raises a completion there, so rnic1 learns the data arrived.", (*demo).writeImm},
		{"RDMA READ: rnic0 reads " + n + " from rnic1's memory",
			"One request packet; rnic1's NIC answers with READ RESPONSE packets from its\n" +
				"memory, again without rnic1's CPU.", (*demo).read},
		{"SEND / RECV: a message into a buffer the receiver chose",
			"rnic1 posts a receive buffer; rnic0's SEND fills it. Both sides get a completion.", (*demo).send},
		{"SEND WITH IMMEDIATE: a message plus 32 bits in the receive completion",
			"", (*demo).sendImm},
		{"ATOMIC FETCH_AND_ADD on a 64-bit counter in rnic1's memory",
			"rnic1's NIC adds atomically and returns the value it found.", (*demo).fetchAdd},
		{"ATOMIC COMPARE_AND_SWAP on the same counter",
			"rnic1's NIC swaps only if the counter holds the expected value, and returns\n" +
				"what it found either way.", (*demo).compareSwap},
		{fmt.Sprintf("Losing packets: a %s RDMA WRITE over a wire that drops %g %% of frames", size(lossSize), 100*d.cfg.loss),
			"The responder NAKs the first PSN it missed (PSN sequence error) and the\n" +
				"requester goes back to it; a lost tail is resent when the ACK timer fires.", (*demo).lossyWrite},
	}
}

// fill writes a pattern that differs per step into b.
func fill(b []byte, stepSeed byte) {
	for i := range b {
		b[i] = byte(i) ^ byte(i>>8)*31 ^ stepSeed
	}
}

// checkBytes compares what arrived with what was sent.
func checkBytes(got, want []byte, where string) (string, error) {
	if len(got) != len(want) {
		return "", fmt.Errorf("%s: %d bytes, want %d", where, len(got), len(want))
	}
	if i := firstDiff(got, want); i >= 0 {
		return "", fmt.Errorf("%s: byte %d is %#02x, want %#02x", where, i, got[i], want[i])
	}
	return fmt.Sprintf("%s: all %s match", where, size(len(want))), nil
}

// firstDiff returns the index of the first byte where two slices of the
// same length differ, or -1.
func firstDiff(a, b []byte) int {
	if bytes.Equal(a, b) {
		return -1
	}
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

// writeTo posts an RDMA WRITE (with immediate if imm) of the step's size
// from rnic0's data area to rnic1's, filled and cleared first, and checks
// the requester's completion and the bytes.
func (d *demo) writeTo(seed byte, n int, op rnic.WROpcode, imm uint32) ([]string, error) {
	a, b := d.nics[0], d.nics[1]
	fill(a.buf[:n], seed)
	clear(b.buf[:n])
	wr := rnic.SendWR{WRID: uint64(seed), Opcode: op, Flags: rnic.SendSignaled, ImmData: imm,
		SGL: []rnic.SGE{a.mr.SGE(0, n)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()}
	if err := a.qp.PostSend(wr); err != nil {
		return nil, err
	}
	wcs, err := a.wait(d.ctx, 1)
	if err != nil {
		return nil, err
	}
	var out []string
	if err := expectWC(&wcs[0], wr.WRID, rnic.WCRDMAWrite); err != nil {
		return nil, err
	}
	out = append(out, "rnic0 completion: "+describeWC(&wcs[0]))
	res, err := checkBytes(b.buf[:n], a.buf[:n], "rnic1's memory")
	if err != nil {
		return out, err
	}
	return append(out, res), nil
}

// expectWC checks a completion's work request ID and opcode.
func expectWC(wc *rnic.WC, wrid uint64, op rnic.WCOpcode) error {
	if wc.WRID != wrid || wc.Opcode != op {
		return fmt.Errorf("completion %s, want wr_id=%d opcode=%s", describeWC(wc), wrid, op)
	}
	return nil
}

func (d *demo) write() ([]string, error) {
	return d.writeTo(1, d.cfg.size, rnic.WRRDMAWrite, 0)
}

const (
	writeImm = 0x1234abcd
	sendImm  = 0xcafe0042
)

func (d *demo) writeImm() ([]string, error) {
	b := d.nics[1]
	const wrid = 20
	if err := b.qp.PostRecv(rnic.RecvWR{WRID: wrid}); err != nil {
		return nil, err
	}
	out, err := d.writeTo(2, d.cfg.size, rnic.WRRDMAWriteWithImm, writeImm)
	if err != nil {
		return out, err
	}
	wcs, err := b.wait(d.ctx, 1)
	if err != nil {
		return out, err
	}
	wc := &wcs[0]
	if err := expectWC(wc, wrid, rnic.WCRecvRDMAWithImm); err != nil {
		return out, err
	}
	if wc.Flags&rnic.WCWithImm == 0 || wc.ImmData != writeImm || int(wc.ByteLen) != d.cfg.size {
		return out, fmt.Errorf("rnic1 completion %s, want imm=%#x byte_len=%d", describeWC(wc), writeImm, d.cfg.size)
	}
	return append(out, "rnic1 completion: "+describeWC(wc)), nil
}

func (d *demo) read() ([]string, error) {
	a, b := d.nics[0], d.nics[1]
	n := d.cfg.size
	fill(b.buf[:n], 3)
	clear(a.buf[:n])
	wr := rnic.SendWR{WRID: 3, Opcode: rnic.WRRDMARead, Flags: rnic.SendSignaled,
		SGL: []rnic.SGE{a.mr.SGE(0, n)}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()}
	if err := a.qp.PostSend(wr); err != nil {
		return nil, err
	}
	wcs, err := a.wait(d.ctx, 1)
	if err != nil {
		return nil, err
	}
	if err := expectWC(&wcs[0], wr.WRID, rnic.WCRDMARead); err != nil {
		return nil, err
	}
	out := []string{"rnic0 completion: " + describeWC(&wcs[0])}
	res, err := checkBytes(a.buf[:n], b.buf[:n], "rnic0's memory")
	if err != nil {
		return out, err
	}
	return append(out, res), nil
}

// sendMessage sends msg from rnic0 into a receive buffer rnic1 posted
// and checks both completions and the message.
func (d *demo) sendMessage(msg string, op rnic.WROpcode, imm uint32) ([]string, error) {
	a, b := d.nics[0], d.nics[1]
	base := d.dataLen()
	const rwrid = 40
	clear(b.buf[base+msgOff : base+msgOff+msgLen])
	if err := b.qp.PostRecv(rnic.RecvWR{WRID: rwrid, SGL: []rnic.SGE{b.mr.SGE(base+msgOff, msgLen)}}); err != nil {
		return nil, err
	}
	copy(a.buf[base+msgOff:], msg)
	wr := rnic.SendWR{WRID: 4, Opcode: op, Flags: rnic.SendSignaled, ImmData: imm,
		SGL: []rnic.SGE{a.mr.SGE(base+msgOff, len(msg))}}
	if err := a.qp.PostSend(wr); err != nil {
		return nil, err
	}
	wcs, err := a.wait(d.ctx, 1)
	if err != nil {
		return nil, err
	}
	if err := expectWC(&wcs[0], wr.WRID, rnic.WCSend); err != nil {
		return nil, err
	}
	out := []string{"rnic0 completion: " + describeWC(&wcs[0])}
	if wcs, err = b.wait(d.ctx, 1); err != nil {
		return out, err
	}
	wc := &wcs[0]
	if err := expectWC(wc, rwrid, rnic.WCRecv); err != nil {
		return out, err
	}
	withImm := wc.Flags&rnic.WCWithImm != 0
	if int(wc.ByteLen) != len(msg) || withImm != (op == rnic.WRSendWithImm) || withImm && wc.ImmData != imm {
		return out, fmt.Errorf("rnic1 completion %s, want byte_len=%d", describeWC(wc), len(msg))
	}
	out = append(out, "rnic1 completion: "+describeWC(wc))
	got := b.buf[base+msgOff : base+msgOff+int(wc.ByteLen)]
	if string(got) != msg {
		return out, fmt.Errorf("rnic1 received %q, want %q", got, msg)
	}
	return append(out, fmt.Sprintf("rnic1's buffer holds %q", got)), nil
}

func (d *demo) send() ([]string, error) {
	return d.sendMessage("Hello rnic1, this is rnic0 speaking RoCEv2.", rnic.WRSend, 0)
}

func (d *demo) sendImm() ([]string, error) {
	return d.sendMessage("A SEND WITH IMMEDIATE also carries 32 bits.", rnic.WRSendWithImm, sendImm)
}

// Values of the atomic steps.
const (
	counterStart = 100
	addend       = 5
	swapValue    = 7
)

// atomic posts one atomic operation from rnic0 on rnic1's counter and
// returns the original value it fetched.
func (d *demo) atomic(op rnic.WROpcode, wcop rnic.WCOpcode, cmpAdd, swap uint64) (uint64, []string, error) {
	a, b := d.nics[0], d.nics[1]
	off := d.dataLen() + atomicOff
	binary.NativeEndian.PutUint64(a.buf[off:], 0xdeadbeef) // overwritten by the result
	wr := rnic.SendWR{WRID: 6, Opcode: op, Flags: rnic.SendSignaled, SGL: []rnic.SGE{a.mr.SGE(off, 8)},
		RemoteAddr: b.mr.Addr() + uint64(off), RKey: b.mr.RKey(), CompareAdd: cmpAdd, Swap: swap}
	if err := a.qp.PostSend(wr); err != nil {
		return 0, nil, err
	}
	wcs, err := a.wait(d.ctx, 1)
	if err != nil {
		return 0, nil, err
	}
	if err := expectWC(&wcs[0], wr.WRID, wcop); err != nil {
		return 0, nil, err
	}
	return binary.NativeEndian.Uint64(a.buf[off:]), []string{"rnic0 completion: " + describeWC(&wcs[0])}, nil
}

// counter returns rnic1's atomic counter.
func (d *demo) counter() []byte {
	off := d.dataLen() + atomicOff
	return d.nics[1].buf[off : off+8]
}

func (d *demo) fetchAdd() ([]string, error) {
	binary.NativeEndian.PutUint64(d.counter(), counterStart)
	orig, out, err := d.atomic(rnic.WRAtomicFetchAndAdd, rnic.WCFetchAdd, addend, 0)
	if err != nil {
		return out, err
	}
	now := binary.NativeEndian.Uint64(d.counter())
	if orig != counterStart || now != counterStart+addend {
		return out, fmt.Errorf("counter %d + %d: fetched %d, counter now %d", counterStart, addend, orig, now)
	}
	return append(out, fmt.Sprintf("counter was %d, rnic0 added %d: rnic0 got back %d, rnic1's counter is now %d",
		counterStart, addend, orig, now)), nil
}

func (d *demo) compareSwap() ([]string, error) {
	start := binary.NativeEndian.Uint64(d.counter())
	var out []string
	// The first compare matches and swaps; the second, expecting the old
	// value again, fails and leaves the counter alone.
	for _, c := range []struct {
		cmp     uint64
		swapped bool
	}{{start, true}, {start, false}} {
		before := binary.NativeEndian.Uint64(d.counter())
		orig, wcOut, err := d.atomic(rnic.WRAtomicCmpAndSwp, rnic.WCCompSwap, c.cmp, swapValue)
		out = append(out, wcOut...)
		if err != nil {
			return out, err
		}
		now := binary.NativeEndian.Uint64(d.counter())
		want := before
		if c.swapped {
			want = swapValue
		}
		if orig != before || now != want {
			return out, fmt.Errorf("CAS(compare %d, swap %d) on %d: fetched %d, counter now %d, want %d",
				c.cmp, swapValue, before, orig, now, want)
		}
		verdict := "equal: swapped"
		if !c.swapped {
			verdict = "not equal: left alone"
		}
		out = append(out, fmt.Sprintf("compare %d, swap %d: counter was %d (%s), rnic1's counter is now %d",
			c.cmp, swapValue, orig, verdict, now))
	}
	return out, nil
}

func (d *demo) lossyWrite() ([]string, error) {
	for _, n := range d.nics {
		if err := n.port.SetFaults(mem.Faults{Seed: 1, Loss: d.cfg.loss}); err != nil {
			return nil, err
		}
	}
	out, err := d.writeTo(8, lossSize, rnic.WRRDMAWrite, 0)
	for _, n := range d.nics {
		if ferr := n.port.SetFaults(mem.Faults{}); err == nil && ferr != nil {
			err = ferr
		}
	}
	if err != nil {
		return out, err
	}
	return append(out, "loss turned off again"), nil
}
