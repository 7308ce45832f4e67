package rnic_test

import (
	"context"
	"fmt"
	"log"

	"github.com/rnic/rnic"
	"github.com/rnic/rnic/sim/vclock"
)

// The same verbs code on the timing model of a ConnectX-6 (the cx6-200g
// profile): both NICs are opened on a VirtualClock instead of a link, and
// the program runs inside the clock's Run, where its waits move virtual
// time. A ping-pong of 64-byte SENDs reports the round trip the model
// gives, the same on every run.
func ExampleVirtualClock() {
	clock, err := vclock.New(vclock.Options{Profile: "cx6-200g", Seed: 1})
	if err != nil {
		log.Fatal(err)
	}
	a, _ := rnic.Open(rnic.Options{Clock: clock, Name: "a"}) // on the clock's fabric, 10.0.0.1
	b, _ := rnic.Open(rnic.Options{Clock: clock, Name: "b"}) // 10.0.0.2
	defer a.Close()
	defer b.Close()

	qcap := rnic.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}
	pdA, _ := a.AllocPD()
	pdB, _ := b.AllocPD()
	bufA, _ := pdA.RegMR(make([]byte, 64), rnic.AccessLocalWrite)
	bufB, _ := pdB.RegMR(make([]byte, 64), rnic.AccessLocalWrite)
	cqA, _ := a.CreateCQ(16)
	cqB, _ := b.CreateCQ(16)
	qpA, _ := pdA.CreateQP(rnic.QPInitAttr{Type: rnic.RC, SendCQ: cqA, RecvCQ: cqA, Cap: qcap})
	qpB, _ := pdB.CreateQP(rnic.QPInitAttr{Type: rnic.RC, SendCQ: cqB, RecvCQ: cqB, Cap: qcap})
	if err := qpA.Connect(qpB.Endpoint(rnic.ConnParams{}), rnic.ConnParams{}); err != nil {
		log.Fatal(err)
	}
	if err := qpB.Connect(qpA.Endpoint(rnic.ConnParams{}), rnic.ConnParams{}); err != nil {
		log.Fatal(err)
	}

	// wait takes completions until one of op arrives.
	wait := func(cq *rnic.CQ, op rnic.WCOpcode) {
		wc := make([]rnic.WC, 1)
		for {
			if _, err := cq.Wait(context.Background(), wc); err != nil || wc[0].Status != rnic.WCSuccess {
				log.Fatal(err, wc[0].Status)
			}
			if wc[0].Opcode == op {
				return
			}
		}
	}
	const iters = 100
	err = clock.Run(func() {
		// B echoes every SEND, in a thread of its own.
		clock.Go(func() {
			for range iters {
				qpB.PostRecv(rnic.RecvWR{SGL: []rnic.SGE{bufB.SGE(0, 64)}})
				wait(cqB, rnic.WCRecv)
				qpB.PostSend(rnic.SendWR{Opcode: rnic.WRSend, SGL: []rnic.SGE{bufB.SGE(0, 64)}})
			}
		})
		start := clock.Now()
		for range iters {
			qpA.PostRecv(rnic.RecvWR{SGL: []rnic.SGE{bufA.SGE(0, 64)}})
			qpA.PostSend(rnic.SendWR{Opcode: rnic.WRSend, SGL: []rnic.SGE{bufA.SGE(0, 64)}})
			wait(cqA, rnic.WCRecv)
		}
		fmt.Printf("%d round trips of 64 B SENDs: %v each\n", iters, (clock.Now()-start)/iters)
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output:
	// 100 round trips of 64 B SENDs: 4.246µs each
}
