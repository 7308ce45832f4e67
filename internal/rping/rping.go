// Package rping is rping's protocol (rdma-core's
// librdmacm/examples/rping.c) on a connection of package cm, so that Go
// tests connect to Linux's or rnic's rping and it to them. Each
// iteration: the client SENDs the address, rkey and size of its start
// buffer (struct rping_rdma_info, big-endian); the server READs it into
// its own buffer and SENDs "go ahead"; the client SENDs its RDMA
// buffer's, the server WRITEs what it read into it and SENDs again; with
// -V the client checks the buffers are equal.
package rping

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"

	"github.com/rnic/rnic"
	"github.com/rnic/rnic/cm"
)

// Config is rping's connection: one READ outstanding each way, the
// buffers readable and writable by the peer.
var Config = cm.Config{Access: rnic.AccessRemoteRead | rnic.AccessRemoteWrite, ResponderResources: 1, InitiatorDepth: 1,
	Cap: rnic.QPCap{MaxSendWR: 16, MaxRecvWR: 2, MaxSendSGE: 1, MaxRecvSGE: 1}}

const rpingInfoLen = 16

// rpingText fills b as rping's client does for iteration ping.
func rpingText(b []byte, ping int, start *byte) {
	n := copy(b, fmt.Sprintf("rdma-ping-%d: ", ping))
	c := *start
	for i := n; i < len(b); i++ {
		b[i] = c
		if c++; c > 122 {
			c = 65
		}
	}
	if *start++; *start > 122 {
		*start = 65
	}
	b[len(b)-1] = 0
}

// rpingPeer is one side's buffers and QP.
type rpingPeer struct {
	qp         *rnic.QP
	cq         *rnic.CQ
	send, recv *rnic.MR // the rping_rdma_info messages
	start, rb  *rnic.MR // the start and RDMA buffers
}

func newRpingPeer(c *cm.Conn, size int) (*rpingPeer, error) {
	pd := c.QP().PD()
	_, init, err := c.QP().Query()
	if err != nil {
		return nil, err
	}
	p := &rpingPeer{qp: c.QP(), cq: init.SendCQ}
	acc := rnic.AccessLocalWrite | rnic.AccessRemoteRead | rnic.AccessRemoteWrite
	for _, m := range []**rnic.MR{&p.send, &p.recv, &p.start, &p.rb} {
		n := rpingInfoLen
		if m == &p.start || m == &p.rb {
			n = size
		}
		if *m, err = pd.RegMR(make([]byte, n), acc); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func (p *rpingPeer) postRecv() error {
	return p.qp.PostRecv(rnic.RecvWR{WRID: 2, SGL: []rnic.SGE{p.recv.SGE(0, rpingInfoLen)}})
}

// advertise SENDs mr's address, rkey and size.
func (p *rpingPeer) advertise(mr *rnic.MR) error {
	b := p.send.Bytes()
	binary.BigEndian.PutUint64(b[0:], mr.Addr())
	binary.BigEndian.PutUint32(b[8:], mr.RKey())
	binary.BigEndian.PutUint32(b[12:], uint32(mr.Len()))
	return p.qp.PostSend(rnic.SendWR{WRID: 1, Opcode: rnic.WRSend, Flags: rnic.SendSignaled, SGL: []rnic.SGE{p.send.SGE(0, rpingInfoLen)}})
}

// wait waits for the completion of wrid (the other completions, sends
// behind a receive, are taken on the way).
func (p *rpingPeer) wait(ctx context.Context, wrid uint64) (rnic.WC, error) {
	wcs := make([]rnic.WC, 1)
	for {
		if _, err := p.cq.Wait(ctx, wcs); err != nil {
			return rnic.WC{}, err
		}
		if wcs[0].Status != rnic.WCSuccess {
			return wcs[0], fmt.Errorf("completion %+v", wcs[0])
		}
		if wcs[0].WRID == wrid {
			return wcs[0], nil
		}
	}
}

// Client runs count iterations of rping's client on c, checking the
// echo (rping -V).
func Client(ctx context.Context, c *cm.Conn, count, size int) error {
	p, err := newRpingPeer(c, size)
	if err != nil {
		return err
	}
	start := byte(65)
	for ping := range count {
		rpingText(p.start.Bytes(), ping, &start)
		if err := p.postRecv(); err != nil {
			return err
		}
		if err := p.advertise(p.start); err != nil {
			return err
		}
		if _, err := p.wait(ctx, 2); err != nil { // the server read it
			return fmt.Errorf("ping %d: %w", ping, err)
		}
		if err := p.postRecv(); err != nil {
			return err
		}
		if err := p.advertise(p.rb); err != nil {
			return err
		}
		if _, err := p.wait(ctx, 2); err != nil { // the server wrote it back
			return fmt.Errorf("ping %d: %w", ping, err)
		}
		if !bytes.Equal(p.start.Bytes(), p.rb.Bytes()) {
			return fmt.Errorf("ping %d: data mismatch: sent %q, echoed %q", ping, p.start.Bytes(), p.rb.Bytes())
		}
		clear(p.rb.Bytes())
	}
	return nil
}

// Server serves rping's client on c until it has echoed count pings (or,
// with count 0, until the client disconnects); it returns the pings
// served.
func Server(ctx context.Context, c *cm.Conn, count, size int) (int, error) {
	p, err := newRpingPeer(c, size)
	if err != nil {
		return 0, err
	}
	remote := func() (addr uint64, rkey, n uint32) {
		b := p.recv.Bytes()
		return binary.BigEndian.Uint64(b), binary.BigEndian.Uint32(b[8:]), binary.BigEndian.Uint32(b[12:])
	}
	served := 0
	for count == 0 || served < count {
		if err := p.postRecv(); err != nil {
			return served, err
		}
		wctx, cancel := context.WithCancel(ctx)
		go func() {
			select {
			case <-c.Done():
				cancel()
			case <-wctx.Done():
			}
		}()
		_, err := p.wait(wctx, 2)
		if err != nil {
			cancel()
			if count == 0 && c.Err() != nil {
				return served, nil // the client is done
			}
			return served, err
		}
		addr, rkey, n := remote()
		n = min(n, uint32(size))
		if err := p.qp.PostSend(rnic.SendWR{WRID: 3, Opcode: rnic.WRRDMARead, Flags: rnic.SendSignaled,
			SGL: []rnic.SGE{p.rb.SGE(0, int(n))}, RemoteAddr: addr, RKey: rkey}); err != nil {
			cancel()
			return served, err
		}
		if _, err := p.wait(wctx, 3); err != nil {
			cancel()
			return served, err
		}
		if err := p.postRecv(); err != nil {
			cancel()
			return served, err
		}
		if err := p.advertise(p.rb); err != nil { // go ahead
			cancel()
			return served, err
		}
		if _, err := p.wait(wctx, 2); err != nil {
			cancel()
			return served, err
		}
		addr, rkey, n = remote()
		text := p.rb.Bytes()
		l := bytes.IndexByte(text, 0) + 1
		if l <= 0 {
			l = len(text)
		}
		if err := p.qp.PostSend(rnic.SendWR{WRID: 4, Opcode: rnic.WRRDMAWrite, Flags: rnic.SendSignaled,
			SGL: []rnic.SGE{p.rb.SGE(0, min(l, int(n)))}, RemoteAddr: addr, RKey: rkey}); err != nil {
			cancel()
			return served, err
		}
		if _, err := p.wait(wctx, 4); err != nil {
			cancel()
			return served, err
		}
		if err := p.advertise(p.rb); err != nil {
			cancel()
			return served, err
		}
		if _, err := p.wait(wctx, 1); err != nil {
			cancel()
			return served, err
		}
		cancel()
		served++
	}
	return served, nil
}
