package sim_test

import (
	"fmt"

	"github.com/rnic/rnic/sim"
)

// nic is a toy component: it transmits a packet every 100 ns and keeps a
// retransmission timer that each transmission pushes back.
type nic struct {
	sent    int
	retrans *sim.Timer
}

const (
	kindTx int32 = iota
	kindTimeout
)

func (n *nic) Handle(s *sim.Sim, ev sim.Event) {
	switch ev.Kind {
	case kindTx:
		n.sent++
		fmt.Printf("%v: send %d\n", s.Now(), n.sent)
		n.retrans.ResetAfter(250) // moving a deadline later is free
		if n.sent < 3 {
			s.After(100, n, kindTx, 0)
		}
	case kindTimeout:
		fmt.Printf("%v: retransmission timeout\n", s.Now())
	}
}

func Example() {
	s := sim.New(1)
	n := &nic{}
	n.retrans = s.NewTimer(n, kindTimeout, 0)
	s.At(0, n, kindTx, 0)
	s.Run()
	fmt.Println("events:", s.Events())
	// Output:
	// 0ns: send 1
	// 100ns: send 2
	// 200ns: send 3
	// 450ns: retransmission timeout
	// events: 4
}
