package main

import (
	"fmt"
	"hash/maphash"
	"io"
	"sync"
	"time"

	"github.com/rnic/rnic/link/mem"
	"github.com/rnic/rnic/link/sniff"
	"github.com/rnic/rnic/wire"
)

// The tap watches both NICs' links through sniff callbacks and works out,
// per demo step, which frames crossed the wire, which the wire lost and
// which were retransmissions, so that a step can show its first packets
// and the interesting ones.
//
// A frame is seen twice: leaving one NIC (sniff TX on the sender's link)
// and, unless the wire loses it, arriving at the other (sniff RX on the
// receiver's link). link/mem keeps the order of frames between two ports
// (the demo's faults are loss only), so the arrivals in one direction
// are a subsequence of the departures: an arrival matches the oldest
// departure with the same bytes, and the departures it skips were lost.
//
// Ways are numbered by sender: way 0 is rnic0 → rnic1, way 1 the reverse.

// packet is one frame a NIC sent during the current step.
type packet struct {
	way     int
	at      time.Duration // since the step began
	hash    uint64
	line    string // sniff.Summary, kept only while it may be shown
	lost    bool
	retrans bool // a request or READ response whose PSN was sent before
	nak     bool // an ACK carrying a NAK or RNR NAK
}

// headLines is how many packets a step without incidents shows.
const headLines = 6

type tap struct {
	quiet bool
	seed  maphash.Seed
	ports [2]*mem.Port // by way: the sender's port, whose Dropped counts the way's losses

	mu      sync.Mutex
	start   time.Time // when the step's first packet left
	pkts    []packet
	pending [2][]int               // by way: indices of packets not yet seen arriving
	sent    [2]uint64              // by way, since the demo began
	arrived [2]uint64              // by way, since the demo began
	maxPSN  [2]map[uint32]wire.PSN // by way and destination QP: highest PSN sent
}

func newTap(quiet bool, ports [2]*mem.Port) *tap {
	t := &tap{quiet: quiet, seed: maphash.MakeSeed(), ports: ports}
	for w := range t.maxPSN {
		t.maxPSN[w] = map[uint32]wire.PSN{}
	}
	return t
}

// observer returns the sniff callback for the link of NIC n (0 or 1).
func (t *tap) observer(n int) sniff.Func {
	return func(dir sniff.Direction, ts time.Time, frame []byte) {
		if dir == sniff.TX {
			t.departed(n, ts, frame)
		} else {
			t.arrival(1-n, frame)
		}
	}
}

// departed records a frame sent on way w.
func (t *tap) departed(w int, ts time.Time, frame []byte) {
	p := packet{way: w, hash: maphash.Bytes(t.seed, frame)}
	var pkt wire.Packet
	parsed := pkt.Parse(frame) == nil
	if !t.quiet {
		p.line = sniff.Summary(frame)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.pkts) == 0 {
		t.start = ts // times count from the step's first packet
	}
	p.at = ts.Sub(t.start)
	if parsed {
		if pkt.Info.Flags.Has(wire.FlagAck) {
			p.nak = pkt.AETH.Syndrome().Kind() != wire.AckKindACK
		} else {
			qpn, psn := pkt.BTH.DestQP(), pkt.BTH.PSN()
			if max, ok := t.maxPSN[w][qpn]; ok && !psn.After(max) {
				p.retrans = true
			} else {
				t.maxPSN[w][qpn] = psn
			}
		}
	}
	t.sent[w]++
	t.pending[w] = append(t.pending[w], len(t.pkts))
	t.pkts = append(t.pkts, p)
}

// arrival matches a frame that arrived on way w with the oldest pending
// departure of the same bytes; the pending ones before it were lost.
func (t *tap) arrival(w int, frame []byte) {
	h := maphash.Bytes(t.seed, frame)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.arrived[w]++
	q := t.pending[w]
	for i, idx := range q {
		if t.pkts[idx].hash != h {
			continue
		}
		for _, lost := range q[:i] {
			t.pkts[lost].lost = true
		}
		t.delivered(idx)
		t.pending[w] = q[i+1:]
		return
	}
}

// delivered drops the summary of a packet that arrived and will not be
// shown, so that a long step keeps few lines in memory.
func (t *tap) delivered(idx int) {
	if p := &t.pkts[idx]; idx >= headLines && !p.retrans && !p.nak {
		p.line = ""
	}
}

// begin starts a step: packets from now on belong to it.
func (t *tap) begin() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pkts = t.pkts[:0]
	t.pending = [2][]int{}
}

// settle waits until every frame sent has arrived or been dropped by the
// wire and the NICs have been quiet for a moment (late ACKs belong to the
// step), then marks what is still pending as lost. It gives up after
// limit, leaving the remaining frames unmarked.
func (t *tap) settle(limit time.Duration) {
	const quiet = 2 * time.Millisecond
	deadline := time.Now().Add(limit)
	last, since := -1, time.Now()
	for time.Now().Before(deadline) {
		t.mu.Lock()
		n := len(t.pkts)
		balanced := true
		for w := range 2 {
			if t.sent[w] != t.arrived[w]+t.ports[w].Stats().Dropped {
				balanced = false
			}
		}
		if balanced && n == last && time.Since(since) >= quiet {
			for w := range 2 {
				for _, idx := range t.pending[w] {
					t.pkts[idx].lost = true
				}
				t.pending[w] = nil
			}
			t.mu.Unlock()
			return
		}
		t.mu.Unlock()
		if n != last {
			last, since = n, time.Now()
		}
		time.Sleep(200 * time.Microsecond)
	}
}

// stepStats are the counts of a step's packets.
type stepStats struct {
	packets, lost, retrans, naks int
	span                         time.Duration // first packet to last
}

// stats counts the step's packets.
func (t *tap) stats() stepStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := stepStats{packets: len(t.pkts)}
	if len(t.pkts) > 0 {
		s.span = t.pkts[len(t.pkts)-1].at
	}
	for _, p := range t.pkts {
		s.lost += b2i(p.lost)
		s.retrans += b2i(p.retrans)
		s.naks += b2i(p.nak)
	}
	return s
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// maxLines bounds the packet lines of a step with incidents.
const maxLines = 12

// show prints the step's packets: the first headLines if nothing went
// wrong; otherwise the first few and then the lost packets, NAKs and the
// first packet of each retransmission, up to maxLines, with the packets
// in between counted.
func (t *tap) show(out io.Writer, indent string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var pick []int
	incidents := false
	for _, p := range t.pkts {
		if p.lost || p.nak || p.retrans {
			incidents = true
			break
		}
	}
	if !incidents {
		for i := range min(headLines, len(t.pkts)) {
			pick = append(pick, i)
		}
	} else {
		var prevRetrans [2]bool
		for i, p := range t.pkts {
			burst := p.retrans && !prevRetrans[p.way]
			prevRetrans[p.way] = p.retrans
			if (i < 3 || p.lost || p.nak || burst) && len(pick) < maxLines {
				pick = append(pick, i)
			}
		}
	}
	next := 0
	for _, i := range pick {
		if i > next {
			fmt.Fprintf(out, "%s      … %s …\n", indent, plural(i-next, "packet"))
		}
		p := &t.pkts[i]
		fmt.Fprintf(out, "%s%5d %9.6f  %s%s\n", indent, i+1, p.at.Seconds(), p.line, tag(p))
		next = i + 1
	}
	if rest := len(t.pkts) - next; rest > 0 {
		fmt.Fprintf(out, "%s      … %d more\n", indent, rest)
	}
}

// tag marks what happened to a packet.
func tag(p *packet) string {
	switch {
	case p.lost && p.retrans:
		return "   ✗ retransmission lost on the wire"
	case p.lost:
		return "   ✗ lost on the wire"
	case p.retrans:
		return "   ↻ retransmission"
	}
	return ""
}

// plural returns "1 packet" or "n packets".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
