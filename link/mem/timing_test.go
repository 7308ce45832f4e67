package mem_test

import (
	"bytes"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rnic/rnic/link"
	"github.com/rnic/rnic/link/mem"
)

// The tests in this file run in synctest bubbles: time stands still while
// the test sends and moves only when every goroutine waits, so delays are
// exact and the delivery order is reproducible.

func TestDelayAndJitter(t *testing.T) {
	tests := []struct {
		name          string
		delay, jitter time.Duration
		reordered     bool // jitter must change the order
	}{
		{"delay", 3 * time.Millisecond, 0, false},
		{"jitter", time.Millisecond, 4 * time.Millisecond, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const n, batch = 200, 5
				rb := &recorder{}
				f := mem.Faults{Seed: 1, Delay: tt.delay, Jitter: tt.jitter}
				a, b := pipe(t, f, mem.Faults{}, &recorder{}, rb)
				tr := newTracker()
				// Frames of one batch are due at the same time unless
				// jittered: they must keep their order.
				sent := make([]time.Time, n)
				for i := 0; i < n; i += batch {
					var bufs []*link.Buf
					for j := i; j < i+batch; j++ {
						bufs = append(bufs, tr.frame(v4b, uint32(j), 64))
					}
					for j := i; j < i+batch; j++ {
						sent[j] = time.Now()
					}
					a.Send(bufs)
					time.Sleep(10 * time.Microsecond)
				}
				time.Sleep(tt.delay + tt.jitter)
				synctest.Wait()

				idx := rb.indices()
				if !slices.Equal(slices.Sorted(slices.Values(idx)), seq(n)) {
					t.Fatalf("frames not delivered exactly once each: %v", idx)
				}
				var spread time.Duration
				for k, i := range idx {
					got := rb.at[k].Sub(sent[i])
					if got < tt.delay || got > tt.delay && got-tt.delay >= tt.jitter {
						t.Fatalf("frame %d arrived after %v, want %v plus [0, %v)", i, got, tt.delay, tt.jitter)
					}
					spread = max(spread, got-tt.delay)
				}
				if tt.jitter > 0 && spread < tt.jitter/2 {
					t.Errorf("jitter spread delays over %v only, want most of %v", spread, tt.jitter)
				}
				if got := inversions(idx) > 0; got != tt.reordered {
					t.Errorf("order changed = %v, want %v", got, tt.reordered)
				}
				if s := a.Stats(); s.Delayed != n {
					t.Errorf("Delayed = %d, want %d", s.Delayed, n)
				}
				balance(t, a, b)
				tr.checkReleased(t)
			})
		})
	}
}

// TestReorderExact sends all frames at one instant: the frames held back
// arrive after all the others, in their own send order, and each frame
// arrives exactly once.
func TestReorderExact(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n, hold = 1000, 2 * time.Millisecond
		rb := &recorder{}
		f := mem.Faults{Seed: 3, Reorder: 0.1, ReorderDelay: hold}
		a, _ := pipe(t, f, mem.Faults{}, &recorder{}, rb)
		tr := newTracker()
		start := time.Now()
		sendEach(a, tr, v4b, n, 10, 64)
		synctest.Wait()
		direct := rb.indices()
		time.Sleep(hold)
		synctest.Wait()

		idx := rb.indices()
		held := idx[len(direct):]
		if len(held) == 0 || uint64(len(held)) != a.Stats().Reordered {
			t.Fatalf("%d frames held back, Reordered = %d", len(held), a.Stats().Reordered)
		}
		if !slices.IsSorted(direct) || !slices.IsSorted(held) {
			t.Error("frames not held back were reordered among themselves")
		}
		if !slices.Equal(slices.Sorted(slices.Values(idx)), seq(n)) {
			t.Error("frames not delivered exactly once each")
		}
		for _, at := range rb.at[len(direct):] {
			if at.Sub(start) != hold {
				t.Fatalf("held frame arrived after %v, want %v", at.Sub(start), hold)
			}
		}
		tr.checkReleased(t)
	})
}

// TestHeldFrameDeliveredAlone checks that a held frame is delivered when
// its time comes even though no other frame follows it.
func TestHeldFrameDeliveredAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rb := &recorder{}
		a, _ := pipe(t, mem.Faults{Reorder: 1}, mem.Faults{}, &recorder{}, rb)
		tr := newTracker()
		start := time.Now()
		sendEach(a, tr, v4b, 1, 1, 64)
		time.Sleep(time.Second)
		synctest.Wait()
		if rb.count() != 1 {
			t.Fatal("the held frame was never delivered")
		}
		if got := rb.at[0].Sub(start); got != mem.DefaultReorderDelay {
			t.Errorf("held frame arrived after %v, want %v", got, mem.DefaultReorderDelay)
		}
		tr.checkReleased(t)
	})
}

// TestDecisionsDeterministic runs every fault at once: the same seed gives
// the very same deliveries (frames, bytes, times) and counters; another
// seed does not.
func TestDecisionsDeterministic(t *testing.T) {
	type delivery struct {
		frame []byte
		after time.Duration
	}
	run := func(seed int64) (got []delivery, s mem.Stats) {
		synctest.Test(t, func(t *testing.T) {
			rb := &recorder{keep: true}
			f := mem.Faults{Seed: seed, Loss: 0.1, Duplicate: 0.1, Corrupt: 0.1, Reorder: 0.1,
				Delay: time.Millisecond, Jitter: 100 * time.Microsecond}
			a, _ := pipe(t, f, mem.Faults{}, &recorder{}, rb)
			tr := newTracker()
			start := time.Now()
			for range 10 {
				sendEach(a, tr, v4b, 300, 8, 64)
				time.Sleep(50 * time.Microsecond)
			}
			time.Sleep(time.Second)
			synctest.Wait()
			for i, fr := range rb.frames {
				got = append(got, delivery{fr, rb.at[i].Sub(start)})
			}
			s = a.Stats()
			tr.checkReleased(t)
		})
		return got, s
	}
	equal := func(x, y []delivery) bool {
		return slices.EqualFunc(x, y, func(a, b delivery) bool {
			return a.after == b.after && bytes.Equal(a.frame, b.frame)
		})
	}
	got, gotStats := run(1)
	again, againStats := run(1)
	if !equal(got, again) || gotStats != againStats {
		t.Errorf("same seed, different outcome: %+v vs %+v", gotStats, againStats)
	}
	if gotStats.Dropped == 0 || gotStats.Duplicated == 0 || gotStats.Corrupted == 0 || gotStats.Reordered == 0 {
		t.Errorf("some fault never happened: %+v", gotStats)
	}
	if other, _ := run(2); equal(got, other) {
		t.Error("different seeds, same outcome")
	}
}
