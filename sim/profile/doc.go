// Package profile describes a hardware RNIC, and the network around it, as
// a set of named parameters that the timing model runs with: a
// HardwareProfile. Profiles are TOML files so that a user can dump a
// built-in one (Show), copy it, change a number and load it back (Load).
//
// Built-in profiles are embedded from profiles/*.toml; each file cites the
// source of every number and says which ones are estimates.
//
// Units are in the field names (ns, bytes, gbps) so a profile reads
// unambiguously without this documentation.
package profile
