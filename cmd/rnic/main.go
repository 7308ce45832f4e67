// Command rnic is the command line of rnic, a software RDMA NIC (RoCEv2)
// in pure Go. Its subcommands: demo runs two NICs in one process and
// walks through every RDMA operation, showing the packets; perf runs
// perftest's benchmarks against another rnic or a real perftest; stat shows
// the counters and QPs of running devices; sim runs perftest-like workloads on
// simulated RNICs in virtual time and sweeps their parameters.
package main

import (
	"errors"
	"os"

	"github.com/rnic/rnic"
	"github.com/spf13/cobra"
)

func main() {
	if err := newRootCmd().Execute(); err != nil {
		var ec *exitCode
		if errors.As(err, &ec) {
			os.Exit(ec.code) // rnic exec: the program's own status
		}
		os.Exit(1)
	}
}

// newRootCmd returns the rnic command with its subcommands.
func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "rnic",
		Short: "rnic is a software RDMA NIC (RoCEv2) in pure Go",
		Long: `rnic is a software RDMA NIC speaking RoCEv2, built like a hardware RNIC:
doorbells and an arbiter, SRAM caches for QP contexts and translation
entries, an address translation unit, DMA engines and a protocol engine.

Start with "rnic demo": two NICs in one process doing every RDMA operation.
"rnic perf" runs perftest's benchmarks over UDP; "rnic stat" shows the
counters and QPs of running devices (rnic perf's, and those of any program
that publishes its own); "rnic sim" runs the same workloads on simulated
hardware RNICs in virtual time. "rnic nic up" starts a NIC that serves other
local processes through rnic's host interface.`,
		Version:      rnic.Version,
		SilenceUsage: true,
	}
	// "rnic version 0.2.0-dev", as "rnic --version" prints it.
	root.SetVersionTemplate("rnic version {{.Version}}\n")
	root.AddCommand(newDemoCmd(), newPerfCmd(), newStatCmd(), newSimCmd(), newNICCmd(), newExecCmd())
	return root
}
