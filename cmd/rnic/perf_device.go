package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"sync/atomic"

	"github.com/rnic/rnic"
	"github.com/rnic/rnic/internal/statsrv"
	"github.com/rnic/rnic/link"
	"github.com/rnic/rnic/link/udp"
	"github.com/rnic/rnic/perftest"
)

// perfLink opens the network port of the device with address addr: a
// link/udp socket on UDP port 4791, so that rnic talks RoCEv2 with any
// other RNIC. It is the only place that chooses the link; tests replace
// it with link/mem.
var perfLink = func(addr netip.Addr, loss float64) (link.Link, error) {
	return udp.Open(udp.Options{Addr: addr, Faults: udp.Faults{Seed: 1, Loss: loss}})
}

// perfDevices opens the devices of a perf run (perftest.Config.Open),
// publishes them to "rnic stat" and owns what comes with each: the
// capture and the trace files.
type perfDevices struct {
	capture *capture // nil without --pcap
	errw    io.Writer
	loss    float64
	traces  []*os.File // RNIC_TRACE files
	// dcqcn is the NICs' congestion control (--dcqcn; nil: none);
	// rxMarkCE the probability that a received ECN-capable frame is
	// marked CE on its way in (--rx-mark-ce), marked counting them.
	dcqcn    *rnic.DCQCN
	rxMarkCE float64
	marked   atomic.Uint64
}

// open opens the device for addr, named rnic_<addr>.
func (p *perfDevices) open(addr netip.Addr) (*rnic.Device, error) {
	inner, err := perfLink(addr, p.loss)
	if err != nil {
		return nil, err
	}
	l := inner
	if p.rxMarkCE > 0 {
		// Under the capture: it records the frames as the NIC gets them,
		// marked, as a tcpdump on the NIC's port behind the switch would.
		l = newMarkCELink(l, p.rxMarkCE, 1, addr, &p.marked)
	}
	if p.capture != nil {
		l = p.capture.wrap(l)
	}
	opts := rnic.Options{Link: l, Name: "rnic_" + addr.String(), DCQCN: p.dcqcn}
	if path := os.Getenv("RNIC_TRACE"); path != "" {
		// A development aid: the protocol engine's debug log (go-back,
		// resends, NAKs, duplicates), one line per event, to a file.
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			inner.Close()
			return nil, fmt.Errorf("RNIC_TRACE: %w", err)
		}
		p.traces = append(p.traces, f)
		opts.Trace = func(s string) { fmt.Fprintln(f, s) }
	}
	dev, err := rnic.Open(opts)
	if err != nil {
		inner.Close()
		return nil, err
	}
	// The run goes on without "rnic stat" if the device cannot be
	// published (another process runs a device of the same name).
	if err := dev.Publish(); err != nil {
		fmt.Fprintf(p.errw, " rnic stat will not see %s: %v\n", dev.Name(), err)
	}
	return dev, nil
}

// printCounters writes the counters of the run's device, as "rnic stat"
// (rdma statistic show) shows them, when Run had opened it: all of them,
// or only those that are not zero. Run takes them just before it closes
// the device.
func printCounters(w io.Writer, res *perftest.Result, all bool) {
	if res == nil || res.Counters == nil {
		return
	}
	var cs []statsrv.Counter
	for _, c := range res.Counters {
		if all || c.Value != 0 {
			cs = append(cs, statsrv.Counter{Name: c.Name, Value: c.Value})
		}
	}
	fmt.Fprintln(w, formatStatLine(res.Device, cs))
}

// close closes the capture and the trace files; the devices are closed
// already (perftest.Run closes its device, and with it its control
// socket).
func (p *perfDevices) close() error {
	var errs []error
	if p.capture != nil {
		errs = append(errs, p.capture.Close())
	}
	for _, f := range p.traces {
		errs = append(errs, f.Close())
	}
	return errors.Join(errs...)
}

// resolveDevice turns -d's argument into the NIC's IP address: an IP
// address, or the name of a network interface whose first IPv4 address
// (else first IPv6 address) is used.
func resolveDevice(s string) (netip.Addr, error) {
	if s == "" {
		return netip.Addr{}, nil
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap(), nil
	}
	ifi, err := net.InterfaceByName(s)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("-d %q is neither an IP address nor a network interface", s)
	}
	addrs, err := ifi.Addrs()
	if err != nil {
		return netip.Addr{}, fmt.Errorf("-d %q: %w", s, err)
	}
	var v6 netip.Addr
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip, ok := netip.AddrFromSlice(ipn.IP)
		if !ok {
			continue
		}
		if ip = ip.Unmap(); ip.Is4() {
			return ip, nil
		}
		if !v6.IsValid() && !ip.IsLinkLocalUnicast() {
			v6 = ip
		}
	}
	if v6.IsValid() {
		return v6, nil
	}
	return netip.Addr{}, fmt.Errorf("-d %q: interface has no usable IP address", s)
}
