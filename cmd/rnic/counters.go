package main

import (
	"fmt"
	"strings"

	"github.com/rnic/rnic"
)

// counterRow is a row of the final table: a counter of rnic.Device.Counters
// (or of the wire), with what it means.
type counterRow struct {
	name  string
	about string
}

// counterGroups are the rows of the final table, by hardware block, in
// the order a packet meets them. Rows whose value is zero on both NICs are
// left out; non-zero counters not listed here are shown under "other".
var counterGroups = []struct {
	title string
	rows  []counterRow
}{
	{"host interface", []counterRow{
		{"doorbells", "send doorbells rung (one per PostSend call)"},
		{"arbiter_grants", "times the arbiter picked a QP to serve"},
	}},
	{"SRAM caches (a miss is a PCIe read of host memory)", []counterRow{
		{"qpc_cache_hit", "QP context found on chip"},
		{"qpc_cache_miss", "QP context fetched from host memory"},
		{"cqc_cache_hit", "CQ context found on chip"},
		{"cqc_cache_miss", "CQ context fetched from host memory"},
		{"mpt_cache_hit", "memory key (MPT entry) found on chip"},
		{"mpt_cache_miss", "memory key fetched from host memory"},
		{"mtt_cache_hit", "page translation (MTT entry) found on chip"},
		{"mtt_cache_miss", "page translation fetched from host memory"},
		{"atu_translations", "address translations (key, VA, length → pages): one per packet in virtual time, one per window of up to 256 KiB of a message on the wall clock"},
		{"atu_utlb_hit", "MPT and MTT entries found in the ATU's micro-TLB, before the caches"},
	}},
	{"DMA engines", []counterRow{
		{"dma_descriptors", "scatter/gather descriptors executed"},
		{"dma_bytes", "payload bytes copied: host memory ↔ packet buffers, or a sender's memory → host memory for a frame sent by reference"},
		{"dma_atomics", "atomic read-modify-writes on host memory"},
	}},
	{"wire", []counterRow{
		{"tx_packets", "packets sent"},
		{"tx_bytes", "bytes sent"},
		{"rx_packets", "packets received"},
		{"rx_bytes", "bytes received"},
		{"tx_icrc_offloaded", "frames sent without an ICRC: the in-process link delivers them intact"},
		{"rx_icrc_offloaded", "frames taken without checking the ICRC, for the same reason"},
		{"tx_payload_refs", "frames sent by reference: the payload stays in the sender's registered memory and the receiver's DMA engine copies it from there, once (in process)"},
		{"rx_ref_revoked", "frames sent by reference dropped on arrival: the sender had deregistered the region, or destroyed or reset the QP, since"},
	}},
	{"protocol engine", []counterRow{
		{"rx_write_requests", "RDMA WRITE messages placed in memory"},
		{"rx_read_requests", "RDMA READ requests served"},
		{"rx_atomic_requests", "atomic requests served"},
		{"rx_send_requests", "SEND messages received"},
		{"read_responses_sent", "READ RESPONSE packets sent"},
		{"acks_sent", "ACKs sent (coalesced: one can cover many packets)"},
		{"acks_received", "ACKs received"},
	}},
	{"recovery", []counterRow{
		{"wire_drops", "frames the wire lost (link/mem, not a NIC counter)"},
		{"out_of_sequence", "requests that arrived ahead of the expected PSN"},
		{"seq_nak_sent", "PSN sequence error NAKs sent"},
		{"packet_seq_err", "PSN sequence error NAKs received"},
		{"roce_retrans_packets", "packets sent again"},
		{"duplicate_request", "requests received twice (re-ACKed, not re-executed)"},
		{"local_ack_timeout_err", "ACK timer expiries (a lost tail or lost ACKs)"},
		{"retry_window_cuts", "timeouts after which one request was resent, not all"},
		{"read_budget_waits", "READs held back by the NIC's bound on READ responses"},
		{"implied_nak_seq_err", "responses that skipped an outstanding READ/atomic"},
		{"rnr_nak_sent", "RNR NAKs sent (no receive posted)"},
		{"rnr_nak_retry_err", "RNR NAKs received"},
		{"rx_invalid_requests", "requests refused as invalid (NAKed on RC, dropped on UC)"},
		{"rx_uc_dropped", "UC packets dropped after a gap, until the next message"},
		{"rx_discards", "frames dropped at a full receive queue"},
	}},
}

// printCounters prints the counters that are not zero on at least one NIC.
func (d *demo) printCounters() {
	var vals [2]map[string]uint64
	for i, n := range d.nics {
		vals[i] = map[string]uint64{"wire_drops": n.port.Stats().Dropped}
		for _, c := range n.dev.Counters() {
			vals[i][c.Name] = c.Value
		}
	}
	nonZero := func(name string) bool { return vals[0][name] != 0 || vals[1][name] != 0 }
	listed := map[string]bool{}
	type line struct{ group, name, a, b, about string }
	var lines []line
	for _, g := range counterGroups {
		first := true
		for _, r := range g.rows {
			listed[r.name] = true
			if !nonZero(r.name) {
				continue
			}
			if first {
				lines = append(lines, line{group: g.title})
				first = false
			}
			lines = append(lines, line{"", r.name, num(vals[0][r.name]), num(vals[1][r.name]), r.about})
		}
	}
	var other []rnic.Counter
	for _, c := range d.nics[0].dev.Counters() {
		if !listed[c.Name] && nonZero(c.Name) {
			other = append(other, c)
		}
	}
	for i, c := range other {
		if i == 0 {
			lines = append(lines, line{group: "other"})
		}
		lines = append(lines, line{"", c.Name, num(vals[0][c.Name]), num(vals[1][c.Name]), ""})
	}

	wName, wA, wB := len("counter"), len("rnic0"), len("rnic1")
	for _, l := range lines {
		wName, wA, wB = max(wName, len(l.name)), max(wA, len(l.a)), max(wB, len(l.b))
	}
	fmt.Fprintf(d.out, "\nWhat happened inside each NIC (rnic.Device.Counters, non-zero ones):\n\n")
	fmt.Fprintf(d.out, "  %-*s  %*s  %*s\n", wName, "", wA, "rnic0", wB, "rnic1")
	for _, l := range lines {
		if l.group != "" {
			fmt.Fprintf(d.out, "  %s\n", l.group)
			continue
		}
		fmt.Fprintf(d.out, "    %-*s  %*s  %*s  %s\n", wName-2, l.name, wA, l.a, wB, l.b, l.about)
	}
}

// num formats n with thin thousands separators: 1 048 576.
func num(n uint64) string {
	s := fmt.Sprint(n)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(' ')
		}
		b.WriteRune(c)
	}
	return b.String()
}
