package perftest

import (
	"strings"
	"testing"

	"github.com/rnic/rnic"
)

// TestQPAccessAsPerftest: each side's QP grants only the remote right of
// its own test, as perftest's ctx_modify_qp_to_init does, so a client
// whose operation the server's test does not grant fails as against
// perftest: the server's QP NAKs it (invalid request), not the memory
// region (remote access error), which is what granting every right made
// it before.
func TestQPAccessAsPerftest(t *testing.T) {
	cases := []struct {
		name     string
		srv, cli Test
	}{
		{"write-to-read_bw-server", ReadBW, WriteBW},
		{"read-from-write_bw-server", WriteBW, ReadBW},
		{"atomic-to-read_bw-server", ReadBW, AtomicBW},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := NewConfig(c.cli)
			cfg.Size, cfg.Iters = 8, 10
			if c.cli == AtomicBW {
				cfg.Size = 0
			}
			_, cli := startPair(t, cfg, memOpener(t), memSrv, memCli, func(sc, cc *Config) {
				sc.Test = c.srv
			})
			if cli.err == nil || !strings.Contains(cli.err.Error(), rnic.WCRemInvReqErr.String()) {
				t.Fatalf("client: %v, want a completion with %q\n%s", cli.err, rnic.WCRemInvReqErr, cli.out.String())
			}
		})
	}
	for v, want := range map[Verb]rnic.Access{
		VerbWrite: rnic.AccessRemoteWrite, VerbRead: rnic.AccessRemoteRead, VerbAtomic: rnic.AccessRemoteAtomic,
		VerbSend: rnic.AccessRemoteWrite | rnic.AccessLocalWrite,
	} {
		if got := qpAccess(v); got != want {
			t.Errorf("qpAccess(%v) = %v, want %v", v, got, want)
		}
	}
}
