package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"
)

// newStatCmd returns "rnic stat [device]".
func newStatCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "stat [device]",
		Short: "Show the counters of running rnic devices, as rdma statistic show",
		Long: `stat prints the counters of the rnic devices that are running on this
machine (opened by another rnic command, such as "rnic perf"), one line
per device and port in the format of Linux's "rdma statistic show":

  link rnic_127.0.0.1/1 tx_packets 12 rx_packets 10 ...

With a device name, only that device. Devices are found by their control
sockets in $XDG_RUNTIME_DIR/rnic (or /tmp/rnic-$UID).`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := ""
			if len(args) == 1 {
				name = args[0]
			}
			return runStat(cmd.OutOrStdout(), cmd.ErrOrStderr(), name)
		},
	}
}

// runStat prints the counters of the device called name, or of every
// running device.
func runStat(out, errw io.Writer, name string) error {
	dir := controlDir()
	var paths []string
	if name != "" {
		paths = []string{filepath.Join(dir, name)}
	} else {
		entries, err := os.ReadDir(dir)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		for _, e := range entries {
			if e.Type()&os.ModeSocket != 0 {
				paths = append(paths, filepath.Join(dir, e.Name()))
			}
		}
		sort.Strings(paths)
	}
	shown := 0
	for _, p := range paths {
		st, err := readStats(p)
		if err != nil {
			if name != "" {
				return fmt.Errorf("no running device %q (control socket %s): %w", name, p, err)
			}
			continue // a socket left by a process that died
		}
		fmt.Fprintln(out, formatStatLine(st))
		shown++
	}
	if shown == 0 && name == "" {
		fmt.Fprintf(errw, "no running rnic devices (no control sockets in %s)\n", dir)
	}
	return nil
}

// formatStatLine formats a device's counters as rdma statistic does:
// "link DEV/PORT name value name value ...".
func formatStatLine(st deviceStats) string {
	var b strings.Builder
	fmt.Fprintf(&b, "link %s/1", st.name)
	for _, c := range st.counters {
		fmt.Fprintf(&b, " %s %d", c.Name, c.Value)
	}
	return b.String()
}
