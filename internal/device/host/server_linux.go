package host

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/rnic/rnic"
	"github.com/rnic/rnic/internal/device"
	"net"
	"os"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/rnic/rnic/internal/hostif"
	"github.com/rnic/rnic/internal/hw/atu"
	"github.com/rnic/rnic/internal/hw/bus"
	"github.com/rnic/rnic/internal/nic"
	"github.com/rnic/rnic/internal/transport"
)

// verbs are package rnic's calls beyond its public API (device.Host).
var verbs = device.Host.(*device.HostVerbs[*rnic.Device, *rnic.PD, *rnic.MR, *rnic.CQ, *rnic.QP, *rnic.SRQ, *rnic.AH,
	rnic.QPInitAttr, rnic.SRQInitAttr, rnic.Access])

// server is what the host server keeps of one device it serves, for
// every program and every Serve call on it: the programs' doorbell pages,
// which the NIC's engine goroutine scans, and the objects whose async
// events go to a program.
type server struct {
	dev  *rnic.Device
	nic  *nic.Device
	attr rnic.DeviceAttr
	db   doorbells
	objs sync.Map // *rnic.QP, *rnic.CQ, *rnic.SRQ → *hostObj
	refs int      // Serve calls running (under servers.mu)
}

// servers are the devices being served.
var servers struct {
	sync.Mutex
	m map[*rnic.Device]*server
}

// Serve serves other local processes' verbs on dev (the host interface,
// internal/hostif), as the kernel's uverbs serves a device's verbs to
// user space: each connection on ln, a "unixpacket" listener, is a
// program's verbs library. The peer's credentials name the program; only
// processes of this process's user are served. A program's PDs and MRs
// are its own (handles other programs cannot name, PD numbers the NIC's
// protection checks compare), and when its connection closes — it
// exited or crashed — they are torn down as the kernel tears down a
// closed uverbs file. Serve returns when ln fails or is closed, after
// closing every program's connection (and tearing down what each held).
// Serve takes the device's async events (rnic.Device.GetAsyncEvent), to
// route them to the programs; it may run more than once on one device.
func Serve(dev *rnic.Device, ln net.Listener) error {
	if err := verbs.Usable(dev); err != nil {
		return fmt.Errorf("rnic: serving the host: %w", err)
	}
	w, ok := device.DriverOf(dev).(device.Wall)
	if !ok || !w.Features().Processes {
		return errors.New("rnic: serving the host: a virtual-time device serves no other processes")
	}
	servers.Lock()
	s := servers.m[dev]
	if s == nil {
		s = &server{dev: dev, nic: w.Device, attr: dev.Attr()}
		if servers.m == nil {
			servers.m = map[*rnic.Device]*server{}
		}
		servers.m[dev] = s
		s.nic.SetLinkSpin(spinFor)
		// The programs' memory is another process's: a burst's payloads
		// come with one process_vm_readv, and go with one
		// process_vm_writev, not one per packet.
		s.nic.Engine(func(e *transport.Engine) {
			e.SetGatherBurst(gatherBurst)
			e.SetPlaceBurst(placeBurst)
		})
		s.nic.SetDoorbellRecords(&s.db)
	}
	s.refs++
	servers.Unlock()
	defer func() {
		servers.Lock()
		if s.refs--; s.refs == 0 {
			delete(servers.m, dev)
			s.nic.SetDoorbellRecords(nil)
		}
		servers.Unlock()
	}()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.routeEvents(ctx)
	return hostif.Serve(ln, s.serveConn)
}

// kick wakes the NIC's engine goroutine if it sleeps.
func (s *server) kick() { s.nic.Kick() }

// routeEvents sends each of the device's async events to the program
// that owns the QP, CQ or SRQ it concerns, until ctx ends or the device
// closes. (Serve takes the device's events: GetAsyncEvent callers of the
// serving process compete with it.)
func (s *server) routeEvents(ctx context.Context) {
	for {
		ev, err := s.dev.GetAsyncEvent(ctx)
		if err != nil {
			return
		}
		var key any
		switch {
		case ev.QP != nil:
			key = ev.QP
		case ev.CQ != nil:
			key = ev.CQ
		case ev.SRQ != nil:
			key = ev.SRQ
		default:
			continue // port events: rnic's one port never changes
		}
		if v, ok := s.objs.Load(key); ok {
			o := v.(*hostObj)
			o.hc.sendEvent(o, ev.Type)
		}
	}
}

// hostObj is a program's QP, CQ or SRQ as its async events find it.
type hostObj struct {
	hc     *hostClient
	key    any    // the *QP, *CQ or *SRQ
	handle uint32 // the program's handle of it
	cookie uint64 // what the program names it by (its struct's address)
	gone   bool   // destroyed: no more events (under hc.evMu)
}

// watch makes key's async events go to the program, named by handle and
// cookie.
func (hc *hostClient) watch(key any, handle uint32, cookie uint64) *hostObj {
	o := &hostObj{hc: hc, key: key, handle: handle, cookie: cookie}
	hc.s.objs.Store(key, o)
	return o
}

// unwatch ends o's events. Events already sent may still be unread: the
// program drops those of objects it has destroyed (it knows them by
// handle), as the kernel drops a destroyed object's unread events.
func (hc *hostClient) unwatch(o *hostObj) {
	if o == nil {
		return
	}
	hc.s.objs.CompareAndDelete(o.key, o)
	hc.evMu.Lock()
	o.gone = true
	hc.evMu.Unlock()
}

// sendEvent sends an async event to the program. A program that does not
// read its events loses the ones its socket has no room for.
func (hc *hostClient) sendEvent(o *hostObj, t rnic.EventType) {
	hc.evMu.Lock()
	defer hc.evMu.Unlock()
	if o.gone || hc.asyncFD < 0 {
		return
	}
	var b [hostif.AsyncEventLen]byte
	hostif.PutAsyncEvent(b[:], uint32(t), o.handle, o.cookie)
	unix.Write(hc.asyncFD, b[:])
}

// accessOnDemand is IBV_ACCESS_ON_DEMAND. The NIC reaches a program's
// memory through the kernel, which faults pages in as it goes, and pins
// none: every region of another process is on demand, so the flag asks
// for nothing more.
const accessOnDemand = 1 << 6

// hostMR is a program's region and what it was registered with (REREG_MR
// changes some of it).
type hostMR struct {
	mr                 *rnic.MR
	pd                 uint32
	addr, length, iova uint64
	access             uint32
}

// hostClient is one connected program.
type hostClient struct {
	s        *server
	c        *net.UnixConn
	pid      int
	proc     *bus.Process
	pds      map[uint32]*rnic.PD
	mrs      map[uint32]*hostMR
	cqs      map[uint32]*hostCQ
	qps      map[uint32]*hostQP
	channels map[uint32]*hostChannel
	srqs     map[uint32]*hostSRQ
	mws      map[uint32]*rnic.MW
	ahs      map[uint32]*rnic.AH // by number in the NIC's AH table
	next     uint32              // the next handle of an MR, CQ, QP, channel or AH

	closeAfterReply []int // descriptors the reply sends that the NIC does not keep

	mu       sync.Mutex // the data path's queues (queues_linux.go)
	stepMu   sync.Mutex // held by the NIC's scan of the doorbell page: a queue is destroyed between scans
	data     *hostData
	wakeFile *os.File

	access unix.Errno // 0, or why the NIC may not reach the program's memory (HELLO's probe): REG_MR fails with it

	evMu    sync.Mutex // async events: asyncFD and the hostObjs' counts
	asyncFD int        // the NIC's end of the async event socket (-1: none)
}

func (s *server) serveConn(c *net.UnixConn) {
	defer c.Close()
	cred, err := hostif.PeerCred(c)
	if err != nil || int(cred.Uid) != os.Getuid() {
		return // not ours to serve: the connection closes at once
	}
	proc, err := bus.OpenProcess(int(cred.Pid))
	if err != nil {
		return
	}
	hc := newHostClient(s, int(cred.Pid), proc)
	hc.c = c
	defer hc.teardown()
	buf := make([]byte, hostif.MaxMsg+1)
	out := make([]byte, 0, hostif.MaxMsg)
	for {
		n, err := c.Read(buf)
		if err != nil || n == 0 {
			return
		}
		h, r, err := hostif.Parse(buf[:n])
		if err != nil {
			return // a malformed message ends the program's connection, nobody else's
		}
		reply, fds, err := hc.handle(h, r, out)
		if err != nil {
			return
		}
		var oob []byte
		if len(fds) > 0 {
			oob = unix.UnixRights(fds...)
		}
		_, _, err = c.WriteMsgUnix(reply, oob, nil)
		for _, fd := range hc.closeAfterReply {
			unix.Close(fd)
		}
		hc.closeAfterReply = hc.closeAfterReply[:0]
		if err != nil {
			return
		}
	}
}

func newHostClient(s *server, pid int, proc *bus.Process) *hostClient {
	return &hostClient{s: s, pid: pid, proc: proc, pds: map[uint32]*rnic.PD{}, mrs: map[uint32]*hostMR{},
		cqs: map[uint32]*hostCQ{}, qps: map[uint32]*hostQP{}, channels: map[uint32]*hostChannel{}, srqs: map[uint32]*hostSRQ{},
		mws: map[uint32]*rnic.MW{}, ahs: map[uint32]*rnic.AH{}, asyncFD: -1}
}

// teardown releases everything the program held, as the kernel does
// when a uverbs file closes: its doorbell page's scan, its QPs (flushed: their peers
// see them gone), CQs, regions (their bus mappings of its memory with
// them), PDs, then its process handle.
func (hc *hostClient) teardown() {
	hc.stopPoller()
	// The queues first, then their rings: the engine reads a ring until
	// its queue is destroyed. (A destroy that fails leaves its ring
	// mapped: a leak, never a read of unmapped memory.)
	for _, h := range hc.qps {
		hc.unwatch(h.obj)
		if h.qp.Destroy() == nil {
			h.sq.close()
			h.rq.mem.close()
		}
	}
	for _, s := range hc.srqs {
		hc.unwatch(s.obj)
		if s.srq.Destroy() == nil {
			s.ring.mem.close()
		}
	}
	for _, c := range hc.cqs {
		hc.unwatch(c.obj)
		if c.cq.Destroy() == nil {
			c.ring.close()
		}
	}
	for _, ah := range hc.ahs {
		ah.Destroy()
	}
	for _, mw := range hc.mws {
		mw.Dealloc()
	}
	for _, m := range hc.mrs {
		mr := m.mr
		mr.Dereg()
	}
	for _, pd := range hc.pds {
		pd.Dealloc()
	}
	hc.unmapData()
	hc.proc.Close()
}

// handle runs one request and returns the reply, built in out. An error
// ends the connection (a message that parses but is not a request this
// side understands).
func (hc *hostClient) handle(h hostif.Header, r *hostif.Reader, out []byte) ([]byte, []int, error) {
	rep := hostif.NewMsg(out, hostif.Header{Op: h.Op, Seq: h.Seq})
	fail := func(errno unix.Errno) ([]byte, []int, error) {
		b, err := hostif.NewMsg(out, hostif.Header{Op: h.Op, Seq: h.Seq, Errno: int32(errno)}).Done()
		return b, nil, err
	}
	var fds []int
	d := hc.s.dev
	switch h.Op {
	case hostif.OpHello:
		if r.U32() != hostif.Version {
			return fail(unix.EPROTO) // another version's fields are not read
		}
		probe := r.U64()
		if r.End() != nil {
			return fail(unix.EINVAL)
		}
		// The kernel must let the NIC reach the program's memory
		// (process_vm_readv): checked now, so that a program the NIC
		// cannot serve learns it at once, not at its first transfer as
		// a QP in error. Queries need no access (ibv_devinfo lists
		// every NIC, even those Yama keeps out); registering memory
		// does, and fails with what the probe found.
		var w [8]byte
		hc.access = 0
		if err := hc.proc.Read(probe, w[:]); errors.Is(err, bus.ErrNoAccess) {
			hc.access = unix.EACCES
		} else if err != nil || binary.LittleEndian.Uint64(w[:]) != hostif.ProbeWord {
			hc.access = unix.EFAULT
		}
		if hc.data == nil {
			if err := hc.startData(); err != nil {
				return fail(unix.ENOMEM)
			}
		}
		fds2, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return fail(unix.ENOMEM)
		}
		unix.SetNonblock(fds2[0], true)
		hc.evMu.Lock()
		if hc.asyncFD >= 0 {
			unix.Close(hc.asyncFD) // a second HELLO: the events go to the new socket
		}
		hc.asyncFD = fds2[0]
		hc.evMu.Unlock()
		hc.closeAfterReply = append(hc.closeAfterReply, fds2[1])
		rep.U32(hostif.Version).Bytes([]byte(d.Name())).U32(uint32(hc.access))
		fds = []int{hc.data.db.fd, hc.data.wakeFD, fds2[1]}
	case hostif.OpQueryDevice:
		if r.End() != nil {
			return fail(unix.EINVAL)
		}
		a := d.Attr()
		rep.U64(a.MaxMRSize).U64(a.PageSizeCap)
		for _, v := range []int{a.MaxQP, a.MaxQPWR, a.MaxSGE, a.MaxCQ, a.MaxCQE, a.MaxMR, a.MaxPD,
			a.MaxQPRdAtom, a.MaxQPInitRdAtom, a.MaxSRQ, a.MaxSRQWR, a.MaxSRQSGE, a.MaxInlineData} {
			rep.U32(uint32(v))
		}
		rep.U8(uint8(a.AtomicCap)).Bytes([]byte(a.FWVer))
	case hostif.OpQueryPort:
		port := r.U8()
		if r.End() != nil || port != 1 {
			return fail(unix.EINVAL)
		}
		a := d.Attr()
		rep.U8(uint8(a.ActiveMTU)).U64(a.MaxMsgSize).U32(uint32(a.GIDTableLen)).U8(uint8(a.ActiveSpeed)).U8(uint8(a.ActiveWidth))
	case hostif.OpQueryGID:
		port, idx := r.U8(), r.U32()
		if r.End() != nil || port != 1 || idx >= uint32(hc.s.attr.GIDTableLen) {
			return fail(unix.EINVAL)
		}
		g, _ := d.GID(int(idx))     // an empty entry: the zero GID, as the kernel's
		t, _ := d.GIDType(int(idx)) // and type 0
		rep.Fixed(g[:]).U32(uint32(t))
	case hostif.OpAllocPD:
		if r.End() != nil {
			return fail(unix.EINVAL)
		}
		pd, err := d.AllocPD()
		if err != nil {
			return fail(errnoOf(err))
		}
		hc.pds[pd.Handle()] = pd
		rep.U32(pd.Handle())
	case hostif.OpDeallocPD:
		h := r.U32()
		pd := hc.pds[h]
		if r.End() != nil || pd == nil {
			return fail(unix.EINVAL)
		}
		if err := pd.Dealloc(); err != nil {
			return fail(errnoOf(err))
		}
		delete(hc.pds, h)
	case hostif.OpRegMR:
		pdh, addr, length, iova, acc := r.U32(), r.U64(), r.U64(), r.U64(), r.U32()
		pd := hc.pds[pdh]
		if r.End() != nil || pd == nil {
			return fail(unix.EINVAL)
		}
		if hc.access != 0 {
			return fail(hc.access) // the kernel keeps the NIC out of the program's memory (HELLO's probe)
		}
		// ibv_reg_mr(pd, NULL, SIZE_MAX, IBV_ACCESS_ON_DEMAND): implicit
		// on-demand paging, the program's whole address space.
		implicit := addr == 0 && iova == 0 && length == atu.ImplicitLength && acc&accessOnDemand != 0
		acc &^= accessOnDemand // every region of a program is on demand
		mr, err := verbs.RegProcess(pd, hc.proc, addr, length, iova, rnic.Access(acc), implicit)
		if err != nil {
			return fail(errnoOf(err))
		}
		hc.next++
		hc.mrs[hc.next] = &hostMR{mr: mr, pd: pdh, addr: addr, length: length, iova: iova, access: acc}
		rep.U32(hc.next).U32(mr.LKey()).U32(mr.RKey())
	case hostif.OpReregMR:
		// ibv_rereg_mr: the region changes in place, keeping its keys
		// (as mlx5's do; programs written for it keep using them); if it
		// fails the region is as it was.
		h, flags, pdh, addr, length, iova, acc := r.U32(), r.U32(), r.U32(), r.U64(), r.U64(), r.U64(), r.U32()
		m := hc.mrs[h]
		if r.End() != nil || m == nil || flags == 0 || flags&^uint32(hostif.ReregMRFlags) != 0 {
			return fail(unix.EINVAL)
		}
		n := *m
		if flags&hostif.ReregChangePD != 0 {
			n.pd = pdh
		}
		if flags&hostif.ReregChangeTranslation != 0 {
			n.addr, n.length, n.iova = addr, length, iova
		}
		if flags&hostif.ReregChangeAccess != 0 {
			n.access = acc &^ accessOnDemand
		}
		pd := hc.pds[n.pd]
		if pd == nil {
			return fail(unix.EINVAL)
		}
		if err := verbs.ReregProcess(m.mr, pd, hc.proc, n.addr, n.length, n.iova, rnic.Access(n.access)); err != nil {
			return fail(errnoOf(err)) // windows bound to it: EBUSY
		}
		*m = n
		rep.U32(m.mr.LKey()).U32(m.mr.RKey())
	case hostif.OpDeregMR:
		h := r.U32()
		m := hc.mrs[h]
		if r.End() != nil || m == nil {
			return fail(unix.EINVAL)
		}
		if err := m.mr.Dereg(); err != nil {
			return fail(errnoOf(err))
		}
		delete(hc.mrs, h)
	case hostif.OpAllocMW:
		pdh, typ := r.U32(), r.U8()
		pd := hc.pds[pdh]
		if r.End() != nil || pd == nil || (typ != uint8(rnic.MWType1) && typ != uint8(rnic.MWType2)) {
			return fail(unix.EINVAL)
		}
		mw, err := pd.AllocMW(rnic.MWType(typ))
		if err != nil {
			return fail(errnoOf(err))
		}
		hc.next++
		hc.mws[hc.next] = mw
		rep.U32(hc.next).U32(mw.RKey())
	case hostif.OpDeallocMW:
		h := r.U32()
		mw := hc.mws[h]
		if r.End() != nil || mw == nil {
			return fail(unix.EINVAL)
		}
		if err := mw.Dealloc(); err != nil {
			return fail(errnoOf(err))
		}
		delete(hc.mws, h)
	case hostif.OpCreateAH:
		pdh := r.U32()
		var a rnic.AHAttr
		copy(a.DGID[:], r.Fixed(16))
		a.SGIDIndex, a.FlowLabel, a.HopLimit, a.TrafficClass, a.SL, a.PortNum = r.U8(), r.U32(), r.U8(), r.U8(), r.U8(), 1
		hc.mu.Lock()
		pd := hc.pds[pdh]
		hc.mu.Unlock()
		if r.End() != nil || pd == nil {
			return fail(unix.EINVAL)
		}
		ah, err := pd.CreateAH(a)
		if err != nil {
			return fail(errnoOf(err))
		}
		// The handle is the AH's number in the NIC's AH table, which the
		// program's UD WQEs name and the engine looks up (checking that
		// it is in the QP's protection domain: another program's AHs are
		// in PDs of its own).
		n := verbs.AHNum(ah)
		hc.ahs[n] = ah
		rep.U32(n)
	case hostif.OpDestroyAH:
		h := r.U32()
		ah := hc.ahs[h]
		if r.End() != nil || ah == nil {
			return fail(unix.EINVAL)
		}
		delete(hc.ahs, h)
		ah.Destroy()
	case hostif.OpCreateCQ, hostif.OpDestroyCQ, hostif.OpCreateQP, hostif.OpModifyQP, hostif.OpDestroyQP,
		hostif.OpCreateCompChannel, hostif.OpDestroyCompChannel, hostif.OpCreateSRQ, hostif.OpDestroySRQ, hostif.OpArmSRQ,
		hostif.OpQueryQP, hostif.OpQuerySRQ, hostif.OpResizeCQ:
		if hc.data == nil {
			return fail(unix.EPROTO) // the queues live in the pages HELLO hands out
		}
		errno, f := hc.queueOp(h.Op, r, rep)
		if errno != 0 {
			return fail(errno)
		}
		fds = f
	default:
		return fail(unix.EOPNOTSUPP)
	}
	b, err := rep.Done()
	return b, fds, err
}

// errnoOf maps a verb's error to the errno libibverbs returns for it.
func errnoOf(err error) unix.Errno {
	switch {
	case errors.Is(err, rnic.ErrBusy):
		return unix.EBUSY
	case errors.Is(err, rnic.ErrClosed):
		return unix.ENODEV
	case errors.Is(err, bus.ErrNoAccess):
		return unix.EACCES
	}
	return unix.EINVAL
}
