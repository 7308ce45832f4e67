package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rnic/rnic/link"
	"github.com/rnic/rnic/link/sniff"
	"github.com/rnic/rnic/wire/pcap"
)

// defaultSnapLen is --pcap-snaplen's default: every RoCEv2 header (at most
// 14 Ethernet + 40 IPv6 + 8 UDP + 12 BTH + 28 AtomicETH = 102 bytes) and
// at least the first 26 bytes of payload (46 over IPv4), so that a long
// run records what happened without its data, as tcpdump -s does.
const defaultSnapLen = 128

// captureOptions bound a capture as tcpdump's -s, -C and -W do.
type captureOptions struct {
	snapLen   int   // bytes kept of each frame, Ethernet header included (0: whole frames)
	fileSize  int64 // before a record, a file larger than this is closed for the next (0: one file)
	fileCount int   // with fileSize: files kept, the oldest overwritten (0: no limit)
}

// capture records everything a NIC sends and receives to pcap files,
// which tshark and Wireshark decode as RoCEv2 (UDP port 4791). Frames get
// an Ethernet header, like the demo's captures and tcpdump's. With a file
// size it rotates files the way tcpdump -C -W does: before writing a
// frame, if the current file is larger than the size, it is closed and
// the next one begun. The files are named as tcpdump names them: without
// a file count the first is the path itself and the next path1, path2,
// ...; with a count W they are path0 ... path(W-1), the number padded to
// the digits of W-1, and the ring starts over at path0.
type capture struct {
	path   string
	opts   captureOptions
	digits int // tcpdump's WflagChars

	mu    sync.Mutex // the taps of several devices may write at once
	f     *os.File
	bw    *bufio.Writer
	w     *pcap.Writer
	size  int64 // bytes in the current file (tcpdump's pcap_dump_ftell)
	index int   // the current file's number (tcpdump's Cflag_count)
	err   error // first error; writes stop
	taps  []*sniff.Link
}

// newCapture creates the first pcap file for path.
func newCapture(path string, o captureOptions) (*capture, error) {
	switch {
	case o.snapLen < 0 || o.snapLen > pcap.MaxRecordSize:
		return nil, fmt.Errorf("--pcap-snaplen %d out of range [0, %d]", o.snapLen, pcap.MaxRecordSize)
	case o.fileSize < 0:
		return nil, fmt.Errorf("--pcap-filesize %d: must not be negative", o.fileSize)
	case o.fileCount < 0:
		return nil, fmt.Errorf("--pcap-filecount %d: must not be negative", o.fileCount)
	case o.fileCount > 0 && o.fileSize == 0:
		return nil, errors.New("--pcap-filecount needs --pcap-filesize: a ring of files is rotated by size (tcpdump -W goes with -C)")
	}
	c := &capture{path: path, opts: o}
	for x := o.fileCount - 1; x > 0; x /= 10 {
		c.digits++
	}
	if err := c.open(); err != nil {
		return nil, err
	}
	return c, nil
}

// fileName is tcpdump's MakeFilename: the path, with the file's number
// after it unless it is the first file and there is no ring.
func (c *capture) fileName(index int) string {
	if index == 0 && c.digits == 0 {
		return c.path
	}
	return fmt.Sprintf("%s%0*d", c.path, c.digits, index)
}

// open begins file c.index.
func (c *capture) open() error {
	f, err := os.Create(c.fileName(c.index))
	if err != nil {
		return err
	}
	c.f, c.size = f, 0
	c.bw = bufio.NewWriterSize(countingWriter{f, &c.size}, 1<<16)
	if c.w, err = pcap.NewWriterSnapLen(c.bw, pcap.LinkTypeEthernet, c.opts.snapLen); err != nil {
		f.Close()
		return err
	}
	return nil
}

// countingWriter counts the bytes that reach the file, buffered or not:
// what pcap_dump_ftell reports.
type countingWriter struct {
	f *os.File
	n *int64
}

func (w countingWriter) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	*w.n += int64(n)
	return n, err
}

// fileLen returns the current file's length, buffered bytes included.
func (c *capture) fileLen() int64 { return c.size + int64(c.bw.Buffered()) }

// WriteIPPacket records one frame (sniff.PacketWriter), first moving on
// to the next file if the current one is over the size.
func (c *capture) WriteIPPacket(ts time.Time, ip []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return c.err
	}
	if c.opts.fileSize > 0 && c.fileLen() > c.opts.fileSize {
		c.err = c.rotate()
		if c.err != nil {
			return c.err
		}
	}
	c.err = c.w.WriteIPPacket(ts, ip)
	return c.err
}

// rotate closes the current file and begins the next.
func (c *capture) rotate() error {
	if err := errors.Join(c.bw.Flush(), c.f.Close()); err != nil {
		return err
	}
	c.index++
	if c.opts.fileCount > 0 && c.index >= c.opts.fileCount {
		c.index = 0
	}
	return c.open()
}

// wrap returns l with its frames recorded.
func (c *capture) wrap(l link.Link) link.Link {
	s := sniff.New(l, sniff.Options{Pcap: c})
	c.taps = append(c.taps, s)
	return s
}

// Close flushes and closes the current file, once the links are closed;
// it returns the first error writing any file.
func (c *capture) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	errs := []error{c.err}
	for _, t := range c.taps {
		if err := t.Err(); err != c.err {
			errs = append(errs, err)
		}
	}
	errs = append(errs, c.bw.Flush(), c.f.Close())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("--pcap %s: %w", c.fileName(c.index), err)
	}
	return nil
}

// parseFileSize parses --pcap-filesize as tcpdump 4.99 parses -C: a
// number of millions of bytes, or of KiB, MiB or GiB with a k, m or g
// suffix (either case).
func parseFileSize(s string) (int64, error) {
	unit := int64(1000000)
	num := s
	if n := len(s); n > 0 {
		switch s[n-1] {
		case 'k', 'K':
			unit, num = 1<<10, s[:n-1]
		case 'm', 'M':
			unit, num = 1<<20, s[:n-1]
		case 'g', 'G':
			unit, num = 1<<30, s[:n-1]
		}
	}
	v, err := strconv.ParseInt(strings.TrimSpace(num), 10, 64)
	if err != nil || v < 0 || v > (1<<62)/unit {
		return 0, fmt.Errorf("--pcap-filesize %q: want a number of millions of bytes, or of KiB, MiB, GiB with k, m, g", s)
	}
	return v * unit, nil
}
