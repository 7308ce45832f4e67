// Package demo's tests are a recorded `go test -json` stream for
// testsummary's tests (../stream.json): passes, failures, skipped tests
// and subtests, a package without tests and one that does not build. To
// record it again: cd testdata/demo && go test -json -count=1 ./... > ../stream.json
package demo
