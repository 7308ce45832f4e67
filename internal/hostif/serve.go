package hostif

import (
	"net"
	"sync"
)

// Serve accepts connections on ln (a Unix socket's listener: the verbs
// socket, the CM socket) and runs serve for each in a goroutine of its
// own, until ln fails or is closed. Then it closes every connection
// still open (their programs see the NIC gone), waits for their serve
// calls to return (each tears down what its program held), and returns
// ln's error (net.ErrClosed after Close).
func Serve(ln net.Listener, serve func(*net.UnixConn)) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns = map[*net.UnixConn]bool{}
	)
	for {
		c, err := ln.Accept()
		if err != nil {
			mu.Lock()
			for uc := range conns {
				uc.Close()
			}
			mu.Unlock()
			wg.Wait()
			return err
		}
		uc, ok := c.(*net.UnixConn)
		if !ok {
			c.Close()
			continue
		}
		mu.Lock()
		conns[uc] = true
		mu.Unlock()
		wg.Go(func() {
			serve(uc)
			mu.Lock()
			delete(conns, uc)
			mu.Unlock()
		})
	}
}
