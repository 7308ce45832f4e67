//go:build !race

package udp_test

const raceEnabled = false
