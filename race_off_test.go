//go:build !race

package rnic_test

const raceEnabled = false
