package host

import (
	"sync"

	"github.com/rnic/rnic/internal/queue"
)

// doorbellPage is one program's doorbell page as the NIC's doorbell
// unit looks at it (hostClient, queues_linux.go).
type doorbellPage interface {
	// scan rings the engine's doorbell of each of the page's queues
	// whose producer index moved, and reports whether any did.
	scan() bool
	// setState stores the NIC's state in the page.
	setState(s uint32)
	// sleep stores the state of a NIC about to park: NICAsleepSends, or
	// NICAsleep where a receive doorbell must wake it too.
	sleep()
}

// doorbells are the doorbell pages of the programs a device serves
// (Serve): the nic.DoorbellRecords its engine goroutine scans, on
// each turn and while it spins, and marks asleep before it parks. One
// goroutine does it for every program, as one doorbell unit takes in a
// hardware NIC's doorbells.
type doorbells struct {
	// mu is held by the scan, by Sleep and Wake, and by add and
	// remove: once remove returns, nothing looks at the page (it may be
	// unmapped).
	mu    sync.Mutex
	pages []doorbellPage
}

func (b *doorbells) add(p doorbellPage) {
	b.mu.Lock()
	b.pages = append(b.pages, p)
	b.mu.Unlock()
}

func (b *doorbells) remove(p doorbellPage) {
	b.mu.Lock()
	for i, q := range b.pages {
		if q == p {
			b.pages = append(b.pages[:i], b.pages[i+1:]...)
			break
		}
	}
	b.mu.Unlock()
}

// Scan looks at every program's page.
func (b *doorbells) Scan() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	rung := false
	for _, p := range b.pages {
		rung = p.scan() || rung
	}
	return rung
}

// Sleep tells every program the NIC is about to park: a program that
// rings a send doorbell now writes its wake-up eventfd, and one that
// rings a receive doorbell too if it has a QP in error (doorbellPage.sleep).
func (b *doorbells) Sleep() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range b.pages {
		p.sleep()
	}
}

// Wake tells every program the NIC runs: doorbells need no wake-up.
func (b *doorbells) Wake() { b.setState(queue.NICRunning) }

func (b *doorbells) setState(s uint32) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range b.pages {
		p.setState(s)
	}
}
