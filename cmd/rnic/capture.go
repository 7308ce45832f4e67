package main

import (
	"bufio"
	"errors"
	"os"

	"github.com/rnic/rnic/link"
	"github.com/rnic/rnic/link/sniff"
	"github.com/rnic/rnic/wire/pcap"
)

// capture records everything a NIC sends and receives to a pcap file,
// which tshark and Wireshark decode as RoCEv2 (UDP port 4791). Frames get
// an Ethernet header, like the demo's captures and tcpdump's.
type capture struct {
	f    *os.File
	bw   *bufio.Writer
	w    *pcap.Writer
	taps []*sniff.Link
}

// newCapture creates the pcap file at path.
func newCapture(path string) (*capture, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	bw := bufio.NewWriterSize(f, 1<<16)
	w, err := pcap.NewWriter(bw, pcap.LinkTypeEthernet)
	if err != nil {
		f.Close()
		return nil, err
	}
	return &capture{f: f, bw: bw, w: w}, nil
}

// wrap returns l with its frames recorded. One capture records one
// link: a pcap.Writer must not be shared between sniffers.
func (c *capture) wrap(l link.Link) link.Link {
	s := sniff.New(l, sniff.Options{Pcap: c.w})
	c.taps = append(c.taps, s)
	return s
}

// Close flushes and closes the file, once the links are closed; it
// returns the first write error any link met.
func (c *capture) Close() error {
	var errs []error
	for _, t := range c.taps {
		errs = append(errs, t.Err())
	}
	errs = append(errs, c.bw.Flush(), c.f.Close())
	return errors.Join(errs...)
}
