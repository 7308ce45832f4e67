package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/rnic/rnic/wire/pcap"
)

// TestParseFileSize checks --pcap-filesize's units, those of tcpdump -C.
func TestParseFileSize(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		bad  bool
	}{
		{"1", 1000000, false},
		{"100", 100000000, false},
		{"10k", 10 << 10, false},
		{"10K", 10 << 10, false},
		{"3m", 3 << 20, false},
		{"2G", 2 << 30, false},
		{"0", 0, false},
		{"", 0, true},
		{"-1", 0, true},
		{"1.5", 0, true},
		{"k", 0, true},
		{"10x", 0, true},
	}
	for _, tt := range tests {
		got, err := parseFileSize(tt.in)
		if (err != nil) != tt.bad || got != tt.want {
			t.Errorf("parseFileSize(%q) = %d, %v; want %d, error %v", tt.in, got, err, tt.want, tt.bad)
		}
	}
}

// readFile reads one capture file: its snapshot length and records.
func readFile(t *testing.T, path string) (snap uint32, recs []pcap.Record) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r, err := pcap.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	for {
		rec, err := r.NextRecord()
		if err == io.EOF {
			return r.SnapLen(), recs
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		rec.Data = bytes.Clone(rec.Data)
		recs = append(recs, rec)
	}
}

// TestCaptureRotation writes 100 frames of 1000 bytes through captures
// bounded as tcpdump -s -C -W bound them, and checks the files' names
// (tcpdump's), that no file is over the size by more than the one record
// that took it over (tcpdump checks before each record), that every
// record keeps at most the snapshot length and gives the frame's length,
// and that the ring keeps the newest frames.
func TestCaptureRotation(t *testing.T) {
	const frames, frameLen = 100, 1000
	tests := []struct {
		name  string
		opts  captureOptions
		files []string // in the directory at the end
		last  string   // the file holding the newest frame
	}{
		{"one file", captureOptions{snapLen: 0}, []string{"c.pcap"}, "c.pcap"},
		{"snaplen", captureOptions{snapLen: 128}, []string{"c.pcap"}, "c.pcap"},
		// 24 + 10 × (16 + 128) = 1464: a file takes 10 records, 1 more
		// takes it past 1400.
		{"size", captureOptions{snapLen: 128, fileSize: 1400}, []string{"c.pcap", "c.pcap1", "c.pcap2", "c.pcap3", "c.pcap4", "c.pcap5", "c.pcap6", "c.pcap7", "c.pcap8", "c.pcap9"}, "c.pcap9"},
		{"ring of 3", captureOptions{snapLen: 128, fileSize: 1400, fileCount: 3}, []string{"c.pcap0", "c.pcap1", "c.pcap2"}, "c.pcap0"},
		{"ring of 12", captureOptions{snapLen: 128, fileSize: 1400, fileCount: 12}, []string{"c.pcap00", "c.pcap01", "c.pcap02", "c.pcap03", "c.pcap04", "c.pcap05", "c.pcap06", "c.pcap07", "c.pcap08", "c.pcap09"}, "c.pcap09"},
		{"ring of 1", captureOptions{snapLen: 128, fileSize: 1400, fileCount: 1}, []string{"c.pcap"}, "c.pcap"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			c, err := newCapture(filepath.Join(dir, "c.pcap"), tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			for i := range frames {
				ip := make([]byte, frameLen)
				ip[0], ip[2], ip[3] = 0x45, frameLen>>8, frameLen&0xff
				ip[20] = byte(i)
				if err := c.WriteIPPacket(time.Unix(1700000000+int64(i), 0), ip); err != nil {
					t.Fatal(err)
				}
			}
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			entries, _ := os.ReadDir(dir)
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			sort.Strings(names)
			if fmt.Sprint(names) != fmt.Sprint(tt.files) {
				t.Fatalf("files %v, want %v", names, tt.files)
			}
			wantSnap := uint32(tt.opts.snapLen)
			if wantSnap == 0 {
				wantSnap = pcap.SnapLen
			}
			newest := -1
			for _, name := range names {
				path := filepath.Join(dir, name)
				st, _ := os.Stat(path)
				snap, recs := readFile(t, path)
				if snap != wantSnap {
					t.Errorf("%s: snaplen %d, want %d", name, snap, wantSnap)
				}
				rec := 16 + min(14+frameLen, int(wantSnap))
				if tt.opts.fileSize > 0 && st.Size() > tt.opts.fileSize+int64(rec) {
					t.Errorf("%s: %d bytes, over the %d-byte limit by more than a record", name, st.Size(), tt.opts.fileSize)
				}
				for _, r := range recs {
					if len(r.Data) > int(wantSnap) || r.OrigLen != 14+frameLen {
						t.Errorf("%s: record of %d bytes, original %d", name, len(r.Data), r.OrigLen)
					}
					if i := int(r.Data[14+20]); i == frames-1 {
						if name != tt.last {
							t.Errorf("the newest frame is in %s, want %s", name, tt.last)
						}
						newest = i
					}
				}
			}
			if newest < 0 {
				t.Error("the newest frame is in no file")
			}
		})
	}
}

// TestCaptureOptionErrors checks that the bounds are refused when they
// make no sense, as tcpdump refuses them.
func TestCaptureOptionErrors(t *testing.T) {
	for _, tt := range []struct {
		o    captureOptions
		want string
	}{
		{captureOptions{snapLen: -1}, "--pcap-snaplen -1 out of range"},
		{captureOptions{snapLen: pcap.MaxRecordSize + 1}, "out of range"},
		{captureOptions{fileSize: -5}, "--pcap-filesize -5"},
		{captureOptions{fileCount: 3}, "--pcap-filecount needs --pcap-filesize"},
		{captureOptions{fileSize: 100, fileCount: -1}, "--pcap-filecount -1"},
	} {
		_, err := newCapture(filepath.Join(t.TempDir(), "x.pcap"), tt.o)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: %v, want %q", tt.o, err, tt.want)
		}
	}
}
