// cdi-validate loads CDI spec files with the CDI project's own loader, the one container runtimes
// use (containerd vendors it), and fails on the first spec it rejects: unknown fields, a version
// older than the fields used need, invalid kind or device names, invalid container edits.
//
// Usage: cdi-validate FILE...   prints "FILE: <qualified device names>" per valid file.
package main

import (
	"fmt"
	"os"
	"sort"
	"strings"

	"tags.cncf.io/container-device-interface/pkg/cdi"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: cdi-validate FILE...")
		os.Exit(2)
	}
	for _, path := range os.Args[1:] {
		spec, err := cdi.ReadSpec(path, 0)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", path, err)
			os.Exit(1)
		}
		var names []string
		for _, device := range spec.Devices {
			names = append(names, spec.GetVendor()+"/"+spec.GetClass()+"="+device.Name)
		}
		sort.Strings(names)
		fmt.Printf("%s: %s\n", path, strings.Join(names, " "))
	}
}
