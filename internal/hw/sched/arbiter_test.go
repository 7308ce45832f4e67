package sched

import (
	"fmt"
	"testing"
	"unsafe"
)

// step is one call in a sequence test. op is ring, next, done (more=false),
// more (done with more=true) or remove. For next, want is the queue
// expected, or none.
type step struct {
	op   string
	q    uint32
	want int // next only: expected queue, -1 = nothing ready
}

const none = -1

func TestSequences(t *testing.T) {
	tests := []struct {
		name      string
		steps     []step
		ready     int // Ready() at the end
		doorbells uint64
		coalesced uint64
	}{
		{"empty arbiter", []step{{op: "next", want: none}, {op: "remove", q: 3}, {op: "next", want: none}}, 0, 0, 0},
		{"ring then serve", []step{{op: "ring", q: 5}, {op: "next", want: 5}, {op: "done", q: 5}, {op: "next", want: none}}, 0, 1, 0},
		{"idempotent ring", []step{
			{op: "ring", q: 1}, {op: "ring", q: 1}, {op: "ring", q: 1},
			{op: "next", want: 1}, {op: "done", q: 1}, {op: "next", want: none},
		}, 0, 3, 2},
		{"ring during service keeps queue ready", []step{
			{op: "ring", q: 1}, {op: "next", want: 1}, {op: "ring", q: 1}, {op: "done", q: 1},
			{op: "next", want: 1}, {op: "done", q: 1}, {op: "next", want: none},
		}, 0, 2, 0},
		{"rings during service coalesce", []step{
			{op: "ring", q: 1}, {op: "next", want: 1}, {op: "ring", q: 1}, {op: "ring", q: 1}, {op: "more", q: 1},
		}, 1, 3, 1},
		{"in-service queue is not handed out twice", []step{
			{op: "ring", q: 1}, {op: "next", want: 1}, {op: "ring", q: 1}, {op: "next", want: none},
		}, 0, 2, 0},
		{"more keeps queue ready", []step{
			{op: "ring", q: 1}, {op: "next", want: 1}, {op: "more", q: 1}, {op: "next", want: 1},
		}, 0, 1, 0},
		{"round robin", []step{
			{op: "ring", q: 3}, {op: "ring", q: 1}, {op: "ring", q: 2},
			{op: "next", want: 3}, {op: "more", q: 3}, {op: "next", want: 1}, {op: "more", q: 1},
			{op: "next", want: 2}, {op: "done", q: 2}, {op: "next", want: 3},
		}, 1, 3, 0},
		{"remove while ready", []step{
			{op: "ring", q: 1}, {op: "ring", q: 2}, {op: "ring", q: 3}, {op: "remove", q: 2},
			{op: "next", want: 1}, {op: "done", q: 1}, {op: "next", want: 3}, {op: "done", q: 3},
			{op: "next", want: none},
		}, 0, 3, 0},
		{"remove head and tail", []step{
			{op: "ring", q: 1}, {op: "ring", q: 2}, {op: "ring", q: 3},
			{op: "remove", q: 1}, {op: "remove", q: 3}, {op: "next", want: 2},
		}, 0, 3, 0},
		{"remove twice", []step{{op: "ring", q: 1}, {op: "remove", q: 1}, {op: "remove", q: 1}, {op: "next", want: none}}, 0, 1, 0},
		{"ring after remove", []step{{op: "ring", q: 1}, {op: "remove", q: 1}, {op: "ring", q: 1}, {op: "next", want: 1}}, 0, 2, 0},
		{"remove during service drops more", []step{
			{op: "ring", q: 1}, {op: "next", want: 1}, {op: "remove", q: 1}, {op: "more", q: 1}, {op: "next", want: none},
		}, 0, 1, 0},
		{"remove during service forgets earlier ring", []step{
			{op: "ring", q: 1}, {op: "next", want: 1}, {op: "ring", q: 1}, {op: "remove", q: 1}, {op: "done", q: 1},
			{op: "next", want: none},
		}, 0, 2, 0},
		{"ring after remove during service", []step{
			{op: "ring", q: 1}, {op: "next", want: 1}, {op: "remove", q: 1}, {op: "ring", q: 1}, {op: "done", q: 1},
			{op: "next", want: 1},
		}, 0, 2, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := mustNew(t, Config{Levels: 2, Mode: DWRR, Quantum: 4096, BurstLimit: 4})
			for i, s := range tt.steps {
				where := fmt.Sprintf("step %d (%s %d)", i, s.op, s.q)
				switch s.op {
				case "ring":
					a.Ring(s.q)
				case "done", "more":
					a.Done(s.q, 1, 100, s.op == "more")
				case "remove":
					a.Remove(s.q)
				case "next":
					q, _, ok := a.Next()
					if got := int(q); !ok {
						got = none
					} else if got != s.want {
						t.Fatalf("%s: Next() = %d, want %d", where, got, s.want)
					}
					if !ok && s.want != none {
						t.Fatalf("%s: Next() found nothing, want %d", where, s.want)
					}
				default:
					t.Fatalf("%s: unknown op", where)
				}
				checkInvariants(t, a)
			}
			st := a.Stats()
			if a.Ready() != tt.ready || st.Doorbells != tt.doorbells || st.Coalesced != tt.coalesced {
				t.Fatalf("Ready() = %d, Doorbells = %d, Coalesced = %d; want %d, %d, %d",
					a.Ready(), st.Doorbells, st.Coalesced, tt.ready, tt.doorbells, tt.coalesced)
			}
		})
	}
}

// TestGrants follows one backlogged queue's grants exactly: a turn ends at
// the burst limit or when the deficit runs out, whichever comes first, and
// an overshoot is carried into the next round.
func TestGrants(t *testing.T) {
	type turn struct{ packets, bytes int } // what the engine sends
	tests := []struct {
		name   string
		cfg    Config
		weight int
		turns  []turn
		want   []Grant
	}{
		{"DWRR burst limit cuts the round", Config{Mode: DWRR, Quantum: 4096, BurstLimit: 4}, 2,
			[]turn{{4, 4096}, {4, 4096}, {4, 4096}},
			[]Grant{{4, 8192}, {4, 4096}, {4, 8192}}},
		{"DWRR deficit ends the turn", Config{Mode: DWRR, Quantum: 4096, BurstLimit: 16}, 2,
			[]turn{{8, 8192}, {8, 8192}},
			[]Grant{{16, 8192}, {16, 8192}}},
		{"DWRR overshoot carried", Config{Mode: DWRR, Quantum: 1000, BurstLimit: 16}, 1,
			[]turn{{1, 1500}, {1, 1500}, {1, 1500}},
			[]Grant{{16, 1000}, {16, 500}, {16, 1000}}},
		{"DWRR quantum below packet: sits rounds out", Config{Mode: DWRR, Quantum: 1000, BurstLimit: 16}, 1,
			[]turn{{1, 4000}, {1, 4000}},
			[]Grant{{16, 1000}, {16, 1000}}},
		{"DWRR each packet costs a byte", Config{Mode: DWRR, Quantum: 10, BurstLimit: 4}, 1,
			[]turn{{4, 0}, {4, 0}, {2, 0}, {4, 0}},
			[]Grant{{4, 10}, {4, 6}, {4, 2}, {4, 10}}},
		{"WRR weight times burst", Config{Mode: WRR, BurstLimit: 4}, 3,
			[]turn{{4, 64}, {4, 64}, {4, 64}, {4, 64}},
			[]Grant{{4, NoByteLimit}, {4, NoByteLimit}, {4, NoByteLimit}, {4, NoByteLimit}}},
		{"WRR short turn keeps credit", Config{Mode: WRR, BurstLimit: 4}, 1,
			[]turn{{1, 64}, {3, 64}, {4, 64}},
			[]Grant{{4, NoByteLimit}, {3, NoByteLimit}, {4, NoByteLimit}}},
		{"empty turn ends the round", Config{Mode: DWRR, Quantum: 4096, BurstLimit: 4}, 1,
			[]turn{{0, 0}, {1, 1000}},
			[]Grant{{4, 4096}, {4, 4096}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.Levels = 1
			a := mustNew(t, tt.cfg)
			if err := a.SetQueue(7, 0, tt.weight); err != nil {
				t.Fatal(err)
			}
			a.Ring(7)
			for i, tr := range tt.turns {
				q, g, ok := a.Next()
				if !ok || q != 7 || g != tt.want[i] {
					t.Fatalf("turn %d: Next() = %d, %+v, %v; want 7, %+v", i, q, g, ok, tt.want[i])
				}
				a.Done(q, tr.packets, tr.bytes, true)
			}
		})
	}
}

func TestDonePanicsOutOfService(t *testing.T) {
	tests := []struct {
		name string
		run  func(a *Arbiter)
	}{
		{"never seen", func(a *Arbiter) { a.Done(9, 1, 1, false) }},
		{"ready, not served", func(a *Arbiter) { a.Ring(1); a.Done(1, 1, 1, false) }},
		{"twice", func(a *Arbiter) { a.Ring(1); a.Next(); a.Done(1, 1, 1, false); a.Done(1, 1, 1, false) }},
		{"negative count", func(a *Arbiter) { a.Ring(1); a.Next(); a.Done(1, -1, 1, false) }},
		{"index beyond MaxQueues", func(a *Arbiter) { a.Ring(MaxQueues) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			tt.run(mustNew(t, Config{Levels: 1, Mode: WRR}))
		})
	}
}

// TestQueueState pins the per-queue footprint: 16,384 idle QPs must cost
// 256 KiB, not megabytes.
func TestQueueState(t *testing.T) {
	if n := unsafe.Sizeof(queue{}); n != 16 {
		t.Fatalf("per-queue state is %d bytes, want 16", n)
	}
	a := mustNew(t, Config{Levels: 1, Mode: WRR})
	if len(a.qs) != 0 {
		t.Fatalf("new arbiter holds %d queue slots, want 0", len(a.qs))
	}
	a.Ring(1<<16 - 1) // grows the table lazily to the highest index used
	if len(a.qs) != 1<<16 {
		t.Fatalf("table holds %d slots after ringing 65535, want 65536", len(a.qs))
	}
	if q, _, ok := a.Next(); !ok || q != 1<<16-1 {
		t.Fatalf("Next() = %d, %v; want 65535", q, ok)
	}
}

func TestSetQueueMovesReadyQueue(t *testing.T) {
	a := mustNew(t, Config{Levels: 3, Mode: WRR, BurstLimit: 2})
	a.Ring(1)
	a.Ring(2)
	if err := a.SetQueue(2, 0, 1); err != nil { // same level: stays put
		t.Fatal(err)
	}
	if err := a.SetQueue(1, 2, 1); err != nil { // ready queue moves down
		t.Fatal(err)
	}
	checkInvariants(t, a)
	for _, want := range []uint32{2, 1} {
		q, _, ok := a.Next()
		if !ok || q != want {
			t.Fatalf("Next() = %d, %v; want %d", q, ok, want)
		}
		a.Done(q, 1, 1, false)
	}
	if st := a.Stats(); st.LevelGrants[0] != 1 || st.LevelGrants[2] != 1 {
		t.Fatalf("LevelGrants = %v, want one at level 0 and one at level 2", st.LevelGrants)
	}
}

// TestBlockedQueueCannotHoldRound: a queue that has work but cannot send
// (Done with no packets and more, say its send window is closed) ends its
// round, so a queue waiting for the next round is still served.
func TestBlockedQueueCannotHoldRound(t *testing.T) {
	a := mustNew(t, Config{Levels: 1, Mode: DWRR, Quantum: 4096, BurstLimit: 4})
	a.Ring(1) // blocked
	a.Ring(2)
	servedB := 0
	for range 20 {
		q, _, _ := a.Next()
		if q == 1 {
			a.Done(q, 0, 0, true)
			continue
		}
		servedB++
		a.Done(q, 1, 4096, true) // uses its round's credit
	}
	if servedB < 9 {
		t.Fatalf("queue 2 served %d times in 20 turns beside a blocked queue, want about 10", servedB)
	}
}

// TestRoundEndsDuringService: with two queues in service at once (a
// pipelined engine), the round one was served in can end before its Done.
// It then starts the new round with a fresh top-up instead of carrying its
// old round's credit into the next-round list.
func TestRoundEndsDuringService(t *testing.T) {
	a := mustNew(t, Config{Levels: 1, Mode: DWRR, Quantum: 4096, BurstLimit: 4})
	a.Ring(1)
	a.Ring(2)
	next := func(want uint32, wantBytes int) {
		t.Helper()
		q, g, ok := a.Next()
		if !ok || q != want || g.Bytes != wantBytes {
			t.Fatalf("Next() = %d, %+v, %v; want %d with %d bytes", q, g, ok, want, wantBytes)
		}
	}
	next(1, 4096)
	next(2, 4096)
	a.Done(2, 4, 4096, true) // round used: next round
	next(2, 4096)            // starts a new round while queue 1 is still in service
	a.Done(1, 1, 1000, true) // 3096 credit left, but its round is over
	next(1, 4096)
}

// TestStats checks every counter after a scripted run.
func TestStats(t *testing.T) {
	a := mustNew(t, Config{Levels: 2, Mode: DWRR, Quantum: 4096, BurstLimit: 4})
	if err := a.SetQueue(2, 1, 1); err != nil {
		t.Fatal(err)
	}
	a.Ring(1)
	a.Ring(1) // coalesced
	a.Ring(2)
	a.Ring(3)
	a.Remove(3) // removed while ready
	q, _, _ := a.Next()
	a.Ring(q) // rung during service
	a.Ring(q) // coalesced
	a.Done(q, 3, 3000, false)
	q, _, _ = a.Next()
	a.Remove(q) // removed in service
	a.Done(q, 1, 100, true)
	q, _, _ = a.Next()
	a.Done(q, 2, 50, false)
	want := Stats{Doorbells: 6, Coalesced: 2, Grants: 3, Rounds: 3, Packets: 6, Bytes: 3150, Removed: 2}
	want.LevelGrants[0], want.LevelGrants[1] = 2, 1
	if got := a.Stats(); got != want {
		t.Fatalf("Stats() = %+v\nwant      %+v", got, want)
	}
}
