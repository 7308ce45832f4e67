package hostif

import (
	"encoding/binary"
	"github.com/rnic/rnic/internal/queue"
	"testing"

	"golang.org/x/sys/unix"
)

// TestRingWakesOnce: a program that finds its NIC asleep writes the
// wake-up eventfd once, however many doorbells it rings before the NIC
// runs again (the first swaps queue.NICAsleep for queue.NICWaking); a running NIC
// costs no write at all.
func TestRingWakesOnce(t *testing.T) {
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(efd)
	x := &Context{db: make([]byte, 4096), wakeFD: efd}
	wakes := func() uint64 {
		var b [8]byte
		if _, err := unix.Read(efd, b[:]); err == unix.EAGAIN {
			return 0
		} else if err != nil {
			t.Fatal(err)
		}
		return binary.NativeEndian.Uint64(b[:])
	}
	state := queue.Word(x.db, 0)
	for _, tc := range []struct {
		name  string
		state uint32
		recv  bool // receive doorbells
		wakes uint64
		after uint32
	}{
		{"running", queue.NICRunning, false, 0, queue.NICRunning},
		{"asleep", queue.NICAsleep, false, 1, queue.NICWaking},
		{"waking", queue.NICWaking, false, 0, queue.NICWaking},
		{"asleep, sends wake", queue.NICAsleepSends, false, 1, queue.NICWaking},
		// A receive doorbell wakes a NIC with a QP in error (NICAsleep:
		// its receives are flushed at once), and no other.
		{"asleep, receives", queue.NICAsleep, true, 1, queue.NICWaking},
		{"asleep for sends, receives", queue.NICAsleepSends, true, 0, queue.NICAsleepSends},
		{"running, receives", queue.NICRunning, true, 0, queue.NICRunning},
	} {
		state.Store(tc.state)
		for i := range uint32(100) {
			x.ring(4, i, tc.recv)
		}
		if got := wakes(); got != tc.wakes || state.Load() != tc.after {
			t.Errorf("%s: 100 doorbells wrote the eventfd %d times, state %d; want %d, %d", tc.name, got, state.Load(), tc.wakes, tc.after)
		}
	}
}
