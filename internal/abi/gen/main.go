// Command gen writes rnic's provider ABI header (package abi): go
// generate ./internal/abi.
package main

import (
	"flag"
	"log"
	"os"

	"github.com/rnic/rnic/internal/abi"
)

func main() {
	out := flag.String("o", "rnic_abi.h", "the header to write")
	flag.Parse()
	if err := os.WriteFile(*out, []byte(abi.Header()), 0o644); err != nil {
		log.Fatal(err)
	}
}
