package profile

import (
	"fmt"
	"slices"
)

// DCQCNPresets are the named DCQCN parameter sets, in the order listed.
var DCQCNPresets = []string{"paper", "mellanox"}

// DCQCNPreset returns a named DCQCN parameter set (Enabled left false):
//
//   - "paper": Zhu et al., "Congestion Control for Large-Scale RDMA
//     Deployments" (SIGCOMM 2015), as its authors' fluid model and
//     simulator use them: N = 50 µs, K = 55 µs, T = 55 µs, B = 10 MB,
//     F = 5, g = 1/256, R_AI = 40 Mb/s, the target set on every CNP (the
//     paper's equations); R_HAI = 200 Mb/s is from the authors' ns-3
//     configuration (the paper gives none), the 100 Mb/s floor an
//     estimate.
//   - "mellanox": ConnectX-4 and later firmware defaults (NVIDIA's DCQCN
//     parameter documentation and mlxconfig dumps of ConnectX-5 and -6 Lx):
//     min_time_between_cnps 4 µs (N), dce_tcp_rtt 1 µs (K), dce_tcp_g
//     1019 (g = 5/1024), rpg_time_reset 300 µs (T), rpg_byte_reset 32767
//     B (B), rpg_threshold 1 (F), rpg_ai_rate 5 Mb/s, rpg_hai_rate 50
//     Mb/s, rpg_min_rate 1 Mb/s, initial_alpha_value 1023 (of 1024),
//     clamp_tgt_rate 0, cnp_dscp 48 (traffic class 192, priority 6).
func DCQCNPreset(name string) (DCQCN, error) {
	switch name {
	case "paper":
		return DCQCN{Preset: name, CNPIntervalNs: 50_000, G: 1.0 / 256, AlphaPeriodNs: 55_000, IncreasePeriodNs: 55_000,
			ByteCounterBytes: 10 << 20, FastRecovery: 5, RateAIMbps: 40, RateHAIMbps: 200, MinRateMbps: 100,
			InitialAlpha: 1, ClampTarget: true}, nil
	case "mellanox":
		return DCQCN{Preset: name, CNPIntervalNs: 4_000, G: 5.0 / 1024, AlphaPeriodNs: 1_000, IncreasePeriodNs: 300_000,
			ByteCounterBytes: 32767, FastRecovery: 1, RateAIMbps: 5, RateHAIMbps: 50, MinRateMbps: 1,
			InitialAlpha: 1023.0 / 1024, ClampTarget: false, CNPTClass: 192}, nil
	}
	return DCQCN{}, fmt.Errorf("no DCQCN preset %q (there are: %v)", name, DCQCNPresets)
}

// knownPreset reports whether name is "" or a preset.
func knownPreset(name string) bool { return name == "" || slices.Contains(DCQCNPresets, name) }
