package cm_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rnic/rnic"
	"github.com/rnic/rnic/cm"
	"github.com/rnic/rnic/internal/rping"
	"github.com/rnic/rnic/link/udp"
)

// TestRping: the Go rping client and server against each other, 100
// iterations of 64 bytes, over the connection manager.
func TestRping(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := devices(t, nil)
		l, err := cm.Listen(b, 7174, &rping.Config)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		served := make(chan error, 1)
		go func() {
			c, err := l.Accept(context.Background())
			if err == nil {
				var n int
				n, err = rping.Server(context.Background(), c, 0, 64)
				if err == nil && n != 100 {
					err = fmt.Errorf("served %d pings, want 100", n)
				}
				c.Close()
			}
			served <- err
		}()
		c, err := cm.Dial(context.Background(), a, netip.AddrPortFrom(addrB, 7174), &rping.Config)
		if err != nil {
			t.Fatal(err)
		}
		if err := rping.Client(context.Background(), c, 100, 64); err != nil {
			t.Fatal(err)
		}
		c.Close()
		if err := <-served; err != nil {
			t.Fatal(err)
		}
	})
}

// TestInteropRping: the Go side of rping against Linux's rping on rxe
// (scripts/interop.sh --cm runs it in the VM harness's namespace). With
// RNIC_RPING_SERVER=addr:port it is the client of an `rping -s -V`;
// with RNIC_RPING_LISTEN=port it serves an `rping -c -V` (a count of
// RNIC_RPING_COUNT, 10 if unset). RNIC_CM_ADDR is this side's address.
// Skipped unless set.
func TestInteropRping(t *testing.T) {
	addr, server, port := os.Getenv("RNIC_CM_ADDR"), os.Getenv("RNIC_RPING_SERVER"), os.Getenv("RNIC_RPING_LISTEN")
	if addr == "" || server == "" && port == "" {
		t.Skip("skipped: an interop check against rping on another machine (scripts/interop.sh --cm)")
	}
	count := 10
	if s := os.Getenv("RNIC_RPING_COUNT"); s != "" {
		count, _ = strconv.Atoi(s)
	}
	l, err := udp.Open(udp.Options{Addr: netip.MustParseAddr(addr)})
	if err != nil {
		t.Fatal(err)
	}
	dev, err := rnic.Open(rnic.Options{Link: l})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if server != "" {
		c, err := cm.Dial(ctx, dev, netip.MustParseAddrPort(server), &rping.Config)
		if err != nil {
			t.Fatal(err)
		}
		if err := rping.Client(ctx, c, count, 64); err != nil {
			t.Fatal(err)
		}
		c.Close()
		t.Logf("rping client: %d pings verified against %s", count, server)
		return
	}
	p, _ := strconv.Atoi(port)
	ln, err := cm.Listen(dev, uint16(p), &rping.Config)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := ln.Accept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n, err := rping.Server(ctx, c, 0, 64)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	t.Logf("rping server: %d pings served to %v", n, c.RemoteAddr())
	if n != count {
		t.Errorf("served %d pings, want %d", n, count)
	}
}
