package mem_test

import (
	"bytes"
	"math"
	"math/bits"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/rnic/rnic/link"
	"github.com/rnic/rnic/link/mem"
)

// within reports whether k successes of n trials are within 5 standard
// deviations of the mean for probability p (a false alarm once in ~3.5
// million runs; runs are seeded, so a pass is reproducible anyway).
func within(k, n int, p float64) bool {
	mean, sd := float64(n)*p, math.Sqrt(float64(n)*p*(1-p))
	return math.Abs(float64(k)-mean) <= 5*sd
}

// lossRun sends n frames through a pipe with 10 % loss on the sender and
// returns the indices delivered.
func lossRun(t *testing.T, seed int64, n int) []uint32 {
	t.Helper()
	rb := &recorder{}
	a, b := pipe(t, mem.Faults{Seed: seed, Loss: 0.1}, mem.Faults{}, &recorder{}, rb)
	tr := newTracker()
	sendEach(a, tr, v4b, n, 64, 64)
	got := rb.indices()
	if lost := a.Stats().Dropped; lost != uint64(n-len(got)) {
		t.Errorf("Dropped = %d, but %d of %d frames are missing", lost, n-len(got), n)
	}
	balance(t, a, b)
	tr.checkReleased(t)
	return got
}

func TestLoss(t *testing.T) {
	const n = 100_000
	got := lossRun(t, 1, n)
	if lost := n - len(got); !within(lost, n, 0.1) {
		t.Errorf("lost %d of %d frames, want about %d", lost, n, n/10)
	}
	if !slices.IsSorted(got) {
		t.Error("loss alone reordered frames")
	}
	if again := lossRun(t, 1, n); !slices.Equal(got, again) {
		t.Error("the same seed delivered a different sequence of frames")
	}
	if other := lossRun(t, 2, n); slices.Equal(got, other) {
		t.Error("a different seed delivered the same sequence of frames")
	}
}

func TestSameSeedDiffersByPort(t *testing.T) {
	f := mem.Faults{Seed: 7, Loss: 0.5}
	ra, rb := &recorder{}, &recorder{}
	a, b := pipe(t, f, f, ra, rb)
	tr := newTracker()
	sendEach(a, tr, v4b, 1000, 1, 64)
	sendEach(b, tr, v4a, 1000, 1, 64)
	if slices.Equal(ra.indices(), rb.indices()) {
		t.Error("two ports with the same Seed dropped the same frames")
	}
	tr.checkReleased(t)
}

func TestSetFaults(t *testing.T) {
	rb := &recorder{}
	a, b := pipe(t, mem.Faults{Loss: 1}, mem.Faults{}, &recorder{}, rb)
	tr := newTracker()
	steps := []struct {
		faults    mem.Faults
		delivered int
	}{
		{mem.Faults{Loss: 1}, 0},
		{mem.Faults{}, 10},
		{mem.Faults{Loss: 1}, 10},
		{mem.Faults{Seed: 3}, 20},
	}
	for i, s := range steps {
		if err := a.SetFaults(s.faults); err != nil {
			t.Fatal(err)
		}
		sendEach(a, tr, v4b, 10, 3, 64)
		if got := rb.count(); got != s.delivered {
			t.Errorf("step %d (%+v): %d frames delivered in all, want %d", i, s.faults, got, s.delivered)
		}
	}
	balance(t, a, b)
	tr.checkReleased(t)
}

func TestDuplicate(t *testing.T) {
	const n, p = 20_000, 0.25
	rb := &recorder{keep: true}
	a, b := pipe(t, mem.Faults{Seed: 1, Duplicate: p}, mem.Faults{}, &recorder{}, rb)
	tr := newTracker()
	rb.tr = tr
	sendEach(a, tr, v4b, n, 16, 80)

	idx, dups := rb.indices(), 0
	for i, next := 0, uint32(0); i < len(idx); i++ {
		if idx[i] != next {
			t.Fatalf("frame %d has index %d, want %d", i, idx[i], next)
		}
		if i+1 < len(idx) && idx[i+1] == idx[i] {
			if !bytes.Equal(rb.frames[i], rb.frames[i+1]) {
				t.Fatalf("duplicate of frame %d differs from it", idx[i])
			}
			dups++
			i++
		}
		next++
	}
	if len(idx) != n+dups {
		t.Errorf("delivered %d frames, want %d originals and %d copies", len(idx), n, dups)
	}
	if got := a.Stats().Duplicated; got != uint64(dups) {
		t.Errorf("Duplicated = %d, but %d copies arrived", got, dups)
	}
	if !within(dups, n, p) {
		t.Errorf("%d of %d frames duplicated, want about %v", dups, n, n*p)
	}
	balance(t, a, b)
	tr.checkReleased(t)
}

// TestReorder runs reordering on real timers; TestReorderExact checks the
// exact outcome in a synctest bubble.
func TestReorder(t *testing.T) {
	const n, p = 2000, 0.05
	rb := &recorder{}
	f := mem.Faults{Seed: 1, Reorder: p, ReorderDelay: time.Millisecond}
	a, b := pipe(t, f, mem.Faults{}, &recorder{}, rb)
	tr := newTracker()
	sendEach(a, tr, v4b, n, 1, 64)
	waitFor(t, "all frames", func() bool { return rb.count() >= n })
	time.Sleep(2 * time.Millisecond) // let any extra (wrong) frame arrive

	idx := rb.indices()
	if inversions(idx) == 0 {
		t.Error("reorder did not change the order of frames")
	}
	sorted := slices.Sorted(slices.Values(idx))
	for i, x := range sorted {
		if x != uint32(i) {
			t.Fatalf("frames are not each delivered exactly once: sorted[%d] = %d", i, x)
		}
	}
	s := a.Stats()
	if len(idx) != n || s.Reordered != s.Delayed || !within(int(s.Reordered), n, p) {
		t.Errorf("delivered %d of %d, stats %+v: want all, Reordered = Delayed ≈ %v", len(idx), n, s, n*p)
	}
	balance(t, a, b)
	tr.checkReleased(t)
}

func TestCorrupt(t *testing.T) {
	notUDP := func(f []byte) { f[9] = 6 } // IPv4 protocol TCP: no UDP payload
	tests := []struct {
		name   string
		dst    netip.Addr
		ihl    int
		mangle func([]byte)
		want   bool // corrupted
	}{
		{"IPv4", v4b, 20, nil, true},
		{"IPv4 options", v4b, 24, nil, true},
		{"IPv6", netip.AddrFrom16(v4b.As16()), 0, nil, true},
		{"not UDP", v4b, 20, notUDP, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const n = 200
			rb := &recorder{keep: true}
			a, b := pipe(t, mem.Faults{Seed: 1, Corrupt: 1}, mem.Faults{}, &recorder{}, rb)
			sent := make([][]byte, n)
			for i := range n {
				buf := link.Get(60 + i%40) // payloads of several lengths
				fill(buf.Bytes(), tt.dst, uint32(i), tt.ihl)
				if tt.mangle != nil {
					tt.mangle(buf.Bytes())
				}
				sent[i] = append([]byte(nil), buf.Bytes()...)
				a.Send([]*link.Buf{buf})
			}
			if len(rb.frames) != n {
				t.Fatalf("delivered %d frames, want %d", len(rb.frames), n)
			}
			for i, got := range rb.frames {
				flips, first := 0, -1
				for j := range got {
					if d := bits.OnesCount8(got[j] ^ sent[i][j]); d > 0 {
						flips += d
						first = j
					}
				}
				switch {
				case !tt.want && flips != 0:
					t.Fatalf("frame %d: %d bits flipped in a frame without UDP payload", i, flips)
				case tt.want && flips != 1:
					t.Fatalf("frame %d: %d bits flipped, want 1", i, flips)
				case tt.want && first < payloadOffset(sent[i]):
					t.Fatalf("frame %d: flipped bit at byte %d, before the UDP payload at %d",
						i, first, payloadOffset(sent[i]))
				}
			}
			want := uint64(0)
			if tt.want {
				want = n
			}
			if got := a.Stats().Corrupted; got != want {
				t.Errorf("Corrupted = %d, want %d", got, want)
			}
			balance(t, a, b)
		})
	}
}

func TestCorruptRate(t *testing.T) {
	const n, p = 10_000, 0.1
	a, _ := pipe(t, mem.Faults{Seed: 5, Corrupt: p}, mem.Faults{}, &recorder{}, &recorder{})
	tr := newTracker()
	sendEach(a, tr, v4b, n, 32, 64)
	if got := a.Stats().Corrupted; !within(int(got), n, p) {
		t.Errorf("corrupted %d of %d, want about %v", got, n, n*p)
	}
	tr.checkReleased(t)
}

func seq(n int) []uint32 {
	s := make([]uint32, n)
	for i := range s {
		s[i] = uint32(i)
	}
	return s
}
