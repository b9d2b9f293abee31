// Pins the Prometheus Operator release whose CustomResourceDefinitions (the module's
// example/prometheus-operator-crd/) the integration tier installs, to apply the chart's
// ServiceMonitors and PrometheusRule against them. Nothing of it is built: the tool line names the
// module's smallest command only so that go.mod and go.sum keep the module pinned.
// Bump with: make tools-update TOOL=prometheus-operator VERSION=vX.Y.Z
module gpu-control-plane/hack/tools/prometheus-operator

go 1.26.0

tool github.com/prometheus-operator/prometheus-operator/cmd/po-rule-migration

require (
	github.com/alecthomas/kingpin/v2 v2.4.0 // indirect
	github.com/alecthomas/units v0.0.0-20240927000941-0f3dac36c52b // indirect
	github.com/fxamacker/cbor/v2 v2.8.0 // indirect
	github.com/go-logr/logr v1.4.3 // indirect
	github.com/gogo/protobuf v1.3.2 // indirect
	github.com/json-iterator/go v1.1.12 // indirect
	github.com/modern-go/concurrent v0.0.0-20180306012644-bacd9c7ef1dd // indirect
	github.com/modern-go/reflect2 v1.0.2 // indirect
	github.com/prometheus-operator/prometheus-operator v0.85.0 // indirect
	github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring v0.85.0 // indirect
	github.com/prometheus/common v0.65.0 // indirect
	github.com/x448/float16 v0.8.4 // indirect
	github.com/xhit/go-str2duration/v2 v2.1.0 // indirect
	go.yaml.in/yaml/v2 v2.4.2 // indirect
	golang.org/x/net v0.43.0 // indirect
	golang.org/x/text v0.28.0 // indirect
	gopkg.in/inf.v0 v0.9.1 // indirect
	k8s.io/api v0.33.3 // indirect
	k8s.io/apimachinery v0.33.3 // indirect
	k8s.io/klog/v2 v2.130.1 // indirect
	k8s.io/utils v0.0.0-20250604170112-4c0f3b243397 // indirect
	sigs.k8s.io/json v0.0.0-20241014173422-cfa47c3a1cc8 // indirect
	sigs.k8s.io/randfill v1.0.0 // indirect
	sigs.k8s.io/structured-merge-diff/v4 v4.7.0 // indirect
	sigs.k8s.io/yaml v1.6.0 // indirect
)
