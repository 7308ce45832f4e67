package sched

// list is one intrusive ready list, threaded through the queue table.
type list struct {
	head, tail uint32
	n          uint32
}

// level is one strict-priority level: the current round's list and the
// next round's. lists[cur] is the current round.
type level struct {
	lists [2]list
	cur   uint8
}

// push appends q to the tail of list which (0 or 1) of level l.
func (a *Arbiter) push(l uint8, which uint8, q uint32) {
	li := &a.levels[l].lists[which]
	s := &a.qs[q]
	s.next, s.prev = nilQ, nilQ
	if li.n == 0 {
		li.head = q
	} else {
		s.prev = li.tail
		a.qs[li.tail].next = q
	}
	li.tail = q
	li.n++
	s.flags = s.flags&^list1 | queued
	if which == 1 {
		s.flags |= list1
	}
	a.ready++
	a.nonEmpty |= 1 << l
}

// pushNext appends q to the next round of its level.
func (a *Arbiter) pushNext(q uint32) {
	l := a.qs[q].level
	a.push(l, a.levels[l].cur^1, q)
}

// unlink takes a queued q off its list.
func (a *Arbiter) unlink(q uint32) {
	s := &a.qs[q]
	lv := &a.levels[s.level]
	li := &lv.lists[s.list()]
	if s.prev == nilQ {
		li.head = s.next
	} else {
		a.qs[s.prev].next = s.next
	}
	if s.next == nilQ {
		li.tail = s.prev
	} else {
		a.qs[s.next].prev = s.prev
	}
	li.n--
	s.flags &^= queued
	a.ready--
	if lv.lists[0].n == 0 && lv.lists[1].n == 0 {
		a.nonEmpty &^= 1 << s.level
	}
}

// pop takes the head of level l's current round, starting a new round when
// the current one is empty. Level l must not be empty.
func (a *Arbiter) pop(l uint8) uint32 {
	lv := &a.levels[l]
	if lv.lists[lv.cur].n == 0 {
		lv.cur ^= 1
		a.stats.Rounds++
	}
	q := lv.lists[lv.cur].head
	a.unlink(q)
	return q
}
