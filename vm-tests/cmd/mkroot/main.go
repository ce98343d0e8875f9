// Command mkroot builds (or finds cached) the Debian root image the
// vm-tests start from, and prints its path. It is the one step of the
// vm-tests that needs the Debian archive.
package main

import (
	"context"
	"fmt"
	"os"

	vmtests "github.com/cco-dev/cco/vm-tests"
)

func main() {
	im := vmtests.DefaultImage()
	p, err := im.Build(context.Background(), os.Stderr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "mkroot: %v\n", err)
		os.Exit(1)
	}
	fmt.Println(p)
}
