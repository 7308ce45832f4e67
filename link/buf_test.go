package link_test

import (
	"bytes"
	"testing"

	"github.com/rnic/rnic/internal/hw/bus"
	"github.com/rnic/rnic/link"
)

// TestBufRef: a frame sent by reference gives its payload to whoever
// materializes it while the memory is lent, shares the reference with
// its clone, and is left as it is once the memory is taken back.
func TestBufRef(t *testing.T) {
	mem := bytes.Repeat([]byte{0xAB}, 100)
	var region, qp bus.Loan
	b := link.Get(160)
	clear(b.Bytes())
	b.SetRef(40, mem, &region, &qp)
	if ref, at := b.Ref(); len(ref) != 100 || at != 40 {
		t.Fatalf("Ref = %d bytes at %d, want 100 at 40", len(ref), at)
	}
	c := b.Clone()
	if !b.Materialize() {
		t.Fatal("Materialize failed while lent")
	}
	if ref, _ := b.Ref(); ref != nil || !bytes.Equal(b.Bytes()[40:140], mem) || b.Bytes()[39] != 0 || b.Bytes()[140] != 0 {
		t.Fatalf("materialized frame %x", b.Bytes())
	}
	b.Release()

	qp.TakeBack() // the QP destroyed: its clone's memory is gone too
	if c.Borrow() {
		t.Fatal("Borrow succeeded after the QP took its loan back")
	}
	if c.Materialize() {
		t.Fatal("Materialize succeeded after the QP took its loan back")
	}
	if ref, _ := c.Ref(); ref == nil || bytes.Contains(c.Bytes(), []byte{0xAB}) {
		t.Fatal("a frame whose memory is gone changed")
	}
	c.Release()

	// A failed Borrow returns what it borrowed from the lenders before.
	d := link.Get(160)
	d.SetRef(40, mem, &region, &qp)
	d.Borrow()
	done := make(chan struct{})
	go func() { region.TakeBack(); close(done) }()
	<-done // TakeBack would wait forever for a borrow left behind
	d.Release()

	// A header pushed in front (a capture's Ethernet header) moves the
	// frame's start, not the payload.
	f := link.Get(160)
	f.SetRef(40, mem, nil, nil)
	f.Push(14)
	if _, at := f.Ref(); at != 54 || !f.Materialize() || !bytes.Equal(f.Bytes()[54:154], mem) {
		t.Fatalf("after Push(14): payload at %d, frame %x", at, f.Bytes())
	}
	f.Release()

	// A frame that carries its bytes borrows nothing.
	e := link.Get(64)
	if !e.Borrow() || !e.Materialize() {
		t.Fatal("a frame with its bytes could not be borrowed")
	}
	e.Return()
	e.Release()
}

type countConsumer int

func (c *countConsumer) Consumed() { *c++ }

// TestBufConsumer: a frame's consumer hears once, when the frame is
// released, whoever releases it; its clone carries the payload's bytes
// (the memory may be the program's again before the clone arrives) and
// no consumer, unless the memory was already taken back; a second
// consumer is a bug.
func TestBufConsumer(t *testing.T) {
	mem := bytes.Repeat([]byte{0xCD}, 100)
	var loan bus.Loan
	var c countConsumer
	b := link.Get(160)
	clear(b.Bytes())
	b.SetRef(40, mem, &loan, nil)
	b.SetConsumer(&c)
	d := b.Clone()
	if ref, _ := d.Ref(); ref != nil || !bytes.Equal(d.Bytes()[40:140], mem) {
		t.Fatalf("the clone of a frame with a consumer refers to the memory (%v) or lacks its bytes", ref != nil)
	}
	clear(mem) // the program's again: the clone keeps what was sent
	d.Release()
	if c != 0 {
		t.Fatalf("the clone's release told the consumer (%d)", c)
	}
	b.Release()
	if c != 1 {
		t.Fatalf("consumer told %d times, want 1", c)
	}
	// The pool's next frame has no consumer.
	for range 4 {
		e := link.Get(160)
		e.Release()
	}
	if c != 1 {
		t.Fatalf("consumer told %d times after its frame was reused", c)
	}

	// Taken back before the clone: the clone refers, and is dropped on
	// arrival.
	f := link.Get(160)
	f.SetRef(40, mem, &loan, nil)
	f.SetConsumer(&c)
	loan.TakeBack()
	g := f.Clone()
	if ref, _ := g.Ref(); ref == nil || g.Borrow() {
		t.Fatal("the clone of a frame whose memory is gone carries bytes")
	}
	g.Release()
	f.Release()
	if c != 2 {
		t.Fatalf("consumer told %d times, want 2", c)
	}

	h := link.Get(64)
	h.SetConsumer(&c)
	defer func() {
		if recover() == nil {
			t.Error("a second consumer did not panic")
		}
	}()
	h.SetConsumer(&c)
}
