{{/*
Names and labels shared by every template.

Object names are "<fullname>-<component>" (e.g. "gpu-control-plane-gpu-controller"), so they carry the
release name: two releases never collide, not even on cluster-scoped objects.
*/}}

{{/* The chart name, or .Values.nameOverride. */}}
{{- define "gpu-control-plane.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The name prefix of every object: .Values.fullnameOverride, else the release name when it already
contains the chart name, else "<release>-<chart>". At most 40 characters, leaving room for the
component suffix within the 63 characters of a label value.
*/}}
{{- define "gpu-control-plane.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- $name := include "gpu-control-plane.name" . }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* "<chart>-<version>" for the helm.sh/chart label. */}}
{{- define "gpu-control-plane.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels of every object. */}}
{{- define "gpu-control-plane.labels" -}}
helm.sh/chart: {{ include "gpu-control-plane.chart" . }}
app.kubernetes.io/name: {{ include "gpu-control-plane.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: gpu-control-plane
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* gpu-controller: its object name, its labels and the subset that selects its Pods. */}}
{{- define "gpu-control-plane.controller.fullname" -}}
{{- printf "%s-gpu-controller" (include "gpu-control-plane.fullname" .) }}
{{- end }}

{{- define "gpu-control-plane.controller.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gpu-control-plane.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: gpu-controller
{{- end }}

{{- define "gpu-control-plane.controller.labels" -}}
{{ include "gpu-control-plane.labels" . }}
app.kubernetes.io/component: gpu-controller
{{- end }}

{{/*
The Lease the gpu-controller replicas compete for; the Role grants exactly this name. It is the
binary's default (--leader-election-id), so config/rbac works for a Deployment that passes no flag;
the chart still passes it, to keep the Role and the flag visibly together. Leases are namespaced, so
releases in different namespaces do not share one.
*/}}
{{- define "gpu-control-plane.controller.leaseName" -}}
gpu-controller-leader
{{- end }}

{{/* Leader election is on when more than one replica runs (see controller.replicas). */}}
{{- define "gpu-control-plane.controller.leaderElect" -}}
{{- if gt (int .Values.controller.replicas) 1 }}true{{ else }}false{{ end }}
{{- end }}

{{/* gpu-dra-controller: its object name, its labels and the subset that selects its Pods. */}}
{{- define "gpu-control-plane.draController.fullname" -}}
{{- printf "%s-gpu-dra-controller" (include "gpu-control-plane.fullname" .) }}
{{- end }}

{{- define "gpu-control-plane.draController.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gpu-control-plane.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: gpu-dra-controller
{{- end }}

{{- define "gpu-control-plane.draController.labels" -}}
{{ include "gpu-control-plane.labels" . }}
app.kubernetes.io/component: gpu-dra-controller
{{- end }}

{{/*
The Lease the gpu-dra-controller replicas compete for; the Role grants exactly this name. It is the
binary's default (--leader-election-id), so config/rbac works for a Deployment that passes no flag.
*/}}
{{- define "gpu-control-plane.draController.leaseName" -}}
gpu-dra-controller-leader
{{- end }}

{{/* The ConfigMap of the allocation ledger (device-seconds across restarts), in the release namespace. */}}
{{- define "gpu-control-plane.draController.ledgerName" -}}
gpu-dra-allocation-ledger
{{- end }}

{{/* Leader election is on when more than one replica runs (see draController.replicas). */}}
{{- define "gpu-control-plane.draController.leaderElect" -}}
{{- if gt (int .Values.draController.replicas) 1 }}true{{ else }}false{{ end }}
{{- end }}

{{/* The image reference; the tag defaults to the chart's appVersion. */}}
{{- define "gpu-control-plane.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/*
LOG_DEBUG_VERBOSITY: the configured value, or 10 when it is 0 and the level is Debug (Debug means
deep debugging unless a depth is set; docs/architecture.md#logging).
*/}}
{{- define "gpu-control-plane.logDebugVerbosity" -}}
{{- $verbosity := int .Values.logging.debugVerbosity }}
{{- if and (eq $verbosity 0) (eq (lower .Values.logging.level) "debug") }}10{{ else }}{{ $verbosity }}{{ end }}
{{- end }}

{{/*
The node components' configuration ConfigMap (templates/operator-config.yaml): gpu-controller's
--operator-config, and the prefix of the DaemonSets it renders (<this>-<component>).
*/}}
{{- define "gpu-control-plane.operatorConfig.name" -}}
{{- include "gpu-control-plane.fullname" . }}
{{- end }}
