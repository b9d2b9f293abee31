// Pins NVIDIA's CDI hook, the program our base CDI spec names for the container-creation steps a
// mount cannot do (soname links, the container's ld cache). gpu-handler ships it in its image and
// installs it on the host. Bump with: make tools-update TOOL=nvidia-cdi-hook VERSION=vX.Y.Z
module gpu-control-plane/hack/tools/nvidia-cdi-hook

go 1.26.0

tool github.com/NVIDIA/nvidia-container-toolkit/cmd/nvidia-cdi-hook

require (
	cyphar.com/go-pathrs v0.2.6 // indirect
	github.com/Masterminds/semver/v3 v3.5.0 // indirect
	github.com/NVIDIA/go-nvlib v0.12.0 // indirect
	github.com/NVIDIA/go-nvml v0.13.4-1 // indirect
	github.com/NVIDIA/nvidia-container-toolkit v1.20.2 // indirect
	github.com/cyphar/filepath-securejoin v0.7.0 // indirect
	github.com/fsnotify/fsnotify v1.7.0 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/moby/sys/devices v0.1.0 // indirect
	github.com/moby/sys/mountinfo v0.7.2 // indirect
	github.com/moby/sys/reexec v0.1.0 // indirect
	github.com/moby/sys/symlink v0.3.0 // indirect
	github.com/opencontainers/cgroups v0.1.0 // indirect
	github.com/opencontainers/runc v1.5.2 // indirect
	github.com/opencontainers/runtime-spec v1.3.0 // indirect
	github.com/pelletier/go-toml v1.9.5 // indirect
	github.com/prometheus/procfs v0.21.1 // indirect
	github.com/sirupsen/logrus v1.9.4 // indirect
	github.com/urfave/cli/v3 v3.10.1 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/sys v0.49.0 // indirect
	tags.cncf.io/container-device-interface v1.1.1 // indirect
	tags.cncf.io/container-device-interface/specs-go v1.1.1 // indirect
)
