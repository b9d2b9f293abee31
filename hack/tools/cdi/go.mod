// Pins the CDI loader that validates our CDI specs in tests (the one container runtimes vendor).
// Bump with: make tools-update TOOL=cdi VERSION=vX.Y.Z
module gpu-control-plane/hack/tools/cdi

go 1.26.0

require (
	github.com/opencontainers/runtime-spec v1.3.0
	tags.cncf.io/container-device-interface v1.1.1
)

require (
	github.com/fsnotify/fsnotify v1.7.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/sys v0.19.0 // indirect
	tags.cncf.io/container-device-interface/specs-go v1.1.1 // indirect
)
