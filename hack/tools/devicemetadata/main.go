// devicemetadata reads a Pod's DRA device metadata (KEP-5304) the way a consumer inside the
// container does: with Kubernetes' own reader, k8s.io/dynamic-resource-allocation/devicemetadata,
// at the paths that package builds under /var/run/kubernetes.io/dra-device-attributes. KubeVirt's
// virt-launcher finds a VM's passed-through and mediated devices through these files.
//
//	devicemetadata [--driver DRIVER] claim CLAIM REQUEST
//	    a claim the Pod names (resourceClaimName): ReadResourceClaimMetadata, which merges every
//	    driver's file of the request (and so keeps only podClaimName and the requests); with
//	    --driver, ReadResourceClaimMetadataWithDriverName: that driver's file, whole
//	devicemetadata [--driver DRIVER] template POD-CLAIM REQUEST
//	    a claim made from a template, by the Pod's own name for it (pod.spec.resourceClaims[].name):
//	    ReadResourceClaimTemplateMetadata, or ReadResourceClaimTemplateMetadataWithDriverName
//
// Prints what the reader decoded as one JSON object: the claim (empty from the merging readers),
// podClaimName, and per request each device's driver, pool, name and attributes (keyed like
// DeviceAttribute: {"string": ...}).
//
// Exit codes: 0 decoded, 1 the reader failed (its error on stderr), 2 bad usage.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/api/metadata"
	"k8s.io/dynamic-resource-allocation/devicemetadata"
)

const usage = `usage: devicemetadata [--driver DRIVER] claim CLAIM REQUEST
       devicemetadata [--driver DRIVER] template POD-CLAIM REQUEST`

type device struct {
	Driver     string                                                    `json:"driver"`
	Pool       string                                                    `json:"pool"`
	Name       string                                                    `json:"name"`
	Attributes map[resourceapi.QualifiedName]resourceapi.DeviceAttribute `json:"attributes"`
}

type request struct {
	Name    string   `json:"name"`
	Devices []device `json:"devices"`
}

type decoded struct {
	Namespace    string    `json:"namespace"`
	Name         string    `json:"name"`
	UID          string    `json:"uid"`
	PodClaimName *string   `json:"podClaimName"`
	Requests     []request `json:"requests"`
}

func main() {
	args, driver := os.Args[1:], ""
	if len(args) == 5 && args[0] == "--driver" {
		args, driver = args[2:], args[1]
	}
	if len(args) != 3 {
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	var (
		found *metadata.DeviceMetadata
		err   error
	)
	switch {
	case args[0] == "claim" && driver == "":
		found, err = devicemetadata.ReadResourceClaimMetadata(args[1], args[2])
	case args[0] == "claim":
		found, err = devicemetadata.ReadResourceClaimMetadataWithDriverName(driver, args[1], args[2])
	case args[0] == "template" && driver == "":
		found, err = devicemetadata.ReadResourceClaimTemplateMetadata(args[1], args[2])
	case args[0] == "template":
		found, err = devicemetadata.ReadResourceClaimTemplateMetadataWithDriverName(driver, args[1], args[2])
	default:
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "devicemetadata: %v\n", err)
		os.Exit(1)
	}
	out := decoded{
		Namespace: found.Namespace, Name: found.Name, UID: string(found.UID),
		PodClaimName: found.PodClaimName, Requests: []request{},
	}
	for _, r := range found.Requests {
		entry := request{Name: r.Name, Devices: []device{}}
		for _, d := range r.Devices {
			entry.Devices = append(entry.Devices, device{Driver: d.Driver, Pool: d.Pool, Name: d.Name, Attributes: d.Attributes})
		}
		out.Requests = append(out.Requests, entry)
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fmt.Fprintf(os.Stderr, "devicemetadata: %v\n", err)
		os.Exit(1)
	}
}
