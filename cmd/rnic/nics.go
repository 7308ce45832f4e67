package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"

	"github.com/rnic/rnic"
	"github.com/rnic/rnic/link/mem"
	"github.com/rnic/rnic/link/sniff"
	"github.com/rnic/rnic/wire/pcap"
)

// nic is one side of the demo: a device and the verbs objects on it.
type nic struct {
	name string
	port *mem.Port
	dev  *rnic.Device
	pd   *rnic.PD
	buf  []byte // registered memory: data, then the message and atomic areas
	mr   *rnic.MR
	cq   *rnic.CQ
	qp   *rnic.QP
	psn  rnic.PSN // first PSN the QP sends
}

// Layout of each NIC's registered memory after the data area.
const (
	msgOff    = 0    // SEND / RECV messages
	msgLen    = 1024 // room for one message
	atomicOff = 2048 // 8-byte aligned atomic target / result
	tailLen   = 4096
)

// Connection parameters. Timeout 12 is 4.096 µs × 2^12 ≈ 17 ms: short
// enough for the loss step to recover quickly from a lost tail, long
// enough not to fire while a healthy operation runs.
const ackTimeout = 12

// demo is the state of one run.
type demo struct {
	ctx  context.Context
	cfg  demoConfig
	out  io.Writer
	pcap *pcap.Writer
	nics [2]*nic
	tap  *tap
}

// dataLen is the size of each NIC's data area.
func (d *demo) dataLen() int { return max(d.cfg.size, lossSize) }

// setup opens both NICs on a sniffed mem.Pipe and connects their QPs.
func (d *demo) setup() error {
	addrs := [2]netip.Addr{netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")}
	pa, pb, err := mem.Pipe(addrs[0], addrs[1], mem.Faults{}, mem.Faults{})
	if err != nil {
		return err
	}
	ports := [2]*mem.Port{pa, pb}
	d.tap = newTap(d.cfg.quiet, ports)
	mtu, _ := rnic.MTUFromBytes(d.cfg.mtu)
	psns := [2]rnic.PSN{1000, 7000}
	for i, port := range ports {
		n := &nic{name: fmt.Sprintf("rnic%d", i), port: port, psn: psns[i]}
		d.nics[i] = n
		opts := sniff.Options{Func: d.tap.observer(i)}
		if i == 0 && d.pcap != nil { // a nil *pcap.Writer in the interface would be a writer
			opts.Pcap = d.pcap
		}
		n.dev, err = rnic.Open(rnic.Options{Link: sniff.New(port, opts), Name: n.name, MTU: mtu})
		if err != nil {
			for _, p := range ports[i:] { // not yet owned by a device
				p.Close()
			}
			return err
		}
		if err := n.create(d.dataLen() + tailLen); err != nil {
			return fmt.Errorf("%s: %w", n.name, err)
		}
	}
	a, b := d.nics[0], d.nics[1]
	// The demo's peers WRITE, READ and run atomics on each other's
	// memory: each QP grants the three remote rights (none by default).
	remote := rnic.AccessRemoteWrite | rnic.AccessRemoteRead | rnic.AccessRemoteAtomic
	pa0 := rnic.ConnParams{MTU: mtu, PSN: a.psn, Timeout: ackTimeout, Access: remote}
	pb0 := rnic.ConnParams{MTU: mtu, PSN: b.psn, Timeout: ackTimeout, Access: remote}
	if err := a.qp.Connect(b.qp.Endpoint(pb0), pa0); err != nil {
		return err
	}
	return b.qp.Connect(a.qp.Endpoint(pa0), pb0)
}

// create allocates the NIC's PD, memory region, CQ and RC QP.
func (n *nic) create(memLen int) error {
	var err error
	if n.pd, err = n.dev.AllocPD(); err != nil {
		return err
	}
	n.buf = make([]byte, memLen)
	all := rnic.AccessLocalWrite | rnic.AccessRemoteWrite | rnic.AccessRemoteRead | rnic.AccessRemoteAtomic
	if n.mr, err = n.pd.RegMR(n.buf, all); err != nil {
		return err
	}
	if n.cq, err = n.dev.CreateCQ(64); err != nil {
		return err
	}
	n.qp, err = n.pd.CreateQP(rnic.QPInitAttr{
		Type: rnic.RC, SendCQ: n.cq, RecvCQ: n.cq,
		Cap: rnic.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1},
	})
	return err
}

// close closes both devices, which closes their links.
func (d *demo) close() error {
	var errs []error
	for _, n := range d.nics {
		if n != nil && n.dev != nil {
			errs = append(errs, n.dev.Close())
		}
	}
	return errors.Join(errs...)
}

// printIntro shows what was set up and how to read the packet lines.
func (d *demo) printIntro() {
	a, b := d.nics[0], d.nics[1]
	fmt.Fprintf(d.out, `rnic demo: two software RDMA NICs in one process, joined by an in-process wire.

  %s %v, QP %#06x  ◀────── wire ──────▶  %s %v, QP %#06x

Set-up, as any verbs program does it: on each NIC a protection domain (PD),
%s of registered memory (MR), a completion queue (CQ) and a reliable-
connection queue pair (QP); the QPs are connected (RESET → INIT → RTR → RTS)
with path MTU %d, %s sending from PSN %d and %s from PSN %d.

Packet lines: number, seconds since the operation's first packet, source →
destination, opcode, destination QP, PSN, ACK-request bit, payload length,
then the extension headers (RETH: remote address, key and length of an RDMA
operation; AETH: the responder's ACK or NAK).
`, a.name, a.port.Addr(), a.qp.QPN(), b.name, b.port.Addr(), b.qp.QPN(),
		size(len(a.buf)-tailLen), d.cfg.mtu, a.name, a.psn, b.name, b.psn)
}

// wait waits for n completions on the NIC's CQ and checks that each
// succeeded.
func (n *nic) wait(ctx context.Context, count int) ([]rnic.WC, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	wcs := make([]rnic.WC, count)
	for got := 0; got < count; {
		k, err := n.cq.Wait(ctx, wcs[got:])
		if err != nil {
			return nil, fmt.Errorf("%s: waiting for a completion: %w", n.name, err)
		}
		got += k
	}
	for _, wc := range wcs {
		if wc.Status != rnic.WCSuccess {
			return nil, fmt.Errorf("%s completion: %s", n.name, describeWC(&wc))
		}
	}
	return wcs, nil
}

// describeWC prints a completion's interesting fields.
func describeWC(wc *rnic.WC) string {
	s := fmt.Sprintf("wr_id=%d status=%s opcode=%s", wc.WRID, wc.Status, wc.Opcode)
	if wc.Opcode&rnic.WCRecv != 0 {
		s += fmt.Sprintf(" byte_len=%d", wc.ByteLen)
	}
	if wc.Flags&rnic.WCWithImm != 0 {
		s += fmt.Sprintf(" imm=%#x", wc.ImmData)
	}
	return s
}
