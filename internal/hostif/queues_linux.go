package hostif

import (
	"fmt"
	"github.com/rnic/rnic/internal/queue"
	"syscall"

	"golang.org/x/sys/unix"
)

// The program's side of the data path, in Go: what the verbs library
// does with the rings the NIC hands out (and the reference for the C
// provider). Not safe for concurrent use.

// Context is a program's connection with its doorbell page.
type Context struct {
	*Client
	db      []byte
	wakeFD  int
	AsyncFD int // the async event socket (AsyncEventLen messages)
	Name    string
	// Access is 0, or why the NIC may not reach this process's memory
	// (EACCES: the kernel refused it; registering memory fails so).
	Access syscall.Errno
}

// Open dials the NIC at path and says hello: the doorbell page is mapped
// and the wake-up eventfd kept.
func Open(path string) (*Context, error) {
	c, err := Dial(path)
	if err != nil {
		return nil, err
	}
	r, err := c.Call(OpHello, Hello)
	if err != nil {
		c.Close()
		return nil, err
	}
	_, name, access := r.U32(), string(r.Bytes()), syscall.Errno(r.U32())
	fds := c.FDs()
	if len(fds) != 3 {
		for _, fd := range fds {
			unix.Close(fd)
		}
		c.Close()
		return nil, fmt.Errorf("hostif: HELLO carried %d descriptors, want 3", len(fds))
	}
	db, err := unix.Mmap(fds[0], 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	unix.Close(fds[0])
	if err != nil {
		unix.Close(fds[1])
		unix.Close(fds[2])
		c.Close()
		return nil, err
	}
	return &Context{Client: c, db: db, wakeFD: fds[1], AsyncFD: fds[2], Name: name, Access: access}, nil
}

// ring tells the NIC a producer index changed: it stores idx at the
// doorbell word, then, if the NIC sleeps, wakes it — once: the swap to
// NICWaking spares the doorbells rung before the NIC runs again a system
// call each. A receive doorbell (recv) wakes it only from NICAsleep:
// in NICAsleepSends the NIC takes receive WQEs when messages need them.
// (The index's store and the state's load are sequentially consistent,
// as the NIC's store of its sleeping state and its last look at the
// indices are: one of the two sees the other.)
func (x *Context) ring(word int, idx uint32, recv bool) {
	queue.Word(x.db, word).Store(idx)
	state := queue.Word(x.db, 0)
	s := state.Load()
	if (s == queue.NICAsleep || s == queue.NICAsleepSends && !recv) && state.CompareAndSwap(s, queue.NICWaking) {
		var one = [8]byte{1}
		unix.Write(x.wakeFD, one[:])
	}
}

// NICState returns the NIC's state word of the doorbell page
// (queue.NICRunning, NICAsleep, NICWaking, NICAsleepSends).
func (x *Context) NICState() uint32 { return queue.Word(x.db, queue.DoorbellState).Load() }

// ClientCQ is a CQ's ring, mapped.
type ClientCQ struct {
	x      *Context
	Handle uint32
	ring   []byte
	depth  uint32
	ci     uint32
	ciWord int
}

// CreateCQ creates a CQ of at least cqe entries.
func (x *Context) CreateCQ(cqe int) (*ClientCQ, error) {
	r, err := x.Call(OpCreateCQ, func(m *Msg) { m.U32(uint32(cqe)).U32(0).U64(0) })
	if err != nil {
		return nil, err
	}
	h, depth, w, _ := r.U32(), r.U32(), r.U32(), r.U32()
	fds := x.FDs()
	if len(fds) != 1 {
		return nil, fmt.Errorf("hostif: CREATE_CQ carried %d descriptors", len(fds))
	}
	ring, err := unix.Mmap(fds[0], 0, int(depth)*queue.CQELen, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	unix.Close(fds[0])
	if err != nil {
		return nil, err
	}
	return &ClientCQ{x: x, Handle: h, ring: ring, depth: depth, ciWord: int(w)}, nil
}

// Poll takes up to len(out) completions.
func (c *ClientCQ) Poll(out []queue.CQE) int {
	n := 0
	for n < len(out) {
		off := int(c.ci%c.depth) * queue.CQELen
		if !queue.GetCQE(c.ring[off:off+queue.CQELen], queue.Lap(c.ci, c.depth), &out[n]) {
			break
		}
		c.ci++
		n++
	}
	if n > 0 {
		queue.Word(c.x.db, c.ciWord).Store(c.ci)
	}
	return n
}

// ClientQP is a QP's rings, mapped.
type ClientQP struct {
	x                *Context
	Handle, QPN      uint32
	sq, rq           []byte
	sqDepth, rqDepth uint32
	sqSlot, rqSlot   int
	sqPI, rqPI       uint32
	sqWord, rqWord   int
	sqCIWord         int // the NIC's SQ consumer index
	rqDoneWord       int // receive WQEs retired
}

// QPInit are CREATE_QP's arguments.
type QPInit struct {
	PD, SendCQ, RecvCQ                uint32
	Type                              uint8
	MaxSendWR, MaxRecvWR              uint32
	MaxSendSGE, MaxRecvSGE, MaxInline uint32
	SigAll                            bool
	Cookie                            uint64 // what its async events name it by
}

// CreateQP creates a QP.
func (x *Context) CreateQP(a QPInit) (*ClientQP, error) {
	r, err := x.Call(OpCreateQP, func(m *Msg) {
		sig := uint8(0)
		if a.SigAll {
			sig = 1
		}
		m.U32(a.PD).U8(a.Type).U32(a.SendCQ).U32(a.RecvCQ).U32(a.MaxSendWR).U32(a.MaxRecvWR).
			U32(a.MaxSendSGE).U32(a.MaxRecvSGE).U32(a.MaxInline).U8(sig).U32(0).U64(a.Cookie)
	})
	if err != nil {
		return nil, err
	}
	q := &ClientQP{x: x, Handle: r.U32(), QPN: r.U32()}
	q.sqDepth, q.sqSlot, q.sqWord = r.U32(), int(r.U32()), int(r.U32())
	q.rqDepth, q.rqSlot, q.rqWord = r.U32(), int(r.U32()), int(r.U32())
	q.sqCIWord, q.rqDoneWord = int(r.U32()), int(r.U32())
	fds := x.FDs()
	if r.End() != nil || len(fds) != 2 {
		return nil, fmt.Errorf("hostif: CREATE_QP reply: %v, %d descriptors", r.Err, len(fds))
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	if q.sq, err = unix.Mmap(fds[0], 0, int(q.sqDepth)*q.sqSlot, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err != nil {
		return nil, err
	}
	if q.rq, err = unix.Mmap(fds[1], 0, int(q.rqDepth)*q.rqSlot, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err != nil {
		return nil, err
	}
	return q, nil
}

// Modify runs MODIFY_QP with the IBV_QP_* mask.
func (q *ClientQP) Modify(mask uint32, a *ModifyQP) error {
	_, err := q.x.Call(OpModifyQP, func(m *Msg) { m.U32(q.Handle).U32(mask); a.Put(m) })
	return err
}

// PostSend writes w into the send ring and rings the doorbell. It does
// not check the ring for room: the caller keeps at most the QP's depth
// outstanding, as libibverbs' callers do.
func (q *ClientQP) PostSend(w *queue.SendWQE) error {
	off := int(q.sqPI%q.sqDepth) * q.sqSlot
	if err := queue.EncodeSend(q.sq[off:off+q.sqSlot], w); err != nil {
		return err
	}
	q.sqPI++
	q.x.ring(q.sqWord, q.sqPI, false)
	return nil
}

// PostRecv writes w into the receive ring and rings the doorbell.
func (q *ClientQP) PostRecv(w *queue.RecvWQE) error {
	off := int(q.rqPI%q.rqDepth) * q.rqSlot
	if err := queue.EncodeRecv(q.rq[off:off+q.rqSlot], w); err != nil {
		return err
	}
	q.rqPI++
	q.x.ring(q.rqWord, q.rqPI, true)
	return nil
}
