{{/*
kube-rbac-proxy in front of every component's /metrics (values metricsProxy). The
component listens on loopback only; the proxy serves HTTPS on metricsProxy.port (a self-signed
certificate it makes at start) and lets /metrics through for a bearer token allowed to get the
/metrics non-resource URL (ClusterRole <fullname>-metrics-reader, templates/metrics-proxy-rbac.yaml).
Any other path is checked as the non-resource URL it names (which that role does not grant);
/healthz and /readyz pass without a token, for the kubelet's probes (--ignore-paths, which
kube-rbac-proxy does not combine with --allow-paths). The node components get the same
sidecar from gpu-controller (metricsProxy of the configuration document).
*/}}

{{/* The component's --metrics-bind-address: loopback behind the proxy, every address without. */}}
{{- define "gpu-control-plane.metricsProxy.bindAddress" -}}
{{- if .root.Values.metricsProxy.enabled }}127.0.0.1:{{ .port }}{{ else }}:{{ .port }}{{ end }}
{{- end }}

{{/*
The port the probes use: the proxy's by number (a probe may name only its own container's ports, and
the proxy's is the sidecar's), or the component's own by name.
*/}}
{{- define "gpu-control-plane.metricsProxy.probePort" -}}
{{- if .Values.metricsProxy.enabled }}{{ .Values.metricsProxy.port }}{{ else }}metrics{{ end }}
{{- end }}

{{- define "gpu-control-plane.metricsProxy.image" -}}
{{- printf "%s:%s" .Values.metricsProxy.image.repository .Values.metricsProxy.image.tag }}
{{- end }}

{{/* The sidecar (a list item), for upstream port .port of the component. */}}
{{- define "gpu-control-plane.metricsProxy.container" -}}
{{- $p := .root.Values.metricsProxy -}}
- name: kube-rbac-proxy
  image: {{ include "gpu-control-plane.metricsProxy.image" .root }}
  imagePullPolicy: {{ $p.pullPolicy }}
  args:
    - --secure-listen-address=0.0.0.0:{{ $p.port }}
    - --upstream=http://127.0.0.1:{{ .port }}/
    - --ignore-paths=/healthz,/readyz
  ports:
    - name: https-metrics
      containerPort: {{ $p.port }}
      protocol: TCP
  resources:
    {{- toYaml $p.resources | nindent 4 }}
  securityContext:
    runAsNonRoot: true
    runAsUser: 65532
    runAsGroup: 65532
    allowPrivilegeEscalation: false
    readOnlyRootFilesystem: true
    capabilities:
      drop:
        - ALL
    seccompProfile:
      type: RuntimeDefault
{{- end }}
