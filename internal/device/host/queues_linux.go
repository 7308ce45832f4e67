package host

import (
	"encoding/binary"
	"errors"
	"github.com/rnic/rnic"
	"os"
	"runtime"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rnic/rnic/internal/hostif"
	"github.com/rnic/rnic/internal/nic"
	"github.com/rnic/rnic/internal/queue"
	"github.com/rnic/rnic/internal/transport"
)

// The host interface's data path: a program's queues are rings in shared
// memory (internal/queue's formats) that the NIC creates and seals, so
// that a program cannot shrink them under the NIC. The rings are the
// engine's queues (transport.RingMem, transport.CQMem): the engine reads
// WQEs from the program's send and receive rings and writes CQEs into
// its CQ rings itself. The program writes WQEs and a producer index into
// its doorbell page, a doorbell record per queue; the NIC's engine
// goroutine scans the records of every program it serves (hostDoorbells,
// a nic.DoorbellRecords) on each turn and while it spins, and rings the
// engine's doorbell of each queue whose producer index moved. While work
// comes, it spins (no system call on either side); idle for spinFor, it
// marks every program's page asleep, scans once more, and parks until a
// program writes its wake-up eventfd (which it does only when it sees
// the NIC asleep), or a frame or a timer needs it.

// Doorbell page: word 0 is the NIC's state (queue.NICRunning, ...), the
// objects' words follow.
const (
	dbPageSize  = 4096
	dbStateWord = 0
)

// spinFor is how long the engine goroutine of a NIC that serves
// programs spins after a turn that did work, scanning the doorbell
// records and polling its link, before it parks. On a machine of two
// cores or fewer the programs' own busy-polling threads need the CPUs,
// and a NIC that spins steals them: it does not spin there. On the
// 2-core development VM, ib_write_lat -s 8 between two programs on
// sibling NICs took 26-30 µs typical without spinning and 29-35 µs with
// 5 µs of it (ib_send_lat 24.5-26 against 33; on NICs of two processes
// write_lat ~60 against ~90), and ib_write_bw -s 65536 855-1019 MB/s
// against 984-1028; TestProvider/syscalls' steady state was 0.12 system
// calls per hundred WRITEs against 0.02 (one run each). Earlier, with a
// poller goroutine per program: 200-210 µs typical with 50 µs of
// spinning, 143-170 µs with 5 µs, 2.2 ms with 2 ms.
var spinFor = func() time.Duration {
	if runtime.NumCPU() <= 2 {
		return 0
	}
	return nic.DefaultLinkSpin
}()

// gatherBurst is how many packets of a SEND or WRITE the NIC of the
// programs builds before it gathers their payloads from the program's
// memory with one system call: 16 is a 64 KiB message at MTU 4096.
const gatherBurst = 16

// placeBurst is how many received WRITE packets' payloads the NIC of the
// programs writes into a program's memory with one system call: a
// receive batch of the link is up to 64 frames.
const placeBurst = 64

// shm is a sealed memfd mapped into the NIC.
type shm struct {
	fd  int
	mem []byte
}

func newShm(name string, size int) (*shm, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*shm, error) { unix.Close(fd); return nil, err }
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		return fail(err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
		return fail(err)
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fail(err)
	}
	return &shm{fd: fd, mem: mem}, nil
}

func (s *shm) close() {
	unix.Munmap(s.mem)
	unix.Close(s.fd)
}

// hostCQ is a program's CQ: its ring, which the engine writes CQEs into
// (transport.CQMem).
type hostCQ struct {
	cq     *rnic.CQ
	ring   *shm
	depth  uint32
	ciWord int // the program's consumer index, in the doorbell page

	armWord int          // the program's request for an event (0, 1 any, 2 solicited)
	channel *hostChannel // where events go (nil: none)
	cookie  uint64       // what an event names the CQ by
	obj     *hostObj     // its async events
}

// cqMem is the CQ's ring as the engine writes it, ring its memory.
func (c *hostCQ) cqMem(db []byte, ring *shm) *transport.CQMem {
	return &transport.CQMem{Mem: ring.mem, CI: queue.Word(db, c.ciWord), Arm: queue.Word(db, c.armWord), Notify: c.notify}
}

// hostChannel is a completion channel: the NIC's end of a socket pair.
type hostChannel struct {
	fd  int
	cqs int // CQs using it
}

// notify sends the CQ's event, which the program armed and the engine
// fired (under the CQ's lock: the channel is closed only after the CQ is
// destroyed).
func (c *hostCQ) notify() {
	if c.channel == nil {
		return // armed without a channel: the library refuses it
	}
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], c.cookie)
	unix.Write(c.channel.fd, b[:]) // a full channel drops the event: the program has events it did not read
}

// hostRecvRing is a program's receive ring, a QP's RQ or an SRQ: the
// engine's receive queue itself (transport.RingMem), which the responder
// reads when a message needs a WQE, as a hardware NIC fetches one from
// host memory.
type hostRecvRing struct {
	mem    *shm
	depth  uint32
	slot   int
	piWord int    // the program's producer index, in the doorbell page
	ciWord int    // the engine's consumer index, published for the program (SRQ; -1: not published)
	seen   uint32 // the producer index at the last scan
}

func newHostRecvRing(name string, depth uint32, maxSGE uint32) (*hostRecvRing, error) {
	q := &hostRecvRing{depth: depth, slot: queue.RecvWQESize(int(maxSGE)), ciWord: -1}
	var err error
	if q.mem, err = newShm(name, int(depth)*q.slot); err != nil {
		return nil, err
	}
	return q, nil
}

// ringMem is the ring as the engine takes it, its producer index the
// program's word of db.
func (q *hostRecvRing) ringMem(db []byte) *transport.RingMem {
	m := &transport.RingMem{Mem: q.mem.mem, SlotLen: uint32(q.slot), PI: queue.Word(db, q.piWord)}
	if q.ciWord >= 0 {
		m.CI = queue.Word(db, q.ciWord)
	}
	return m
}

// moved reports whether the program's producer index moved since the
// last look.
func (q *hostRecvRing) moved(db []byte) bool {
	pi := queue.Word(db, q.piWord).Load()
	if pi == q.seen {
		return false
	}
	q.seen = pi
	return true
}

// hostQP is a program's QP and its rings.
type hostQP struct {
	hc         *hostClient
	srq        *hostSRQ // nil: its own receive ring
	sendCQ     *hostCQ  // where its send completions go (RESIZE_CQ counts them)
	qp         *rnic.QP
	sq         *shm
	rq         *hostRecvRing // unused (one slot) on an SRQ
	sqDepth    uint32
	sqSlot     int
	sqSeen     uint32 // the program's producer index when the scan last rang the engine's doorbell
	sqWord     int    // the program's producer index, in the doorbell page
	sqCIWord   int    // the engine's SQ consumer index, published: the slots the program may reuse
	rqDoneWord int    // the engine's count of receive WQEs retired (their CQEs written), published: the program's RQ holds at most max_recv_wr not retired
	obj        *hostObj
}

// hostSRQ is a program's SRQ and its ring.
type hostSRQ struct {
	srq    *rnic.SRQ
	ring   *hostRecvRing
	qps    int // QPs on it
	obj    *hostObj
	maxWR  uint32 // as created (ibv_query_srq)
	maxSGE uint32
}

// queues is what the scan looks at; the control path replaces it (copy
// on write) holding hostClient.stepMu, which the scan holds: a queue is
// destroyed only between scans, after the queues that name it are
// replaced.
type queues struct {
	qps  []*hostQP
	srqs []*hostSRQ
}

// hostData is a program's data path state.
type hostData struct {
	db       *shm
	wakeFD   int // the program writes it when it finds the NIC asleep
	wake     chan struct{}
	cur      *queues // read by the scan
	nextWord int
	stopped  bool // under hostClient.stepMu: the program is gone, its page is not scanned
}

func (hc *hostClient) startData() error {
	db, err := newShm("rnic-doorbells", dbPageSize)
	if err != nil {
		return err
	}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		db.close()
		return err
	}
	hc.data = &hostData{db: db, wakeFD: efd, cur: &queues{}, nextWord: 1}
	f := os.NewFile(uintptr(efd), "rnic-wake")
	go func() {
		// The eventfd's reader: each write by the program (it found
		// the NIC asleep) wakes the engine goroutine. It ends when
		// teardown closes the file.
		var b [8]byte
		for {
			if _, err := f.Read(b[:]); err != nil {
				return
			}
			hc.s.kick()
		}
	}()
	hc.wakeFile = f
	hc.s.db.add(hc)
	return nil
}

// word allocates a doorbell word.
func (d *hostData) word() (int, error) {
	if d.nextWord*4 >= dbPageSize {
		return 0, errors.New("doorbell page full")
	}
	w := d.nextWord * 4
	d.nextWord++
	return w, nil
}

// scan is the NIC's look at the program's doorbell page (hostDoorbells):
// it rings the engine's doorbell of each of its queues whose producer
// index moved, and reports whether any did. While the control path
// changes the program's queues (it holds stepMu), the page is looked at
// next time: it reports true, so that the NIC does not park meanwhile.
func (hc *hostClient) scan() bool {
	if !hc.stepMu.TryLock() {
		return true
	}
	defer hc.stepMu.Unlock()
	if hc.data.stopped {
		return false
	}
	return hc.step(hc.data.cur)
}

// setState stores the NIC's state (queue.NICRunning, NICAsleep) in the
// program's doorbell page.
func (hc *hostClient) setState(s uint32) { queue.Word(hc.data.db.mem, dbStateWord).Store(s) }

// sleep stores the state of a NIC about to park in the program's page:
// NICAsleepSends, in which the program's receive doorbells wake nobody
// (the engine takes a receive WQE from the ring when a message needs
// one: perftest's send_lat posts one per message, and each would wake
// the NIC for nothing), or NICAsleep, in which they do, while one of its
// QPs is in error: a receive posted to it must be flushed at once (a
// drain posts one and waits for its completion). A QP can enter the
// error state while the NIC sleeps only by a control-path call, which
// wakes the NIC (nic.Device.Engine): its next sleep stores NICAsleep.
// While the control path changes the program's queues, NICAsleep.
func (hc *hostClient) sleep() {
	s := uint32(queue.NICAsleepSends)
	if hc.stepMu.TryLock() {
		if !hc.data.stopped {
			for _, h := range hc.data.cur.qps {
				if verbs.QPCore(h.qp).State() == transport.QPSErr {
					s = queue.NICAsleep
					break
				}
			}
		}
		hc.stepMu.Unlock()
	} else {
		s = queue.NICAsleep
	}
	hc.setState(s)
}

// step does one round of work and reports whether there was any.
func (hc *hostClient) step(q *queues) bool {
	busy := false
	db := hc.data.db.mem
	for _, h := range q.qps {
		busy = h.ringSends(db) || busy
		busy = h.ringRecvs(db) || busy
	}
	for _, s := range q.srqs {
		busy = s.ring.moved(db) || busy
	}
	return busy
}

// ringSends rings the engine's doorbell for the WQEs the program added
// to its send ring since the last look: the engine fetches them from the
// ring itself (and checks them: a malformed WQE fails the QP, not the
// NIC).
func (h *hostQP) ringSends(db []byte) bool {
	pi := queue.Word(db, h.sqWord).Load()
	if pi == h.sqSeen {
		return false
	}
	n := pi - h.sqSeen
	h.sqSeen = pi
	verbs.QPCore(h.qp).Doorbell(int(min(n, h.sqDepth)))
	return true
}

// ringRecvs rings the engine's receive doorbell when the program posted
// to its receive ring: the engine takes WQEs from the ring itself when
// messages need them, and flushes them at once on a QP in error.
func (h *hostQP) ringRecvs(db []byte) bool {
	if h.srq != nil || !h.rq.moved(db) {
		return false
	}
	verbs.QPCore(h.qp).RecvDoorbell()
	return true
}

// stopPoller takes the program's doorbell page out of the NIC's scan;
// when it returns, no scan looks at it any more.
func (hc *hostClient) stopPoller() {
	d := hc.data
	if d == nil {
		return
	}
	hc.stepMu.Lock()
	d.stopped = true
	hc.stepMu.Unlock()
	hc.s.db.remove(hc)
	hc.wakeFile.Close()
}

// unmapData unmaps what the NIC shared with the program, once the
// queues whose rings the engine reads are destroyed (teardown): the
// doorbell page and the channels. A ring whose queue could not be
// destroyed stays mapped (the engine may still read it).
func (hc *hostClient) unmapData() {
	d := hc.data
	if d == nil {
		return
	}
	for _, ch := range hc.channels {
		unix.Close(ch.fd)
	}
	d.db.close()
	hc.evMu.Lock()
	if hc.asyncFD >= 0 {
		unix.Close(hc.asyncFD) // the program reads the end of its events: the device is gone
		hc.asyncFD = -1
	}
	hc.evMu.Unlock()
}

// publish makes the scan look at the client's current queues from its
// next round (called with hc.mu and hc.stepMu held).
func (hc *hostClient) publish() {
	q := &queues{}
	for _, h := range hc.qps {
		q.qps = append(q.qps, h)
	}
	for _, s := range hc.srqs {
		q.srqs = append(q.srqs, s)
	}
	hc.data.cur = q
	hc.s.kick()
}

// queueOp runs a CQ or QP operation of the host interface; it returns an
// errno (0: done) and the descriptors of the reply.
func (hc *hostClient) queueOp(op hostif.Op, r *hostif.Reader, rep *hostif.Msg) (unix.Errno, []int) {
	switch op {
	case hostif.OpCreateCQ:
		cqe, chh, cookie := r.U32(), r.U32(), r.U64()
		hc.mu.Lock()
		defer hc.mu.Unlock()
		ch := hc.channels[chh]
		if r.End() != nil || cqe == 0 || int64(cqe) > int64(hc.s.attr.MaxCQE) || chh != 0 && ch == nil {
			return unix.EINVAL, nil
		}
		depth := pow2u(cqe)
		ring, err := newShm("rnic-cq", int(depth)*queue.CQELen)
		if err != nil {
			return unix.ENOMEM, nil
		}
		w, err := hc.data.word()
		aw, err2 := hc.data.word()
		if err != nil || err2 != nil {
			ring.close()
			return unix.ENOMEM, nil
		}
		// The ring is the CQ: the engine writes its CQEs there.
		c := &hostCQ{ring: ring, depth: depth, ciWord: w, armWord: aw, channel: ch, cookie: cookie}
		db := hc.data.db.mem
		queue.Word(db, w).Store(0)
		queue.Word(db, aw).Store(0)
		cq, err := verbs.CreateCQ(hc.s.dev, int(depth), c.cqMem(db, ring))
		if err != nil {
			ring.close()
			return errnoOf(err), nil
		}
		c.cq = cq
		hc.next++
		c.obj = hc.watch(cq, hc.next, cookie)
		hc.cqs[hc.next] = c
		if ch != nil {
			ch.cqs++
		}
		rep.U32(hc.next).U32(depth).U32(uint32(w)).U32(uint32(aw))
		return 0, []int{ring.fd}
	case hostif.OpDestroyCQ:
		h := r.U32()
		hc.mu.Lock()
		defer hc.mu.Unlock()
		c := hc.cqs[h]
		if r.End() != nil || c == nil {
			return unix.EINVAL, nil
		}
		if err := c.cq.Destroy(); err != nil {
			return errnoOf(err), nil
		}
		delete(hc.cqs, h)
		c.ring.close() // the engine writes no more CQEs to it
		if c.channel != nil {
			c.channel.cqs--
		}
		hc.unwatch(c.obj)
		return 0, nil
	case hostif.OpCreateCompChannel:
		if r.End() != nil {
			return unix.EINVAL, nil
		}
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return unix.ENOMEM, nil
		}
		unix.SetNonblock(fds[0], true)
		hc.mu.Lock()
		hc.next++
		hc.channels[hc.next] = &hostChannel{fd: fds[0]}
		rep.U32(hc.next)
		hc.mu.Unlock()
		hc.closeAfterReply = append(hc.closeAfterReply, fds[1]) // the program's end, once sent
		return 0, []int{fds[1]}
	case hostif.OpDestroyCompChannel:
		h := r.U32()
		hc.mu.Lock()
		defer hc.mu.Unlock()
		ch := hc.channels[h]
		if r.End() != nil || ch == nil {
			return unix.EINVAL, nil
		}
		if ch.cqs > 0 {
			return unix.EBUSY, nil
		}
		delete(hc.channels, h)
		unix.Close(ch.fd)
		return 0, nil
	case hostif.OpCreateQP:
		pdh, typ, scq, rcq := r.U32(), r.U8(), r.U32(), r.U32()
		cp := rnic.QPCap{MaxSendWR: r.U32(), MaxRecvWR: r.U32(), MaxSendSGE: r.U32(), MaxRecvSGE: r.U32(), MaxInlineData: r.U32()}
		sigAll := r.U8() != 0
		srqh, cookie := r.U32(), r.U64()
		hc.mu.Lock()
		defer hc.mu.Unlock()
		pd, sc, rc, srq := hc.pds[pdh], hc.cqs[scq], hc.cqs[rcq], hc.srqs[srqh]
		if r.End() != nil || pd == nil || sc == nil || rc == nil || cp.MaxSendSGE > queue.MaxSGE || cp.MaxRecvSGE > queue.MaxSGE ||
			srqh != 0 && srq == nil || rnic.QPType(typ) == rnic.GSI { // QP1 is the NIC's own, as the kernel's
			return unix.EINVAL, nil
		}
		// The rings are allocated before the QP (the engine's queues are
		// in them): sizes no QP may have are refused first.
		if at := hc.s.attr; int(cp.MaxSendWR) > at.MaxQPWR || int(cp.MaxRecvWR) > at.MaxQPWR ||
			int(cp.MaxInlineData) > at.MaxInlineData {
			return unix.EINVAL, nil
		}
		init := rnic.QPInitAttr{Type: rnic.QPType(typ), SendCQ: sc.cq, RecvCQ: rc.cq, Cap: cp, SigAll: sigAll}
		if srq != nil {
			init.SRQ = srq.srq
			cp.MaxRecvWR, cp.MaxRecvSGE = 1, 1 // the QP's own receive ring goes unused
		}
		// The send ring is the engine's send queue: it reads the WQEs
		// there and the producer index from the program's doorbell word,
		// and publishes its consumer index (the slots the program may
		// write again) to sqCIWord.
		h := &hostQP{hc: hc, srq: srq, sendCQ: sc, sqDepth: pow2u(max(cp.MaxSendWR, 1)),
			sqSlot: queue.WQESize(int(cp.MaxSendSGE), int(cp.MaxInlineData))}
		fail := func(e unix.Errno) (unix.Errno, []int) {
			if h.sq != nil {
				h.sq.close()
			}
			if h.rq != nil {
				h.rq.mem.close()
			}
			if h.qp != nil {
				h.qp.Destroy()
			}
			return e, nil
		}
		var err error
		if h.sq, err = newShm("rnic-sq", int(h.sqDepth)*h.sqSlot); err != nil {
			return fail(unix.ENOMEM)
		}
		if h.sqWord, err = hc.data.word(); err != nil {
			return fail(unix.ENOMEM)
		}
		if h.sqCIWord, err = hc.data.word(); err != nil {
			return fail(unix.ENOMEM)
		}
		if h.rq, err = newHostRecvRing("rnic-rq", pow2u(max(cp.MaxRecvWR, 1)), cp.MaxRecvSGE); err != nil {
			return fail(unix.ENOMEM)
		}
		if h.rq.piWord, err = hc.data.word(); err != nil {
			return fail(unix.ENOMEM)
		}
		if h.rqDoneWord, err = hc.data.word(); err != nil {
			return fail(unix.ENOMEM)
		}
		// The receive ring is the engine's receive queue (on an SRQ it
		// goes unused): the responder takes WQEs from it when messages
		// need them.
		db := hc.data.db.mem
		init.Cap.MaxSendWR = h.sqDepth
		var recvMem *transport.RingMem
		if srq == nil {
			init.Cap.MaxRecvWR = h.rq.depth
			recvMem = h.rq.ringMem(db)
			recvMem.Done = queue.Word(db, h.rqDoneWord)
		}
		qp, err := verbs.CreateQP(pd, init, &transport.RingMem{Mem: h.sq.mem, SlotLen: uint32(h.sqSlot),
			PI: queue.Word(db, h.sqWord), CI: queue.Word(db, h.sqCIWord)}, recvMem)
		if err != nil {
			return fail(errnoOf(err))
		}
		h.qp = qp
		h.sqSeen = queue.Word(db, h.sqWord).Load()
		h.rq.seen = queue.Word(db, h.rq.piWord).Load()
		if srq != nil {
			srq.qps++
		}
		hc.next++
		h.obj = hc.watch(qp, hc.next, cookie)
		hc.qps[hc.next] = h
		hc.stepMu.Lock()
		hc.publish()
		hc.stepMu.Unlock()
		rep.U32(hc.next).U32(qp.QPN()).U32(h.sqDepth).U32(uint32(h.sqSlot)).U32(uint32(h.sqWord)).
			U32(h.rq.depth).U32(uint32(h.rq.slot)).U32(uint32(h.rq.piWord)).U32(uint32(h.sqCIWord)).U32(uint32(h.rqDoneWord))
		return 0, []int{h.sq.fd, h.rq.mem.fd}
	case hostif.OpModifyQP:
		handle, mask := r.U32(), rnic.QPAttrMask(r.U32())
		var a hostif.ModifyQP
		a.Get(r)
		hc.mu.Lock()
		h := hc.qps[handle]
		hc.mu.Unlock()
		if r.End() != nil || h == nil {
			return unix.EINVAL, nil
		}
		attr := rnic.QPAttr{State: rnic.QPState(a.State), CurState: rnic.QPState(a.CurState), PathMTU: rnic.MTU(a.PathMTU), QKey: a.QKey,
			RQPSN: rnic.PSN(a.RQPSN), SQPSN: rnic.PSN(a.SQPSN), DestQPN: a.DestQPN, AccessFlags: rnic.Access(a.Access) & qpAccessFlags, PKeyIndex: a.PKeyIndex,
			EnSQDAsyncNotify: a.EnSQDAsyncNotify != 0, MaxRdAtomic: a.MaxRdAtomic, MaxDestRdAtomic: a.MaxDestRdAtomic,
			MinRNRTimer: a.MinRNRTimer, Port: a.Port, Timeout: a.Timeout, RetryCnt: a.RetryCnt, RNRRetry: a.RNRRetry,
			AH: rnic.AHAttr{DGID: rnic.GID(a.DGID), SGIDIndex: a.SGIDIndex, FlowLabel: a.FlowLabel, HopLimit: a.HopLimit,
				TrafficClass: a.TrafficClass, SL: a.SL, PortNum: a.Port}}
		if mask&rnic.QPAttrState != 0 && attr.State == rnic.QPSReset {
			// RESET empties the queues without completions (IBTA
			// 10.3.1): the rings too, between rounds.
			hc.stepMu.Lock()
			defer hc.stepMu.Unlock()
		}
		if err := h.qp.Modify(&attr, mask); err != nil {
			return unix.EINVAL, nil
		}
		if mask&rnic.QPAttrState != 0 && attr.State == rnic.QPSReset {
			// The engine emptied the queues (their consumer indices are
			// the program's producer indices, published; what was on
			// the receive queue counts as retired). The program's
			// library cleans the QP's CQEs from its CQ rings.
			db := hc.data.db.mem
			h.sqSeen = queue.Word(db, h.sqWord).Load()
			h.rq.seen = queue.Word(db, h.rq.piWord).Load()
		}
		hc.s.kick() // a QP now in RTS may have work waiting in its ring
		return 0, nil
	case hostif.OpDestroyQP:
		handle := r.U32()
		hc.mu.Lock()
		defer hc.mu.Unlock()
		h := hc.qps[handle]
		if r.End() != nil || h == nil {
			return unix.EINVAL, nil
		}
		hc.stepMu.Lock()
		defer hc.stepMu.Unlock()
		if err := h.qp.Destroy(); err != nil {
			return errnoOf(err), nil
		}
		delete(hc.qps, handle)
		hc.publish()
		h.sq.close()
		h.rq.mem.close()
		if h.srq != nil {
			h.srq.qps--
		}
		hc.unwatch(h.obj)
		return 0, nil
	case hostif.OpCreateSRQ:
		pdh, maxWR, maxSGE, limit, cookie := r.U32(), r.U32(), r.U32(), r.U32(), r.U64()
		hc.mu.Lock()
		defer hc.mu.Unlock()
		pd := hc.pds[pdh]
		if r.End() != nil || pd == nil || maxSGE > queue.MaxSGE {
			return unix.EINVAL, nil
		}
		if maxWR == 0 || int(maxWR) > hc.s.attr.MaxSRQWR {
			return unix.EINVAL, nil
		}
		ring, err := newHostRecvRing("rnic-srq", pow2u(maxWR), max(maxSGE, 1))
		if err != nil {
			return unix.ENOMEM, nil
		}
		w1, err1 := hc.data.word()
		w2, err2 := hc.data.word()
		if err1 != nil || err2 != nil {
			ring.mem.close()
			return unix.ENOMEM, nil
		}
		ring.piWord, ring.ciWord = w1, w2
		// The ring is the SRQ's queue in the engine, which takes WQEs from
		// it and publishes its consumer index (the slots the program may
		// write again).
		db := hc.data.db.mem
		srq, err := verbs.CreateSRQ(pd, rnic.SRQInitAttr{MaxWR: ring.depth, MaxSGE: max(maxSGE, 1), Limit: limit}, ring.ringMem(db))
		if err != nil {
			ring.mem.close()
			return errnoOf(err), nil
		}
		ring.seen = queue.Word(db, ring.piWord).Load()
		s := &hostSRQ{srq: srq, ring: ring, maxWR: maxWR, maxSGE: max(maxSGE, 1)}
		hc.next++
		s.obj = hc.watch(srq, hc.next, cookie)
		hc.srqs[hc.next] = s
		hc.stepMu.Lock()
		hc.publish()
		hc.stepMu.Unlock()
		rep.U32(hc.next).U32(s.ring.depth).U32(uint32(s.ring.slot)).U32(uint32(s.ring.piWord)).U32(uint32(s.ring.ciWord))
		return 0, []int{s.ring.mem.fd}
	case hostif.OpDestroySRQ:
		handle := r.U32()
		hc.mu.Lock()
		defer hc.mu.Unlock()
		s := hc.srqs[handle]
		if r.End() != nil || s == nil {
			return unix.EINVAL, nil
		}
		if s.qps > 0 {
			return unix.EBUSY, nil
		}
		hc.stepMu.Lock()
		defer hc.stepMu.Unlock()
		if err := s.srq.Destroy(); err != nil {
			return errnoOf(err), nil
		}
		delete(hc.srqs, handle)
		hc.publish()
		s.ring.mem.close()
		hc.unwatch(s.obj)
		return 0, nil
	case hostif.OpArmSRQ:
		handle, limit := r.U32(), r.U32()
		hc.mu.Lock()
		s := hc.srqs[handle]
		hc.mu.Unlock()
		if r.End() != nil || s == nil {
			return unix.EINVAL, nil
		}
		if err := s.srq.Arm(limit); err != nil {
			return unix.EINVAL, nil
		}
		return 0, nil
	case hostif.OpQuerySRQ:
		handle := r.U32()
		hc.mu.Lock()
		s := hc.srqs[handle]
		hc.mu.Unlock()
		if r.End() != nil || s == nil {
			return unix.EINVAL, nil
		}
		rep.U32(s.maxWR).U32(s.maxSGE).U32(s.srq.Limit())
		return 0, nil
	case hostif.OpQueryQP:
		handle := r.U32()
		hc.mu.Lock()
		h := hc.qps[handle]
		hc.mu.Unlock()
		if r.End() != nil || h == nil {
			return unix.EINVAL, nil
		}
		a, init, err := h.qp.Query()
		if err != nil {
			return errnoOf(err), nil
		}
		m := hostif.ModifyQP{State: uint8(a.State), CurState: uint8(a.CurState), PathMTU: uint8(a.PathMTU), Port: a.Port,
			QKey: a.QKey, RQPSN: uint32(a.RQPSN), SQPSN: uint32(a.SQPSN), DestQPN: a.DestQPN, Access: uint32(a.AccessFlags),
			PKeyIndex: a.PKeyIndex, MaxRdAtomic: a.MaxRdAtomic, MaxDestRdAtomic: a.MaxDestRdAtomic, MinRNRTimer: a.MinRNRTimer,
			Timeout: a.Timeout, RetryCnt: a.RetryCnt, RNRRetry: a.RNRRetry, DGID: a.AH.DGID, SGIDIndex: a.AH.SGIDIndex,
			FlowLabel: a.AH.FlowLabel, HopLimit: a.AH.HopLimit, TrafficClass: a.AH.TrafficClass, SL: a.AH.SL}
		if a.EnSQDAsyncNotify {
			m.EnSQDAsyncNotify = 1
		}
		m.Put(rep)
		draining := uint8(0)
		if a.SQDraining {
			draining = 1
		}
		c := init.Cap
		rep.U8(draining).U32(c.MaxSendWR).U32(c.MaxRecvWR).U32(c.MaxSendSGE).U32(c.MaxRecvSGE).U32(c.MaxInlineData)
		return 0, nil
	case hostif.OpResizeCQ:
		handle, cqe, ci := r.U32(), r.U32(), r.U32()
		hc.mu.Lock()
		defer hc.mu.Unlock()
		c := hc.cqs[handle]
		if r.End() != nil || c == nil || cqe == 0 || int64(cqe) > int64(hc.s.attr.MaxCQE) {
			return unix.EINVAL, nil
		}
		// The program's consumer index as it says (its library holds
		// the CQ's lock: it polls nothing meanwhile).
		db := hc.data.db.mem
		queue.Word(db, c.ciWord).Store(ci)
		// The completions the CQ holds, and those still to come from
		// the send queues completing to it (posted, not retired, in the
		// NIC or still in the rings): a CQ too small for them would
		// overrun.
		held := uint64(verbs.CQCore(c.cq).Unpolled())
		for _, h := range hc.qps {
			if h.sendCQ == c {
				held += uint64(min(uint32(verbs.QPCore(h.qp).SendOutstanding()), h.sqDepth)) // posted in the ring, not retired
			}
		}
		depth := pow2u(cqe)
		if held > uint64(depth) {
			return unix.EINVAL, nil // more completions than the new size: the kernel refuses it too
		}
		ring, err := newShm("rnic-cq", int(depth)*queue.CQELen)
		if err != nil {
			return unix.ENOMEM, nil
		}
		// The engine moves the CQEs not polled to the new ring, from
		// index 0, and writes there from now on.
		if err := verbs.CQCore(c.cq).ResizeInMem(c.cqMem(db, ring)); err != nil {
			ring.close()
			return unix.EINVAL, nil
		}
		c.ring.close()
		c.ring, c.depth = ring, depth
		rep.U32(depth)
		return 0, []int{ring.fd}
	}
	return unix.EOPNOTSUPP, nil
}

// qpAccessFlags are the qp_access_flags a QP takes; Linux's drivers
// ignore the other IBV_ACCESS_* bits there (programs pass a region's
// flags, IBV_ACCESS_ON_DEMAND among them), and so does the host interface.
const qpAccessFlags = rnic.AccessLocalWrite | rnic.AccessRemoteWrite | rnic.AccessRemoteRead | rnic.AccessRemoteAtomic | rnic.AccessMWBind |
	rnic.AccessFlushGlobal | rnic.AccessFlushPersistent

// pow2u is the smallest power of two at least n (0 for n above 2^31: no
// ring is that deep, and the caller refuses it).
func pow2u(n uint32) uint32 {
	if n > 1<<31 {
		return 0
	}
	d := uint32(1)
	for d < n {
		d <<= 1
	}
	return d
}
