{{/* Chart name. */}}
{{- define "ds41.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Release-qualified base name used by every object. */}}
{{- define "ds41.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Name of one component: ds41.component (dict "root" $ "component" "encoder"). */}}
{{- define "ds41.component" -}}
{{- printf "%s-%s" (include "ds41.fullname" .root) .component | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "ds41.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "ds41.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: ds41-serve
{{- end -}}

{{/* Selector labels of one component: ds41.selectorLabels (dict "root" $ "component" "router"). */}}
{{- define "ds41.selectorLabels" -}}
app.kubernetes.io/name: {{ include "ds41.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "ds41.componentLabels" -}}
{{ include "ds41.labels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "ds41.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "ds41.configName" -}}{{ include "ds41.fullname" . }}-config{{- end -}}
{{- define "ds41.authSecretName" -}}{{ default (printf "%s-auth" (include "ds41.fullname" .)) .Values.auth.existingSecret }}{{- end -}}
{{- define "ds41.tlsSecretName" -}}{{ default (printf "%s-tls" (include "ds41.fullname" .)) .Values.tls.existingSecret }}{{- end -}}
{{- define "ds41.cacheHeadless" -}}{{ include "ds41.component" (dict "root" . "component" "cache") }}-headless{{- end -}}

{{/* Comma-separated DNS names of the cache StatefulSet pods, one per shard. */}}
{{- define "ds41.cacheShards" -}}
{{- $sts := include "ds41.component" (dict "root" . "component" "cache") -}}
{{- $svc := include "ds41.cacheHeadless" . -}}
{{- $shards := list -}}
{{- range $i := until (int .Values.cacheService.replicas) -}}
{{- $shards = append $shards (printf "%s-%d.%s.%s.svc:%d" $sts $i $svc $.Release.Namespace (int $.Values.cacheService.grpcPort)) -}}
{{- end -}}
{{- join "," $shards -}}
{{- end -}}

{{/* Pod-level settings shared by all components. */}}
{{- define "ds41.podCommon" -}}
{{- with .root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml .root.Values.podSecurityContext | nindent 2 }}
{{- with .values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* Pod annotations: restart pods when config or secrets change. */}}
{{- define "ds41.podAnnotations" -}}
checksum/config: {{ include (print .Template.BasePath "/configmap.yaml") . | sha256sum }}
checksum/secret: {{ include (print .Template.BasePath "/secret.yaml") . | sha256sum }}
{{- with .Values.podAnnotations }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The allocator's settings for every binary (values: mallocTunables). */}}
{{- define "ds41.mallocEnv" -}}
{{- with .Values.mallocTunables }}
- name: GLIBC_TUNABLES
  value: {{ . | quote }}
{{- end }}
{{- end }}

{{/* TLS environment (the binaries read DS41_TLS_* when TLS is on). */}}
{{- define "ds41.tlsEnv" -}}
{{- if .Values.tls.enabled }}
- name: DS41_TLS_CERT
  value: {{ printf "%s/tls.crt" .Values.tls.mountPath | quote }}
- name: DS41_TLS_KEY
  value: {{ printf "%s/tls.key" .Values.tls.mountPath | quote }}
- name: DS41_TLS_CA
  value: {{ printf "%s/ca.crt" .Values.tls.mountPath | quote }}
- name: DS41_TLS_CLIENT_AUTH
  value: {{ .Values.tls.clientAuth | quote }}
- name: DS41_TLS_SERVER_NAME
  value: {{ .Values.tls.serverName | quote }}
{{- end }}
{{- end -}}

{{- define "ds41.tlsVolumeMount" -}}
{{- if .Values.tls.enabled }}
- name: tls
  mountPath: {{ .Values.tls.mountPath }}
  readOnly: true
{{- end }}
{{- end -}}

{{- define "ds41.tlsVolume" -}}
{{- if .Values.tls.enabled }}
- name: tls
  secret:
    secretName: {{ include "ds41.tlsSecretName" . }}
    defaultMode: 0440
{{- end }}
{{- end -}}

{{/* Probes of a gRPC node: ds41.grpcProbes (dict "root" $ "values" .Values.encoder).
The nodes enable the standard grpc.health.v1 service; kubelet gRPC probes cannot speak TLS, so
with tls.enabled readiness falls back to a TCP check of the gRPC port and liveness to the
plain-HTTP /metrics endpoint. */}}
{{- define "ds41.grpcProbes" -}}
{{- if .root.Values.tls.enabled }}
startupProbe:
  tcpSocket:
    port: grpc
  periodSeconds: 10
  failureThreshold: {{ .values.startupProbe.failureThreshold | default 120 }}
readinessProbe:
  tcpSocket:
    port: grpc
  periodSeconds: 5
  failureThreshold: 3
livenessProbe:
  httpGet:
    path: /metrics
    port: metrics
  periodSeconds: 10
  timeoutSeconds: 5
  failureThreshold: 6
{{- else }}
startupProbe:
  grpc:
    port: {{ .values.grpcPort }}
  periodSeconds: 10
  failureThreshold: {{ .values.startupProbe.failureThreshold | default 120 }}
readinessProbe:
  grpc:
    port: {{ .values.grpcPort }}
  periodSeconds: 5
  failureThreshold: 3
livenessProbe:
  grpc:
    port: {{ .values.grpcPort }}
  periodSeconds: 10
  timeoutSeconds: 5
  failureThreshold: 6
{{- end }}
{{- end -}}

{{/* NetworkPolicy peers: the pods of each component in .components (ds41.peersFrom (dict "root" $ "components" (list "router"))). */}}
{{- define "ds41.peersFrom" -}}
{{- range .components }}
- podSelector:
    matchLabels:
      {{- include "ds41.selectorLabels" (dict "root" $.root "component" .) | nindent 6 }}
{{- end }}
{{- end -}}
