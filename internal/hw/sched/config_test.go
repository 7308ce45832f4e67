package sched

import (
	"errors"
	"strings"
	"testing"
)

func TestNewValidates(t *testing.T) {
	ok := Config{Levels: 8, Mode: DWRR, Quantum: 4096, BurstLimit: 16}
	tests := []struct {
		name  string
		edit  func(*Config)
		field string // "" = valid
	}{
		{"valid", func(*Config) {}, ""},
		{"WRR ignores zero quantum", func(c *Config) { c.Mode, c.Quantum = WRR, 0 }, ""},
		{"default burst", func(c *Config) { c.BurstLimit = 0 }, ""},
		{"max everything", func(c *Config) {
			c.Levels, c.Quantum, c.BurstLimit, c.Queues = MaxLevels, MaxQuantum, MaxBurstLimit, 1<<16
		}, ""},
		{"no levels", func(c *Config) { c.Levels = 0 }, "Levels"},
		{"too many levels", func(c *Config) { c.Levels = MaxLevels + 1 }, "Levels"},
		{"unknown mode", func(c *Config) { c.Mode = 7 }, "Mode"},
		{"DWRR zero quantum", func(c *Config) { c.Quantum = 0 }, "Quantum"},
		{"quantum too big", func(c *Config) { c.Quantum = MaxQuantum + 1 }, "Quantum"},
		{"WRR negative quantum", func(c *Config) { c.Mode, c.Quantum = WRR, -1 }, "Quantum"},
		{"negative burst", func(c *Config) { c.BurstLimit = -1 }, "BurstLimit"},
		{"burst too big", func(c *Config) { c.BurstLimit = MaxBurstLimit + 1 }, "BurstLimit"},
		{"negative queues", func(c *Config) { c.Queues = -1 }, "Queues"},
		{"too many queues", func(c *Config) { c.Queues = MaxQueues + 1 }, "Queues"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := ok
			tt.edit(&cfg)
			a, err := New(cfg)
			if tt.field == "" {
				if err != nil || a == nil {
					t.Fatalf("New(%+v) = %v, %v; want an arbiter", cfg, a, err)
				}
				return
			}
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "Config."+tt.field) {
				t.Fatalf("New(%+v) error = %v; want ErrInvalid naming Config.%s", cfg, err, tt.field)
			}
		})
	}
}

func TestDefaultBurstLimit(t *testing.T) {
	a := mustNew(t, Config{Levels: 1, Mode: WRR})
	a.Ring(0)
	if _, g, _ := a.Next(); g.Packets != DefaultBurstLimit || g.Bytes != NoByteLimit {
		t.Fatalf("grant = %+v, want {%d %d}", g, DefaultBurstLimit, NoByteLimit)
	}
}

func TestSetQueueValidates(t *testing.T) {
	a := mustNew(t, Config{Levels: 4, Mode: WRR})
	tests := []struct {
		q             uint32
		level, weight int
		field         string // "" = valid
	}{
		{0, 0, 1, ""},
		{1<<16 - 1, 3, MaxWeight, ""},
		{MaxQueues, 0, 1, "queue"},
		{1, -1, 1, "level"},
		{1, 4, 1, "level"},
		{1, 0, 0, "weight"},
		{1, 0, MaxWeight + 1, "weight"},
	}
	for _, tt := range tests {
		err := a.SetQueue(tt.q, tt.level, tt.weight)
		if tt.field == "" {
			if err != nil {
				t.Errorf("SetQueue(%d, %d, %d) = %v", tt.q, tt.level, tt.weight, err)
			}
			continue
		}
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.field) {
			t.Errorf("SetQueue(%d, %d, %d) = %v; want ErrInvalid naming %s", tt.q, tt.level, tt.weight, err, tt.field)
		}
	}
}

func TestModeString(t *testing.T) {
	for m, want := range map[Mode]string{WRR: "WRR", DWRR: "DWRR", 9: "Mode(9)"} {
		if got := m.String(); got != want {
			t.Errorf("Mode(%d).String() = %q, want %q", uint8(m), got, want)
		}
	}
}
