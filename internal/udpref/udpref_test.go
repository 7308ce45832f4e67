package udpref

import (
	"context"
	"errors"
	"net/netip"
	"runtime"
	"testing"
	"time"
)

var (
	lo1 = netip.MustParseAddr("127.0.0.1")
	lo2 = netip.MustParseAddr("127.0.0.2")
)

func TestStream(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("Linux only")
	}
	for _, tc := range []struct {
		name     string
		src, dst netip.Addr
		size     int
		count    int
		batch    int
	}{
		{"v4 4 KiB", lo2, lo1, 4112, 5000, 0},
		{"v4 small, odd batch", lo2, lo1, 40, 1001, 7},
		{"v6", netip.IPv6Loopback(), netip.IPv6Loopback(), 1500, 500, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Stream(context.Background(), StreamOptions{Src: tc.src, Dst: tc.dst, Size: tc.size, Count: tc.count, Batch: tc.batch})
			if err != nil {
				if tc.dst.Is6() {
					t.Skipf("no IPv6 loopback: %v", err)
				}
				t.Fatal(err)
			}
			if int64(r.Datagrams)+r.Drops != int64(tc.count) {
				t.Errorf("%d received + %d dropped, want %d", r.Datagrams, r.Drops, tc.count)
			}
			if r.Bytes != int64(r.Datagrams)*int64(tc.size) {
				t.Errorf("%d bytes in %d datagrams of %d", r.Bytes, r.Datagrams, tc.size)
			}
			if r.Elapsed <= 0 || r.MBps() <= 0 {
				t.Errorf("elapsed %v, %.1f MB/s", r.Elapsed, r.MBps())
			}
		})
	}
}

func TestPingPong(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("Linux only")
	}
	r, err := PingPong(context.Background(), lo2, lo1, 40, 200)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.RTTs) != 200 {
		t.Fatalf("%d round trips", len(r.RTTs))
	}
	for i, d := range r.RTTs {
		if d <= 0 || d > 10*time.Second {
			t.Fatalf("RTT %d: %v", i, d)
		}
	}
}

func TestBadOptions(t *testing.T) {
	if _, err := Stream(context.Background(), StreamOptions{Src: lo2, Dst: lo1, Size: 0, Count: 1}); err == nil {
		t.Error("Stream with size 0: no error")
	}
	if _, err := PingPong(context.Background(), lo2, lo1, 70000, 1); err == nil {
		t.Error("PingPong with size 70000: no error")
	}
	if _, err := Stream(context.Background(), StreamOptions{Src: netip.MustParseAddr("192.0.2.1"), Dst: lo1, Size: 10, Count: 1}); err == nil && runtime.GOOS == "linux" {
		t.Error("Stream from an address not on this host: no error")
	}
}

func TestPingPongCancel(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("Linux only")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	// Far more iterations than fit in the deadline: it must stop there.
	start := time.Now()
	_, err := PingPong(ctx, lo2, lo1, 40, 1<<30)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err %v, want %v", err, context.DeadlineExceeded)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v to stop", d)
	}
}
