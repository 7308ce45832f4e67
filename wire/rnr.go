package wire

import "time"

// rnrTimerMicros holds the minimum RNR NAK delays of IBTA Table 45, in
// microseconds; code 0 is the longest delay, 655.36 ms.
var rnrTimerMicros = [32]uint32{
	655360, 10, 20, 30, 40, 60, 80, 120,
	160, 240, 320, 480, 640, 960, 1280, 1920,
	2560, 3840, 5120, 7680, 10240, 15360, 20480, 30720,
	40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520,
}

// RNRTimerDuration returns how long a requester waits before retrying after
// an RNR NAK carrying the given 5-bit timer code (higher bits are ignored).
func RNRTimerDuration(timer uint8) time.Duration {
	return time.Duration(rnrTimerMicros[timer&syndromeValueMask]) * time.Microsecond
}
