package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// ucxEnv is the environment UCX's programs run in on rnic: rnic's
// libraries, and the sysfs view preloaded, as rnic exec gives them.
func ucxEnv(lib, run string, more ...string) []string {
	return append(append(os.Environ(), "RNIC_RUN_DIR="+run, "LD_LIBRARY_PATH="+lib,
		"LD_PRELOAD="+filepath.Join(lib, "librnic-sysfs.so")), more...)
}

// ucxFinal returns the numbers of the "Final:" line ucx_perftest prints
// (iterations, then the latency or overhead percentile, average and
// overall, the bandwidth's and the message rate's average and overall),
// or an error that quotes the output.
func ucxFinal(out string) ([]float64, error) {
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) == 0 || f[0] != "Final:" {
			continue
		}
		var v []float64
		for _, s := range f[1:] {
			x, err := strconv.ParseFloat(s, 64)
			if err != nil {
				return nil, fmt.Errorf("ucx_perftest's Final line %q: %v", l, err)
			}
			v = append(v, x)
		}
		if len(v) != 8 {
			return nil, fmt.Errorf("ucx_perftest's Final line %q has %d numbers, want 8", l, len(v))
		}
		return v, nil
	}
	return nil, fmt.Errorf("ucx_perftest printed no Final line:\n%s", out)
}

// runUCXPair runs ucx_perftest's server with the environment srvEnv and
// the arguments srvArgs, and its client with cliEnv and args, and returns
// what the client printed.
func runUCXPair(t *testing.T, bin string, port int, srvEnv, cliEnv, srvArgs, args []string) string {
	t.Helper()
	s := exec.Command(bin, append([]string{"-p", strconv.Itoa(port)}, srvArgs...)...)
	s.Env = srvEnv
	out, _ := runServerClient(t, s, func() *exec.Cmd {
		c := exec.Command(bin, append([]string{"127.0.0.1", "-p", strconv.Itoa(port)}, args...)...)
		c.Env = cliEnv
		return c
	}, "Connection refused")
	return out
}

// TestUCX runs Debian's unmodified UCX (ucx-utils) on rnic: ucx_info
// sees each NIC with UCX's verbs transports, and ucx_perftest runs its
// UCP tests between two processes, the server on one NIC and the client
// on another, over RC (rc_v: rc_verbs for the data, ud_verbs to wire it
// up, as UCX requires of a transport that needs a connection) and over UD
// (ud_v), and its UCT tests on rc_verbs and ud_verbs alone; and io_demo,
// a UCX client and server connected by IP address through rdmacm; once
// with the two NICs in one process, once in two.
func TestUCX(t *testing.T) {
	info, err := exec.LookPath("ucx_info")
	if err != nil {
		t.Skip("skipped: no ucx_info; Debian: apt-get install ucx-utils")
	}
	perf, err := exec.LookPath("ucx_perftest")
	if err != nil {
		t.Skip("skipped: no ucx_perftest; Debian: apt-get install ucx-utils")
	}
	lib := buildProvider(t)
	for i, setup := range []struct {
		name  string
		addrs [][]string // the nic up commands' addresses
	}{
		{"one_process", [][]string{{"127.0.0.41", "127.0.0.42"}}},
		{"two_processes", [][]string{{"127.0.0.43"}, {"127.0.0.44"}}},
	} {
		t.Run(setup.name, func(t *testing.T) {
			run := upNICs(t, setup.addrs...)
			// ucx_info -d: both NICs, each a memory domain of UCX's ib
			// component with the rc_verbs and ud_verbs transports on
			// port 1, and the rdmacm connection manager.
			c := exec.Command(info, "-d")
			c.Env = ucxEnv(lib, run)
			out, err := c.CombinedOutput()
			if err != nil {
				t.Fatalf("ucx_info -d: %v\n%s", err, out)
			}
			for _, dev := range []string{"rnic0", "rnic1"} {
				md := strings.Index(string(out), "# Memory domain: "+dev+"\n")
				if md < 0 {
					t.Fatalf("ucx_info -d shows no memory domain %s:\n%s", dev, out)
				}
				rest := string(out[md:])
				if next := strings.Index(rest[1:], "# Memory domain:"); next >= 0 {
					rest = rest[:next+1]
				}
				for _, tl := range []string{"rc_verbs", "ud_verbs"} {
					if !strings.Contains(rest, "#      Transport: "+tl+"\n#         Device: "+dev+":1\n") {
						t.Errorf("ucx_info -d: %s has no %s on %s:1:\n%s", dev, tl, dev, rest)
					}
				}
			}
			if !strings.Contains(string(out), "# Connection manager: rdmacm") {
				t.Errorf("ucx_info -d shows no rdmacm connection manager:\n%s", out)
			}

			// A UCX client and server connected by IP address (a UCP
			// listener and ucp_ep_create by sockaddr) through the rdmacm
			// connection manager (UCX_SOCKADDR_TLS_PRIORITY=rdmacm: no
			// falling back to TCP's), reads and writes with their data
			// checked (-q).
			t.Run("io_demo_sockaddr", func(t *testing.T) {
				demo, err := exec.LookPath("io_demo")
				if err != nil {
					t.Skip("skipped: no io_demo; Debian: apt-get install ucx-utils")
				}
				port := strconv.Itoa(13390 + i)
				env := ucxEnv(lib, run, "UCX_TLS=rc_v,self", "UCX_SOCKADDR_TLS_PRIORITY=rdmacm")
				s := exec.Command(demo, "-p", port, "-q", "-d", "1024:65536")
				s.Env = env
				var so strings.Builder
				s.Stdout, s.Stderr = &so, &so
				if err := s.Start(); err != nil {
					t.Fatal(err)
				}
				defer func() { s.Process.Kill(); s.Wait() }()
				last := setup.addrs[len(setup.addrs)-1]
				c := exec.Command(demo, "-p", port, "-q", "-i", "500", "-o", "read,write", "-d", "1024:65536", "-c", "30", last[len(last)-1])
				c.Env = env
				out, err := c.CombinedOutput()
				if err != nil || !strings.Contains(string(out), "Client exit with status 'OK'") {
					t.Fatalf("io_demo client: %v\n%s\nserver:\n%s", err, out, so.String())
				}
				// Its last report: the operations done, 500 in all.
				reports := regexp.MustCompile(`total min:(\d+) max:\d+ total:(\d+)`).FindAllStringSubmatch(string(out), -1)
				sum := 0
				for _, r := range reports {
					n, _ := strconv.Atoi(r[2])
					sum += n
				}
				if sum != 500 {
					t.Errorf("io_demo's reports add up to %d operations, want 500:\n%s", sum, out)
				}
			})

			port := 13400 + 40*i
			srv := func(more ...string) []string {
				return ucxEnv(lib, run, append([]string{"UCX_NET_DEVICES=rnic0:1"}, more...)...)
			}
			cli := func(more ...string) []string {
				return ucxEnv(lib, run, append([]string{"UCX_NET_DEVICES=rnic1:1"}, more...)...)
			}
			type ucxCase struct {
				name string
				env  []string // UCX_TLS
				args []string
				size int // bytes per message
				iter int
			}
			var cases []ucxCase
			for _, tls := range []string{"rc_v", "ud_v"} {
				for _, test := range []string{"tag_lat", "tag_bw", "ucp_put_bw", "ucp_get", "stream_bw"} {
					cases = append(cases, ucxCase{name: tls + "/" + test, env: []string{"UCX_TLS=" + tls + ",self"},
						args: []string{"-t", test}, size: 4096, iter: 500})
				}
			}
			// UCT on one transport, without UCP's wire-up: rc_verbs's and
			// ud_verbs's own endpoints, active messages and RDMA WRITEs.
			for _, tl := range []string{"rc_verbs", "ud_verbs"} {
				cases = append(cases, ucxCase{name: tl + "/am_lat", args: []string{"-x", tl, "-t", "am_lat"}, size: 8, iter: 500})
			}
			cases = append(cases, ucxCase{name: "rc_verbs/put_bcopy", args: []string{"-x", "rc_verbs", "-t", "put_bw", "-D", "bcopy"}, size: 2048, iter: 500})
			for j, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					args := append(append([]string{}, tc.args...), "-n", strconv.Itoa(tc.iter), "-s", strconv.Itoa(tc.size))
					senv, cenv := srv(tc.env...), cli(tc.env...)
					var srvArgs []string
					if tc.args[0] == "-x" { // UCT: the device and the transport are arguments, on both sides
						senv, cenv = ucxEnv(lib, run), ucxEnv(lib, run)
						srvArgs = []string{"-d", "rnic0:1", "-x", tc.args[1]}
						args = append([]string{"-d", "rnic1:1"}, args...)
					}
					checkUCXFinal(t, runUCXPair(t, perf, port+j, senv, cenv, srvArgs, args), tc.iter)
				})
			}
		})
	}
}

// checkUCXFinal checks the Final line of a test of iter iterations: all
// done, and a positive rate.
func checkUCXFinal(t *testing.T, out string, iter int) {
	t.Helper()
	v, err := ucxFinal(out)
	if err != nil {
		t.Fatal(err)
	}
	if int(v[0]) != iter {
		t.Errorf("ucx_perftest ran %v iterations, want %d:\n%s", v[0], iter, out)
	}
	if v[7] <= 0 {
		t.Errorf("ucx_perftest reports no messages:\n%s", out)
	}
	t.Logf("%s", strings.TrimSpace(out[strings.LastIndex(out, "Final:"):]))
}
