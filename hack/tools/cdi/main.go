// cdi-validate runs the CDI project's own library — the one container runtimes use (containerd
// vendors it) — in two modes:
//
//	cdi-validate FILE...
//	    loads each spec file and fails on the first one the loader rejects: unknown fields, a
//	    version older than the fields used need, invalid kind or device names, invalid container
//	    edits. Prints "FILE: <qualified device names>" per valid file.
//
//	cdi-validate inject --spec-dir DIR [--spec-dir DIR...] --config BUNDLE/config.json DEVICE...
//	    loads every spec in the folders into a CDI cache and applies the named devices (qualified
//	    names, "vendor/class=name") to the OCI runtime spec in place, with the cache's own
//	    InjectDevices: exactly what a runtime does for a container given those devices. Fails,
//	    listing them, when a device resolves to no spec (with the errors of the specs the cache
//	    could not load, which are usually why). Prints "injected: <devices>" on success.
//
// The inject mode exists so that a container can be given nothing but what our specs say, by
// runc alone, without a container runtime: the hardware tier runs a CUDA program that way.
//
// Exit codes: 0 success, 1 a spec, device or config the library rejected, 2 bad usage.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	oci "github.com/opencontainers/runtime-spec/specs-go"
	"tags.cncf.io/container-device-interface/pkg/cdi"
)

const usage = `usage: cdi-validate FILE...
       cdi-validate inject --spec-dir DIR [--spec-dir DIR...] --config BUNDLE/config.json DEVICE...`

// usageError is bad usage: exit code 2, as opposed to 1 for what the CDI library rejected.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func main() {
	var err error
	if len(os.Args) >= 2 && os.Args[1] == "inject" {
		err = inject(os.Args[2:])
	} else {
		err = validate(os.Args[1:])
	}
	if err == nil {
		return
	}
	var bad usageError
	if errors.As(err, &bad) {
		fmt.Fprintf(os.Stderr, "cdi-validate: %v\n%s\n", err, usage)
		os.Exit(2)
	}
	fmt.Fprintf(os.Stderr, "cdi-validate: %v\n", err)
	os.Exit(1)
}

// validate loads each file as one spec and prints its qualified device names.
func validate(paths []string) error {
	if len(paths) == 0 {
		return usageError{"no spec file given"}
	}
	for _, path := range paths {
		spec, err := cdi.ReadSpec(path, 0)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		var names []string
		for _, device := range spec.Devices {
			names = append(names, spec.GetVendor()+"/"+spec.GetClass()+"="+device.Name)
		}
		sort.Strings(names)
		fmt.Printf("%s: %s\n", path, strings.Join(names, " "))
	}
	return nil
}

// specDirs collects repeated --spec-dir flags in their order (later folders take precedence in
// the CDI cache, as in a runtime's configuration).
type specDirs []string

func (d *specDirs) String() string     { return strings.Join(*d, ",") }
func (d *specDirs) Set(v string) error { *d = append(*d, v); return nil }

// inject applies the named CDI devices to the OCI config file in place.
func inject(args []string) error {
	flags := flag.NewFlagSet("inject", flag.ContinueOnError)
	flags.SetOutput(os.Stderr)
	var dirs specDirs
	flags.Var(&dirs, "spec-dir", "a folder of CDI specs (repeatable)")
	config := flags.String("config", "", "the OCI runtime spec (a bundle's config.json), edited in place")
	if err := flags.Parse(args); err != nil {
		return usageError{err.Error()}
	}
	devices := flags.Args()
	switch {
	case len(dirs) == 0:
		return usageError{"inject: no --spec-dir given"}
	case *config == "":
		return usageError{"inject: no --config given"}
	case len(devices) == 0:
		return usageError{"inject: no CDI device given"}
	}
	for _, dir := range dirs {
		// The cache skips a missing folder silently; a typo here would read as "unresolvable".
		info, err := os.Stat(dir)
		if err != nil {
			return fmt.Errorf("spec folder %s: %w", dir, err)
		}
		if !info.IsDir() {
			return fmt.Errorf("spec folder %s: not a directory", dir)
		}
	}

	spec, mode, err := readConfig(*config)
	if err != nil {
		return err
	}
	// No auto-refresh: one scan of the folders, no file watcher left behind.
	cache, err := cdi.NewCache(cdi.WithSpecDirs(dirs...), cdi.WithAutoRefresh(false))
	if err != nil {
		return fmt.Errorf("CDI cache over %s: %w", dirs.String(), err)
	}
	unresolved, err := cache.InjectDevices(spec, devices...)
	if err != nil {
		if len(unresolved) > 0 {
			return fmt.Errorf("unresolved CDI devices in %s: %s%s", dirs.String(),
				strings.Join(unresolved, " "), specErrors(cache))
		}
		return fmt.Errorf("injecting %s into %s: %w", strings.Join(devices, " "), *config, err)
	}
	if err := writeConfig(*config, spec, mode); err != nil {
		return err
	}
	fmt.Printf("injected: %s\n", strings.Join(devices, " "))
	return nil
}

// specErrors lists the specs the cache could not load, sorted by path, one per line.
func specErrors(cache *cdi.Cache) string {
	byPath := cache.GetErrors()
	if len(byPath) == 0 {
		return ""
	}
	paths := make([]string, 0, len(byPath))
	for path := range byPath {
		paths = append(paths, path)
	}
	sort.Strings(paths)
	var b strings.Builder
	b.WriteString("\nspecs the CDI library could not load:")
	for _, path := range paths {
		fmt.Fprintf(&b, "\n  %s: %v", path, errors.Join(byPath[path]...))
	}
	return b.String()
}

// readConfig reads an OCI runtime spec strictly enough that a wrong file fails here, not in runc.
func readConfig(path string) (*oci.Spec, os.FileMode, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, 0, fmt.Errorf("OCI config %s: %w", path, err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, 0, fmt.Errorf("OCI config %s: %w", path, err)
	}
	var spec oci.Spec
	if err := json.Unmarshal(data, &spec); err != nil {
		return nil, 0, fmt.Errorf("OCI config %s: %w", path, err)
	}
	if spec.Version == "" {
		return nil, 0, fmt.Errorf("OCI config %s: no ociVersion: not an OCI runtime spec", path)
	}
	return &spec, info.Mode().Perm(), nil
}

// writeConfig replaces the file atomically (temporary file in the same folder, then rename), so
// a failure never leaves half a config for runc to read.
func writeConfig(path string, spec *oci.Spec, mode os.FileMode) error {
	data, err := json.MarshalIndent(spec, "", "\t")
	if err != nil {
		return fmt.Errorf("OCI config %s: %w", path, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("OCI config %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // a no-op after the rename
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("OCI config %s: %w", path, err)
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return fmt.Errorf("OCI config %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("OCI config %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("OCI config %s: %w", path, err)
	}
	return nil
}
