package main

import (
	"github.com/spf13/cobra"
)

// newDemoCmd returns the demo subcommand.
func newDemoCmd() *cobra.Command {
	cfg := defaultDemoConfig()
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Two NICs in one process doing RDMA, with the packets shown",
		Long: `demo opens two software RNICs, rnic0 (10.0.0.1) and rnic1 (10.0.0.2), joined
by an in-process wire, connects a reliable-connection (RC) queue pair on
each, and runs every RDMA operation in turn: WRITE, WRITE WITH IMMEDIATE,
READ, SEND/RECV, SEND WITH IMMEDIATE, FETCH_AND_ADD and COMPARE_AND_SWAP.
Then it makes the wire lose packets and shows a 1 MiB WRITE recover by
retransmission. Every result is checked; the first packets of each
operation are decoded, and a table at the end shows what happened inside
each NIC (caches, DMA, retransmissions).

It exits with status 1 if any check fails.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDemo(cmd.Context(), cmd.OutOrStdout(), cfg)
		},
	}
	f := cmd.Flags()
	f.IntVar(&cfg.size, "size", cfg.size, "bytes moved by the WRITE, WRITE WITH IMMEDIATE and READ (1 B to 64 MiB)")
	f.Float64Var(&cfg.loss, "loss", cfg.loss, "probability that the wire loses a frame in the loss step")
	f.IntVar(&cfg.mtu, "mtu", cfg.mtu, "path MTU: 256, 512, 1024, 2048 or 4096")
	f.StringVar(&cfg.pcap, "pcap", "", "write every frame rnic0 sends or receives to this pcap file (open with Wireshark)")
	f.BoolVar(&cfg.quiet, "quiet", false, "do not print packets")
	return cmd
}
