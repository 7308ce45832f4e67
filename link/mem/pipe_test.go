package mem_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/rnic/rnic/link"
	"github.com/rnic/rnic/link/mem"
)

func TestPipeInOrder(t *testing.T) {
	tests := []struct {
		name      string
		n, batch  int
		size      int
		wantCalls int // Deliver calls per direction: one per Send batch
	}{
		{"batch1", 100, 1, 64, 100},
		{"batch32", 100, 32, 64, 4},
		{"batch32-4KiB", 96, 32, 4096 + 60, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := newTracker()
			ra, rb := &recorder{}, &recorder{}
			a, b := pipe(t, mem.Faults{}, mem.Faults{}, ra, rb)
			sendEach(a, tr, v4b, tt.n, tt.batch, tt.size)
			sendEach(b, tr, v4a, tt.n, tt.batch, tt.size)

			for _, r := range []*recorder{ra, rb} {
				idx := r.indices()
				if len(idx) != tt.n {
					t.Fatalf("delivered %d frames, want %d", len(idx), tt.n)
				}
				for i, x := range idx {
					if x != uint32(i) {
						t.Fatalf("frame %d has index %d: out of order", i, x)
					}
				}
				if r.calls != tt.wantCalls {
					t.Errorf("%d Deliver calls, want %d", r.calls, tt.wantCalls)
				}
			}
			n, bytes := uint64(tt.n), uint64(tt.n*tt.size)
			want := mem.Stats{TxFrames: n, TxBytes: bytes, RxFrames: n, RxBytes: bytes}
			for _, p := range []*mem.Port{a, b} {
				if got := p.Stats(); got != want {
					t.Errorf("%v stats = %+v, want %+v", p.Addr(), got, want)
				}
			}
			tr.checkReleased(t)
		})
	}
}

// sink is a dispatcher that counts frames without releasing them, so the
// sender can send the same buffers again: it isolates the link's own
// allocations from the buffer pool's.
type sink struct{ frames atomic.Int64 }

func (s *sink) Deliver(bufs []*link.Buf) { s.frames.Add(int64(len(bufs))) }

func TestPipeZeroAllocs(t *testing.T) {
	tests := []struct {
		name   string
		faults mem.Faults
		race   bool // allocation-free under -race too (sync.Pool drops items under -race)
	}{
		{"perfect", mem.Faults{}, true},
		{"corrupt", mem.Faults{Corrupt: 0.5}, false},
		{"delay", mem.Faults{Delay: 20 * time.Microsecond}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if raceEnabled && !tt.race {
				t.Skip("sync.Pool allocates under -race")
			}
			s := &sink{}
			a, _ := pipe(t, tt.faults, mem.Faults{}, &recorder{}, s)
			tr := newTracker()
			bufs := make([]*link.Buf, 8)
			for i := range bufs {
				bufs[i] = tr.frame(v4b, uint32(i), 4096)
			}
			allocs := testing.AllocsPerRun(1000, func() { a.Send(bufs) })
			if allocs != 0 {
				t.Errorf("Send allocates %v times per batch, want 0", allocs)
			}
			want := int64(1001 * len(bufs))
			waitFor(t, "all frames", func() bool { return s.frames.Load() == want })
			for _, b := range bufs {
				b.Release()
			}
		})
	}
}
