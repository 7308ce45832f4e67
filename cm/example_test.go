package cm_test

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/rnic/rnic"
	"github.com/rnic/rnic/cm"
	"github.com/rnic/rnic/link/mem"
)

// Two devices connect an RC QP pair through the connection manager (REQ,
// REP, RTU on QP1), as rdma_connect and rdma_accept do, and the client
// SENDs a message to the server.
func ExampleDial() {
	ctx := context.Background()
	pa, pb, _ := mem.Pipe(netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"), mem.Faults{}, mem.Faults{})
	client, _ := rnic.Open(rnic.Options{Link: pa})
	server, _ := rnic.Open(rnic.Options{Link: pb})
	defer client.Close()
	defer server.Close()

	l, _ := cm.Listen(server, 7471, &cm.Config{PrivateData: []byte("hi")})
	defer l.Close()
	accepted := make(chan *cm.Conn)
	go func() {
		c, err := l.Accept(ctx)
		if err != nil {
			panic(err)
		}
		accepted <- c
	}()

	conn, err := cm.Dial(ctx, client, netip.MustParseAddrPort("10.0.0.2:7471"), nil)
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	sc := <-accepted
	defer sc.Close()
	fmt.Printf("connected to %v, QP %#x to QP %#x, REP said %q\n", conn.RemoteAddr(), conn.QP().QPN(), sc.QP().QPN(), conn.PrivateData()[:2])

	// The server posts a receive, the client sends.
	buf := make([]byte, 64)
	rmr, _ := sc.QP().PD().RegMR(buf, rnic.AccessLocalWrite)
	_ = sc.QP().PostRecv(rnic.RecvWR{WRID: 1, SGL: []rnic.SGE{rmr.SGE(0, 64)}})
	smr, _ := conn.QP().PD().RegMR([]byte("hello over RDMA CM"), rnic.AccessLocalWrite)
	_ = conn.QP().PostSend(rnic.SendWR{Opcode: rnic.WRSend, Flags: rnic.SendSignaled, SGL: []rnic.SGE{smr.SGE(0, smr.Len())}})
	_, init, _ := sc.QP().Query()
	wc := make([]rnic.WC, 1)
	_, _ = init.RecvCQ.Wait(ctx, wc)
	fmt.Printf("server received %q\n", buf[:wc[0].ByteLen])
	// Output:
	// connected to 10.0.0.2:7471, QP 0x11 to QP 0x11, REP said "hi"
	// server received "hello over RDMA CM"
}
