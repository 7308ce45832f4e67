package main

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rnic/rnic"
	"github.com/rnic/rnic/cm"
	"github.com/rnic/rnic/internal/rping"
	"github.com/rnic/rnic/link/udp"
)

// TestRDMACM runs Debian's unmodified RDMA CM programs (rdmacm-utils,
// perftest with -R) on rnic's librdmacm.so.1 and libibverbs.so.1, server
// and client in two processes on two NICs of "rnic nic up": each
// connects through the NICs' connection managers (REQ, REP, RTU on QP1
// over link/udp), moves and checks its data, and disconnects.
func TestRDMACM(t *testing.T) {
	lib := buildProvider(t)
	if _, err := os.Stat(filepath.Join(lib, "librdmacm.so.1")); err != nil {
		t.Skip("skipped: no <rdma/rdma_cma.h> to build librdmacm against; Debian: apt-get install librdmacm-dev")
	}
	run := t.TempDir()
	t.Setenv("RNIC_RUN_DIR", run)
	t.Setenv("RNIC_TEST_MAIN", "1")
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	t.Cleanup(func() { nicCmd(t, "down", "--all") })
	const srvAddr, cliAddr = "127.0.0.41", "127.0.0.42"
	if out, err := nicCmd(t, "up", "--addr", srvAddr, "--addr", cliAddr); err != nil {
		t.Fatalf("nic up: %v\n%s", err, out)
	}
	env := append(os.Environ(), "LD_LIBRARY_PATH="+lib)
	need := func(t *testing.T, prog, pkg string) string {
		t.Helper()
		bin, err := exec.LookPath(prog)
		if err != nil {
			t.Skipf("skipped: no %s; Debian: apt-get install %s", prog, pkg)
		}
		return bin
	}
	// pairOpt runs srv in the background and cli until it connects (the
	// server may not listen yet: a REJ, reason 8, or for UD a SIDR REP
	// that says no such service, UNREACHABLE), and returns both
	// outputs; either failing fails the test. A server that serves
	// forever (forever) is stopped once the client is done.
	pairOpt := func(t *testing.T, srv, cli []string, forever bool) (string, string) {
		t.Helper()
		s := startBackground(t, env, srv...)
		var out []byte
		var err error
		var earlier strings.Builder // the output of servers that ended and were started again
		restarts, try := 0, 0
		for ; try < 150; try++ { // 15 s and more: a server that gave up first times out its half-made connections
			c := exec.Command(cli[0], cli[1:]...)
			c.Env = env
			out, err = c.CombinedOutput()
			o := string(out)
			if err == nil || !strings.Contains(o, "REJECTED") && !strings.Contains(o, "CM event bl blka 8") &&
				!strings.Contains(o, "Connection refused") && !strings.Contains(o, "RDMA_CM_EVENT_UNREACHABLE") {
				break
			}
			// Refused: the server did not listen yet. A client of several
			// connections (ucmatose -c 4) may have had some taken and the
			// rest refused, and the server then gave up on those: a
			// server that ended starts again.
			if s.exited() {
				fmt.Fprintf(&earlier, "--- server %d ended:\n%s", restarts+1, s.out.String())
				restarts++
				s = startBackground(t, env, srv...)
			} else if try > 0 && try%50 == 0 {
				// A server that refused for 5 s has not reached its
				// listen (seen under loaded full runs: perftest -R's
				// server printed nothing, or only its "Device not
				// recognized" line, while every REQ was refused): start
				// it again, keeping what it did for the report, and say
				// so in the log.
				s.kill()
				t.Logf("%s: the server refused for 5 s; started again (it printed %q)", filepath.Base(srv[0]), s.out.String())
				fmt.Fprintf(&earlier, "--- server %d, refusing after %d tries, killed:\n%s", restarts+1, try, s.out.String())
				restarts++
				s = startBackground(t, env, srv...)
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			s.kill()
			t.Fatalf("%s: %v after %d tries, the server started %d times\n%s\nserver:\n%s%s", filepath.Base(cli[0]), err, try, restarts+1, out, earlier.String(), s.out.String())
		}
		if forever {
			s.kill()
			return string(out), s.out.String()
		}
		if ended, err := s.wait(60 * time.Second); !ended {
			t.Fatalf("%s server did not end:\n%s", filepath.Base(srv[0]), s.out.String())
		} else if err != nil {
			t.Fatalf("%s server: %v\n%s", filepath.Base(srv[0]), err, s.out.String())
		}
		return string(out), s.out.String()
	}
	pair := func(t *testing.T, srv, cli []string) (string, string) {
		t.Helper()
		return pairOpt(t, srv, cli, false)
	}
	expect := func(t *testing.T, out string, want ...string) {
		t.Helper()
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("the output does not show %q:\n%s", w, out)
			}
		}
	}

	// rping -V: 1000 pings, each READ by the server and WRITten back,
	// checked by the client.
	t.Run("rping", func(t *testing.T) {
		bin := need(t, "rping", "rdmacm-utils")
		cli, srv := pair(t, []string{bin, "-s", "-a", srvAddr, "-p", "7501", "-C", "1000", "-V", "-v"},
			[]string{bin, "-c", "-a", srvAddr, "-I", cliAddr, "-p", "7501", "-C", "1000", "-V", "-v"})
		expect(t, cli, "ping data: rdma-ping-999")
		expect(t, srv, "rdma-ping-999") // stdout and stderr interleave
	})
	// A server on the wildcard address listens on every NIC (the client
	// reaches it on the other NIC's address).
	t.Run("rping_wildcard", func(t *testing.T) {
		bin := need(t, "rping", "rdmacm-utils")
		cli, _ := pair(t, []string{bin, "-s", "-a", "0.0.0.0", "-p", "7502", "-C", "10", "-V", "-v"},
			[]string{bin, "-c", "-a", cliAddr, "-p", "7502", "-C", "10", "-V", "-v"})
		expect(t, cli, "ping data: rdma-ping-9")
	})
	// Nobody listens: the REQ is rejected with reason 8, as on Linux.
	t.Run("rping_rejected", func(t *testing.T) {
		bin := need(t, "rping", "rdmacm-utils")
		c := exec.Command(bin, "-c", "-a", srvAddr, "-p", "7599", "-C", "1")
		c.Env = env
		out, err := c.CombinedOutput()
		if err == nil {
			t.Fatalf("rping to a port nobody listens on succeeded:\n%s", out)
		}
		expect(t, string(out), "RDMA_CM_EVENT_REJECTED, error 8")
	})
	// UD: SIDR, then datagrams both ways (udaddy names its QP in the
	// immediate data; the server answers with an AH from the receive).
	t.Run("udaddy", func(t *testing.T) {
		bin := need(t, "udaddy", "rdmacm-utils")
		cli, srv := pair(t, []string{bin, "-b", srvAddr}, []string{bin, "-s", srvAddr, "-b", cliAddr})
		expect(t, cli, "data transfers complete", "return status 0")
		expect(t, srv, "sending replies", "return status 0")
	})
	t.Run("ucmatose", func(t *testing.T) {
		bin := need(t, "ucmatose", "rdmacm-utils")
		cli, srv := pair(t, []string{bin, "-b", srvAddr, "-p", "7503", "-c", "4"},
			[]string{bin, "-s", srvAddr, "-b", cliAddr, "-p", "7503", "-c", "4"})
		expect(t, cli, "return status 0")
		expect(t, srv, "return status 0")
	})
	// rdma_server/rdma_client: rdma_getaddrinfo, rdma_create_ep, the sync
	// ids (rdma_get_request) and rdma_verbs.h's helpers.
	t.Run("rdma_server", func(t *testing.T) {
		srvBin, cliBin := need(t, "rdma_server", "rdmacm-utils"), need(t, "rdma_client", "rdmacm-utils")
		cli, srv := pair(t, []string{srvBin, "-s", srvAddr, "-p", "7504"}, []string{cliBin, "-s", srvAddr, "-p", "7504"})
		expect(t, cli, "rdma_client: end 0")
		expect(t, srv, "rdma_server: end 0")
	})
	t.Run("cmtime", func(t *testing.T) {
		bin := need(t, "cmtime", "rdmacm-utils")
		cli, _ := pairOpt(t, []string{bin, "-b", srvAddr, "-p", "7505", "-c", "20"},
			[]string{bin, "-s", srvAddr, "-b", cliAddr, "-p", "7505", "-c", "20"}, true) // its server serves until killed
		expect(t, cli, "connect", "disconnect")
	})
	// rsockets: rstream moves its data through rnic's rsockets (RDMA
	// WRITE with immediate into the peer's buffer, credits, control
	// messages) and checks every byte (-T v), non-blocking (its default,
	// spinning on EAGAIN), blocking (-T b) and with rpoll (-T a).
	for i, mode := range [][]string{{"-T", "v"}, {"-T", "b", "-T", "v"}, {"-T", "a", "-T", "v"}} {
		t.Run("rstream"+strings.Join(mode[:len(mode)-2], ""), func(t *testing.T) {
			bin := need(t, "rstream", "rdmacm-utils")
			port := fmt.Sprint(7540 + i)
			args := append([]string{"-p", port, "-S", "100000", "-C", "200"}, mode...)
			cli, srv := pair(t, append([]string{bin, "-b", srvAddr}, args...), append([]string{bin, "-s", srvAddr, "-b", cliAddr}, args...))
			expect(t, cli, "custom    97k     200")
			expect(t, srv, "custom    97k     200")
			t.Logf("%s", strings.TrimSpace(cli))
		})
	}
	// riostream: riomap publishes the receiver's buffer in the peer's
	// iomap table and riowrite WRITEs into it directly.
	t.Run("riostream", func(t *testing.T) {
		bin := need(t, "riostream", "rdmacm-utils")
		args := []string{"-p", "7543", "-S", "65536", "-C", "100", "-T", "v"}
		cli, srv := pair(t, append([]string{bin, "-b", srvAddr}, args...), append([]string{bin, "-s", srvAddr, "-b", cliAddr}, args...))
		expect(t, cli, "custom    64k     100")
		expect(t, srv, "custom    64k     100")
	})
	// The rest of the socket API, as a program of the repository's uses
	// it (provider/tests/rsocket.c): names, options, EAGAIN and rpoll's
	// timeout, MSG_PEEK and MSG_WAITALL, iovecs, riomap/riowrite, the
	// half close and the end of the stream; then a peer killed while
	// connected ends the other's blocking read, and peers that break the
	// protocol are refused or cut off.
	t.Run("rsocket_api", func(t *testing.T) {
		if _, err := exec.LookPath("cc"); err != nil {
			t.Skip("skipped: no C compiler (cc); Debian: apt-get install gcc")
		}
		bin := filepath.Join(t.TempDir(), "rsocket")
		if out, err := exec.Command("cc", "-O2", "-Wall", "-o", bin, "../../provider/tests/rsocket.c", "-L"+lib,
			"-l:librdmacm.so.1", "-l:libibverbs.so.1").CombinedOutput(); err != nil {
			t.Fatalf("cc: %v\n%s", err, out)
		}
		cli, srv := pair(t, []string{bin, "server", srvAddr, "7544"}, []string{bin, "client", srvAddr, "7544", cliAddr})
		expect(t, cli, "ok")
		expect(t, srv, "ok")

		v := startBackground(t, env, bin, "victim", srvAddr, "7545")
		ready := filepath.Join(t.TempDir(), "ready")
		h := startBackground(t, append(env, "RSOCKET_READY="+ready), bin, "hold", srvAddr, "7545", cliAddr)
		for i := 0; i < 200; i++ {
			if _, err := os.Stat(ready); err == nil {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		h.kill()
		if ended, err := v.wait(20 * time.Second); !ended || err != nil {
			t.Fatalf("the server of a killed client: ended %v, %v\n%s", ended, err, v.out.String())
		}
		expect(t, v.out.String(), "peer gone", "ok")

		// A peer that is not an rsocket (connection data of another
		// version, or too short) is refused inside raccept, which goes
		// on to the next request; one that sends a DATA message larger
		// than any buffer ends the connection: rrecv fails with EPROTO.
		ready = filepath.Join(t.TempDir(), "ready")
		st := startBackground(t, append(env, "RSOCKET_READY="+ready), bin, "strict", srvAddr, "7546")
		for i := 0; i < 200; i++ {
			if _, err := os.Stat(ready); err == nil {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		c := exec.Command(bin, "rogue", srvAddr, "7546")
		c.Env = env
		out, err := c.CombinedOutput()
		if err != nil {
			st.kill()
			t.Fatalf("rogue peer: %v\n%s\nserver:\n%s", err, out, st.out.String())
		}
		if ended, err := st.wait(20 * time.Second); !ended || err != nil {
			t.Fatalf("the server of a rogue peer: ended %v, %v\n%s", ended, err, st.out.String())
		}
	})
	// The Go API (package cm) and rping through the library, both ways: a
	// device of this process on 127.0.0.43 dials rping's server on
	// rnic0, and rping's client on rnic1 connects to its listener.
	t.Run("go_rping", func(t *testing.T) {
		bin := need(t, "rping", "rdmacm-utils")
		l, err := udp.Open(udp.Options{Addr: netip.MustParseAddr("127.0.0.43")})
		if err != nil {
			t.Fatal(err)
		}
		dev, err := rnic.Open(rnic.Options{Link: l})
		if err != nil {
			t.Fatal(err)
		}
		defer dev.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		s := startBackground(t, env, bin, "-s", "-a", srvAddr, "-p", "7520", "-C", "100", "-V")
		var c *cm.Conn
		for try := 0; try < 50; try++ { // until rping listens
			if c, err = cm.Dial(ctx, dev, netip.MustParseAddrPort(srvAddr+":7520"), &rping.Config); err == nil || !errors.Is(err, cm.ErrRejected) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			s.kill()
			t.Fatalf("cm.Dial to rping -s: %v\n%s", err, s.out.String())
		}
		if err := rping.Client(ctx, c, 100, 64); err != nil {
			s.kill()
			t.Fatalf("100 pings to rping -s: %v\n%s", err, s.out.String())
		}
		c.Close()
		if ended, err := s.wait(60 * time.Second); err != nil || !ended {
			t.Fatalf("rping -s after cm.Dial's client: %v (ended %v)\n%s", err, ended, s.out.String())
		}

		ln, err := cm.Listen(dev, 7521, &rping.Config)
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		cl := startBackground(t, env, bin, "-c", "-a", "127.0.0.43", "-I", cliAddr, "-p", "7521", "-C", "100", "-V")
		sc, err := ln.Accept(ctx)
		if err != nil {
			cl.kill()
			t.Fatalf("cm.Listen's Accept of rping -c: %v\n%s", err, cl.out.String())
		}
		n, err := rping.Server(ctx, sc, 0, 64)
		sc.Close()
		if ended, err := cl.wait(60 * time.Second); err != nil || !ended {
			t.Fatalf("rping -c against cm.Listen: %v (ended %v)\n%s", err, ended, cl.out.String())
		}
		if err != nil || n != 100 {
			t.Fatalf("cm.Listen's server: %d pings, %v", n, err)
		}
	})
	// A NIC that goes away: the ids on it get DEVICE_REMOVAL (rping's
	// listener exits saying so) instead of waiting forever.
	t.Run("device_removal", func(t *testing.T) {
		bin := need(t, "rping", "rdmacm-utils")
		if out, err := nicCmd(t, "up", "--addr", "127.0.0.44"); err != nil {
			t.Fatalf("nic up: %v\n%s", err, out)
		}
		s := startBackground(t, env, bin, "-s", "-a", "127.0.0.44", "-p", "7530", "-C", "1")
		time.Sleep(500 * time.Millisecond) // rping listens
		if out, err := nicCmd(t, "down", "rnic2"); err != nil {
			t.Fatalf("nic down rnic2: %v\n%s", err, out)
		}
		if ended, _ := s.wait(20 * time.Second); !ended {
			t.Fatalf("rping -s on a NIC that went away did not end:\n%s", s.out.String())
		}
		expect(t, s.out.String(), "device removal")
	})
	// perftest with -R: the connection through RDMA CM instead of its
	// TCP exchange.
	for i, tc := range []struct{ prog, want string }{
		{"ib_write_bw", "BW average"}, {"ib_read_bw", "BW average"}, {"ib_send_bw", "BW average"}, {"ib_write_lat", "t_typical"},
	} {
		t.Run(tc.prog+"_R", func(t *testing.T) {
			bin := need(t, tc.prog, "perftest")
			port := fmt.Sprint(7510 + i)
			cli, _ := pair(t, []string{bin, "-R", "-d", "rnic0", "-x", "1", "-n", "200", "-p", port},
				[]string{bin, "-R", "-d", "rnic1", "-x", "1", "-n", "200", "-p", port, srvAddr})
			expect(t, cli, tc.want, "Device         : rnic1")
			lines := strings.Split(strings.TrimSpace(cli), "\n")
			t.Logf("%s", strings.Join(lines[max(0, len(lines)-3):], "\n"))
		})
	}
}

// background is a program run in the background with rnic's libraries
// (env), its output and its end.
type background struct {
	cmd  *exec.Cmd
	out  syncBuffer    // its standard output and error
	done chan struct{} // closed when the program has ended
	err  error         // its end, once done is closed
}

func startBackground(t *testing.T, env []string, argv ...string) *background {
	t.Helper()
	b := &background{cmd: exec.Command(argv[0], argv[1:]...), done: make(chan struct{})}
	b.cmd.Env = env
	b.cmd.Stdout, b.cmd.Stderr = &b.out, &b.out
	if err := b.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { b.err = b.cmd.Wait(); close(b.done) }()
	return b
}

// exited reports whether the program has ended.
func (b *background) exited() bool {
	select {
	case <-b.done:
		return true
	default:
		return false
	}
}

// kill ends the program and waits for it.
func (b *background) kill() {
	b.cmd.Process.Kill()
	<-b.done
}

// wait waits at most d for the program's end: false if it had to be
// killed, and its error.
func (b *background) wait(d time.Duration) (bool, error) {
	select {
	case <-b.done:
		return true, b.err
	case <-time.After(d):
		b.kill()
		return false, nil
	}
}
