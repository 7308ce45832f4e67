package cm

import (
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/rnic/rnic"
	"github.com/rnic/rnic/internal/hostif"
	"github.com/rnic/rnic/link/mem"
	"github.com/rnic/rnic/wire/mad"
)

var fuzzHost struct {
	once sync.Once
	a    *agent
	err  error
}

// FuzzHostCommands: any sequence of commands on a program's CM
// connection (the NIC's control interface for rdma_cm ids) is refused
// with an errno or carried out; nothing panics, and what the NIC holds
// for the program goes when its connection does.
func FuzzHostCommands(f *testing.F) {
	fuzzHost.once.Do(func() {
		pa, _, err := mem.Pipe(netip.MustParseAddr("10.9.0.1"), netip.MustParseAddr("10.9.0.2"), mem.Faults{}, mem.Faults{})
		if err != nil {
			fuzzHost.err = err
			return
		}
		dev, err := rnic.Open(rnic.Options{Link: pa})
		if err != nil {
			fuzzHost.err = err
			return
		}
		fuzzHost.a, fuzzHost.err = agentOf(dev)
	})
	if fuzzHost.err != nil {
		f.Fatal(fuzzHost.err)
	}
	msg := func(op hostif.Op, fill func(*hostif.Msg)) []byte {
		m := hostif.NewMsg(nil, hostif.Header{Op: op})
		fill(m)
		b, _ := m.Done()
		return b
	}
	addr := func(m *hostif.Msg, port uint16) {
		m.U8(4).Fixed(make([]byte, 12)).Fixed([]byte{10, 9, 0, 1}).U16(port)
	}
	seq := [][]byte{
		msg(hostif.OpCMCreateID, func(m *hostif.Msg) { m.U32(1).U16(uint16(mad.PortSpaceTCP)).U8(2).U64(1) }),
		msg(hostif.OpCMBind, func(m *hostif.Msg) { m.U32(1); addr(m, 7000) }),
		msg(hostif.OpCMListen, func(m *hostif.Msg) { m.U32(1).U32(4) }),
		msg(hostif.OpCMResolveAddr, func(m *hostif.Msg) { m.U32(1); addr(m, 0); addr(m, 7000) }),
		msg(hostif.OpCMConnect, func(m *hostif.Msg) { m.U32(1).U32(0x11).U8(1).U8(1).U8(0).U8(7).U8(7).U8(0).Bytes(nil) }),
		msg(hostif.OpCMInitQPAttr, func(m *hostif.Msg) { m.U32(1).U8(2) }),
		msg(hostif.OpCMAccept, func(m *hostif.Msg) { m.U32(1).U32(0x11).U8(1).U8(1).U8(0).U8(7).U8(7).U8(0).Bytes(nil) }),
		msg(hostif.OpCMDisconnect, func(m *hostif.Msg) { m.U32(1) }),
		msg(hostif.OpCMMigrate, func(m *hostif.Msg) { m.U32(1).U32(1) }),
		msg(hostif.OpCMSetOption, func(m *hostif.Msg) { m.U32(1).U32(hostif.CMOptAFOnly).U32(1) }),
		msg(hostif.OpCMSetOption, func(m *hostif.Msg) { m.U32(1).U32(hostif.CMOptReuseAddr).U32(1) }),
		msg(hostif.OpCMBind, func(m *hostif.Msg) { m.U32(1).U8(6).Fixed(make([]byte, 16)).U16(7000) }),
		msg(hostif.OpCMDestroyID, func(m *hostif.Msg) { m.U32(1) }),
	}
	var all []byte
	for _, b := range seq {
		f.Add(b)
		all = append(all, byte(len(b)), byte(len(b)>>8))
		all = append(all, b...)
	}
	f.Add(all)
	f.Fuzz(func(t *testing.T, data []byte) {
		a := fuzzHost.a
		a.mu.Lock()
		h := newHostCM(a)
		ch := &hostChannel{token: 1, pid: 1, dead: true} // events are dropped
		ch.cond = sync.NewCond(&ch.mu)
		h.channels[1] = ch
		ids := map[uint32]*hostID{}
		for len(data) >= 2 {
			n := int(data[0]) | int(data[1])<<8
			data = data[2:]
			n = min(n, len(data))
			hd, r, err := hostif.Parse(data[:n])
			data = data[n:]
			if err != nil {
				continue
			}
			a.m.now = time.Now()
			h.handle(hd, r, ids, 1)
		}
		for _, id := range ids {
			h.destroy(id)
		}
		if len(ids) != 0 {
			t.Errorf("%d ids left after the program's connection closed", len(ids))
		}
		for k, ids := range h.ports {
			t.Errorf("port %v still held by %d ids", k, len(ids))
		}
		for sid, l := range a.m.listeners {
			if p, ok := l.(*hostPort); ok && p.h == h {
				t.Errorf("service %#x still listened on", sid)
			}
		}
		a.mu.Unlock()
	})
}
