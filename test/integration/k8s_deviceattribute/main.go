// k8s-deviceattribute prints what Kubernetes' own helpers in
// k8s.io/dynamic-resource-allocation/deviceattribute say about PCI functions under a sysfs root:
// the standard pcieRoot and numaNode attributes, or the helper's error. The integration test
// test_pci_topology_kubernetes.py builds it against the Kubernetes release that hack/tools/kubernetes
// pins and compares its answers with pkg/hardware/pci_topology.py on every fixture host tree.
//
// Usage: k8s-deviceattribute SYSFS_ROOT ADDRESS...   prints one JSON object, address -> answer.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"k8s.io/dynamic-resource-allocation/deviceattribute"
)

type answer struct {
	PCIeRoot      *string `json:"pcieRoot,omitempty"`
	PCIeRootError string  `json:"pcieRootError,omitempty"`
	NUMANode      *int64  `json:"numaNode,omitempty"`
	NUMANodeError string  `json:"numaNodeError,omitempty"`
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: k8s-deviceattribute SYSFS_ROOT ADDRESS...")
		os.Exit(2)
	}
	fs := deviceattribute.WithFSFromRoot(os.Args[1])
	answers := map[string]answer{}
	for _, address := range os.Args[2:] {
		var a answer
		if root, err := deviceattribute.GetPCIeRootAttributeByPCIBusID(address, fs); err != nil {
			a.PCIeRootError = err.Error()
		} else {
			a.PCIeRoot = root.Value.StringValue
		}
		numa, err := deviceattribute.GetNUMANodeAttributeByPCIBusID(address, deviceattribute.ScalarAttribute, fs)
		if err != nil {
			a.NUMANodeError = err.Error()
		} else {
			a.NUMANode = numa.Value.IntValue
		}
		answers[address] = a
	}
	if err := json.NewEncoder(os.Stdout).Encode(answers); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
