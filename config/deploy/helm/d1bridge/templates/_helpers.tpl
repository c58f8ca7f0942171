{{/* The chart name, for labels. */}}
{{- define "d1bridge.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The full name of the release's objects. */}}
{{- define "d1bridge.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "d1bridge.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "d1bridge.labels" -}}
helm.sh/chart: {{ include "d1bridge.chart" . }}
{{ include "d1bridge.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "d1bridge.selectorLabels" -}}
app.kubernetes.io/name: {{ include "d1bridge.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "d1bridge.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "d1bridge.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The Secret mounted at /run/secrets/d1bridge. */}}
{{- define "d1bridge.secretName" -}}
{{- default (include "d1bridge.fullname" .) .Values.secrets.name }}
{{- end }}

{{/*
d1bridge.checkWork fails the render when the config asks for work that
runs on every replica and is not shared yet (replication jobs, harvest).
*/}}
{{- define "d1bridge.checkWork" -}}
{{- if and (gt (int .Values.replicaCount) 1) (not .Values.allowPerReplicaWork) }}
{{- $node := .Values.config.node | default dict }}
{{- if $node.replicate }}
{{- fail "config.node.replicate with replicaCount > 1: each replica keeps its accepted replication jobs in its own dataDir (an emptyDir); set allowPerReplicaWork: true to accept that, or run one replica" }}
{{- end }}
{{- range (.Values.config.upstreams | default list) }}
{{- if and .harvest .harvest.interval (ne (toString .harvest.interval) "0") (ne (toString .harvest.interval) "0s") }}
{{- fail (printf "config.upstreams %v harvests with replicaCount > 1: every replica would run its own harvester; set allowPerReplicaWork: true to accept that, or run one replica" .name) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
