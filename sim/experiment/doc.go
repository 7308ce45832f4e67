// Package experiment runs sweeps of simulated perftest workloads
// (sim/perf) and writes their results.
//
// A Sweep lists values for every parameter of a run (profile, profile
// overrides, test, message size, QPs, host pairs, iterations, …); Run
// runs the cartesian product in a fixed order, one run after another or
// several at once, and returns one Row per run in that order. Each run is
// deterministic, so the same sweep always yields the same rows.
//
// The writers share one list of columns (Columns): an aligned text table
// for people, CSV and JSON for programs, and line plots (PNG, SVG) of any
// column against a swept one. Columns measured on the wall clock (how fast
// the simulator itself ran) are the only ones that differ between runs of
// the same sweep; they are left out unless asked for.
package experiment
