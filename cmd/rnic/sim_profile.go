package main

import (
	"fmt"
	"slices"
	"text/tabwriter"

	"github.com/rnic/rnic/sim/experiment"
	"github.com/rnic/rnic/sim/profile"
	"github.com/spf13/cobra"
)

// newSimProfileCmd returns "rnic sim profile" with list and show.
func newSimProfileCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "profile",
		Short: "List and show the hardware profiles",
		Long: `A hardware profile is a TOML file of every parameter of the RNIC model
(link, PCIe, caches, DMA engines, processing units, host, switch), each
with its unit in its name. The built-in profiles cite where each number
comes from; copy one, change what you know about your hardware, and pass
the file to "rnic sim --profile".

Examples:
  rnic sim profile list
  rnic sim profile show cx6 > mine.toml
  rnic sim profile show cx6 --set caches.qpc.entries=4096`,
		Args: cobra.NoArgs,
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List the built-in profiles",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 8, 2, ' ', 0)
			for _, name := range profile.Names() {
				p, err := profile.Builtin(name)
				if err != nil {
					return err
				}
				fmt.Fprintf(tw, "%s\t%s\n", name, p.Description)
			}
			return tw.Flush()
		},
	}
	var sets []string
	show := &cobra.Command{
		Use:   "show NAME|FILE",
		Short: "Print a profile as TOML (a built-in one with its comments)",
		Long: `show prints a profile as TOML. A built-in profile is printed as its source,
with the comments that cite where each number comes from: the starting
point for your own. With --set, or for a file, the profile is loaded,
validated and printed without comments.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			var overrides []experiment.Override
			for _, s := range sets {
				set, err := experiment.ParseSet(s)
				if err != nil {
					return fmt.Errorf("--set %w", err)
				}
				if len(set.Values) != 1 {
					return fmt.Errorf("--set %s: show takes one value", s)
				}
				overrides = append(overrides, experiment.Override{Key: set.Key, Value: set.Values[0]})
			}
			if len(overrides) == 0 && slices.Contains(profile.Names(), name) {
				return profile.Show(cmd.OutOrStdout(), name)
			}
			b, err := experiment.ProfileTOML(name, overrides...)
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(b)
			return err
		},
	}
	show.Flags().StringArrayVar(&sets, "set", nil, "override a parameter, key=value; repeatable")
	cmd.AddCommand(list, show)
	return cmd
}
