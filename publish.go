package rnic

import (
	"fmt"
	"sync"

	"github.com/rnic/rnic/internal/statsrv"
	"github.com/rnic/rnic/internal/transport"
)

// published holds the control socket of each published device. It lives
// beside Device rather than in it, so that publishing stays in this file.
var published = struct {
	sync.Mutex
	m map[*Device]*statsrv.Server
}{m: map[*Device]*statsrv.Server{}}

// Publish makes the device visible to "rnic stat" on this machine until
// the device closes: "rnic stat" shows its counters as "rdma statistic
// show" shows a hardware NIC's, and "rnic stat qp" its QPs as "rdma
// resource show qp" does (QPN, type, state, send and receive PSNs, the
// peer's QPN). Options.Publish does the same from Open.
//
// The device listens on a Unix socket named after it (Name) in
// $XDG_RUNTIME_DIR/rnic, or /tmp/rnic-$UID, readable by this user only;
// Close removes it. A socket left by a process that died is replaced; a
// device of the same name published by a running process is an error.
// Publishing a published device again does nothing.
func (d *Device) Publish() error {
	published.Lock()
	defer published.Unlock()
	// Checked under the lock that Close's unpublish takes, so that a
	// device closing meanwhile leaves no socket behind.
	if err := d.usable(); err != nil {
		return err
	}
	if published.m[d] != nil {
		return nil
	}
	s, err := statsrv.Serve(statSource{d})
	if err != nil {
		return fmt.Errorf("rnic: Publish %s: %w", d.name, err)
	}
	published.m[d] = s
	return nil
}

// unpublish removes the device's control socket, if it has one.
func (d *Device) unpublish() {
	published.Lock()
	s := published.m[d]
	delete(published.m, d)
	published.Unlock()
	if s != nil {
		s.Close()
	}
}

// statSource is what a published device shows.
type statSource struct{ d *Device }

func (s statSource) Name() string { return s.d.name }

func (s statSource) Counters() []statsrv.Counter {
	cs := s.d.Counters()
	out := make([]statsrv.Counter, len(cs))
	for i, c := range cs {
		out[i] = statsrv.Counter{Name: c.Name, Value: c.Value}
	}
	return out
}

// QPs reads every QP's context under the engine lock: the PSNs are where
// the protocol engine has got to, as rxe reports them.
func (s statSource) QPs() []statsrv.QP {
	var res []transport.QPResource
	s.d.d.Engine(func(e *engine) { res = e.QPResources(res) })
	out := make([]statsrv.QP, len(res))
	for i, r := range res {
		out[i] = statsrv.QP{LQPN: r.QPN, Type: r.Type.String(), State: r.State.String(), Port: uint32(r.Port),
			SQPSN: uint32(r.SQPSN), RQPSN: uint32(r.RQPSN), RQPN: r.DestQPN, PDN: r.PD}
	}
	return out
}
