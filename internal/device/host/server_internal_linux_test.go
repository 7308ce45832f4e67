package host

import (
	"github.com/rnic/rnic"
	"net/netip"
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/rnic/rnic/internal/device"
	"github.com/rnic/rnic/internal/hostif"
	"github.com/rnic/rnic/internal/hw/bus"
	"github.com/rnic/rnic/link/mem"
)

// FuzzHostRequest: any sequence of requests a program sends the host
// interface — each a datagram that parses — gets a reply or ends the
// connection, never a panic; what the program allocated is torn down
// after. (Datagrams that do not parse end the connection before handle.)
func FuzzHostRequest(f *testing.F) {
	req := func(op hostif.Op, fill func(*hostif.Msg)) []byte {
		m := hostif.NewMsg(nil, hostif.Header{Op: op, Seq: 1})
		if fill != nil {
			fill(m)
		}
		b, _ := m.Done()
		return b
	}
	f.Add(req(hostif.OpHello, hostif.Hello), req(hostif.OpAllocPD, nil))
	f.Add(req(hostif.OpAllocPD, nil), req(hostif.OpRegMR, func(m *hostif.Msg) { m.U32(1).U64(0x10000).U64(4096).U64(0).U32(1) }))
	f.Add(req(hostif.OpQueryGID, func(m *hostif.Msg) { m.U8(1).U32(0) }), req(hostif.OpDeregMR, func(m *hostif.Msg) { m.U32(1) }))
	f.Add(req(hostif.OpDeallocPD, func(m *hostif.Msg) { m.U32(1) }), req(hostif.OpQueryPort, func(m *hostif.Msg) { m.U8(1) }))
	f.Add(req(hostif.OpHello, hostif.Hello), req(hostif.OpCreateCompChannel, nil))
	f.Add(req(hostif.OpHello, hostif.Hello), req(hostif.OpCreateCQ, func(m *hostif.Msg) { m.U32(8).U32(0).U64(0) }))
	sw := mem.NewSwitch()
	port, err := sw.Port(netip.MustParseAddr("10.9.9.1"), mem.Faults{})
	if err != nil {
		f.Fatal(err)
	}
	dev, err := rnic.Open(rnic.Options{Link: port})
	if err != nil {
		f.Fatal(err)
	}
	defer dev.Close()
	w := device.DriverOf(dev).(device.Wall)
	s := &server{dev: dev, nic: w.Device, attr: dev.Attr()}
	w.SetDoorbellRecords(&s.db)
	f.Fuzz(func(t *testing.T, a, b []byte) {
		proc, err := bus.OpenProcess(os.Getpid())
		if err != nil {
			t.Skip(err)
		}
		hc := newHostClient(s, os.Getpid(), proc)
		defer hc.teardown()
		out := make([]byte, 0, hostif.MaxMsg)
		for _, m := range [][]byte{a, b, a} {
			h, r, err := hostif.Parse(m)
			if err != nil {
				continue
			}
			reply, _, err := hc.handle(h, r, out)
			for _, fd := range hc.closeAfterReply {
				unix.Close(fd)
			}
			hc.closeAfterReply = hc.closeAfterReply[:0]
			if err != nil {
				return
			}
			if rh, _, err := hostif.Parse(reply); err != nil || rh.Seq != h.Seq || rh.Op != h.Op {
				t.Fatalf("reply %+v, %v to %+v", rh, err, h)
			}
		}
	})
}
