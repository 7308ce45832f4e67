package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/rnic/rnic/wire"
	"github.com/rnic/rnic/wire/pcap"
)

// demoConfig holds the demo's flags.
type demoConfig struct {
	size  int     // bytes of the WRITE, WRITE WITH IMMEDIATE and READ
	loss  float64 // frame loss probability of the loss step
	mtu   int     // path MTU in bytes
	pcap  string  // capture file, if any
	quiet bool    // no packet lines
}

func defaultDemoConfig() demoConfig {
	return demoConfig{size: 64 << 10, loss: 0.05, mtu: 4096}
}

// Limits of the demo's flags.
const (
	maxSize  = 64 << 20
	lossSize = 1 << 20 // bytes of the WRITE in the loss step
	// opTimeout bounds the wait for one operation's completions.
	opTimeout = 10 * time.Second
)

func (c *demoConfig) validate() error {
	if c.size < 1 || c.size > maxSize {
		return fmt.Errorf("--size %d out of range [1, %d]", c.size, maxSize)
	}
	if !(c.loss >= 0 && c.loss < 1) {
		return fmt.Errorf("--loss %v out of range [0, 1)", c.loss)
	}
	if _, ok := wire.MTUFromBytes(c.mtu); !ok {
		return fmt.Errorf("--mtu %d: want 256, 512, 1024, 2048 or 4096", c.mtu)
	}
	return nil
}

// errCheck is returned when the demo ran but a result was wrong.
var errCheck = errors.New("demo: a check failed")

// runDemo runs the demo, writing its report to out. It returns an error if
// the set-up fails or any check does.
func runDemo(ctx context.Context, out io.Writer, cfg demoConfig) (err error) {
	if err := cfg.validate(); err != nil {
		return err
	}
	if ctx == nil {
		ctx = context.Background()
	}
	d := &demo{ctx: ctx, cfg: cfg, out: out}
	if cfg.pcap != "" {
		f, err := os.Create(cfg.pcap)
		if err != nil {
			return err
		}
		bw := bufio.NewWriterSize(f, 1<<16)
		if d.pcap, err = pcap.NewWriter(bw, pcap.LinkTypeEthernet); err != nil {
			f.Close()
			return err
		}
		defer func() {
			if ferr := bw.Flush(); err == nil && ferr != nil {
				err = ferr
			}
			if cerr := f.Close(); err == nil && cerr != nil {
				err = cerr
			}
		}()
	}
	if err := d.setup(); err != nil {
		d.close()
		return err
	}
	start := time.Now()
	err = d.run()
	elapsed := time.Since(start)
	if err == nil {
		d.printCounters()
	}
	if cerr := d.close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\nAll checks passed in %v.", elapsed.Round(time.Millisecond))
	if cfg.pcap != "" {
		fmt.Fprintf(out, " Packets seen by rnic0 are in %s (wireshark %s).", cfg.pcap, cfg.pcap)
	}
	fmt.Fprintln(out)
	return nil
}

// step is one operation of the demo.
type step struct {
	title string
	about string // what happens, in a sentence or two
	run   func(d *demo) ([]string, error)
}

// run runs every step, stopping at the first failure.
func (d *demo) run() error {
	d.printIntro()
	for i, s := range d.steps() {
		fmt.Fprintf(d.out, "\n%d. %s\n", i+1, s.title)
		if s.about != "" {
			for _, l := range strings.Split(s.about, "\n") {
				fmt.Fprintf(d.out, "   %s\n", l)
			}
		}
		d.tap.begin()
		results, err := s.run(d)
		d.tap.settle(time.Second)
		if !d.cfg.quiet {
			d.tap.show(d.out, "  ")
		}
		st := d.tap.stats()
		line := fmt.Sprintf("   %s in %.3f ms", plural(st.packets, "packet"), float64(st.span)/1e6)
		if st.lost > 0 || st.retrans > 0 {
			line += fmt.Sprintf(": %d lost on the wire, %d retransmitted, %s", st.lost, st.retrans, plural(st.naks, "NAK"))
		}
		fmt.Fprintln(d.out, line)
		for _, r := range results {
			fmt.Fprintf(d.out, "   ✓ %s\n", r)
		}
		if err != nil {
			fmt.Fprintf(d.out, "   ✗ %v\n", err)
			return fmt.Errorf("%w: step %d (%s): %v", errCheck, i+1, s.title, err)
		}
	}
	return nil
}

// size formats a byte count the way the demo's text does: 64 KiB, 1 MiB,
// or a plain number of bytes.
func size(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	case n == 1:
		return "1 byte"
	}
	return fmt.Sprintf("%d bytes", n)
}
