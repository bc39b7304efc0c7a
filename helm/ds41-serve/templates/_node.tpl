{{/* Deployment + headless Service of a gRPC node pool.
Call: ds41.nodePool (dict "root" $ "component" "encoder" "values" .Values.encoder "args" (list ...)) */}}
{{- define "ds41.nodePool" -}}
{{- $root := .root -}}
{{- $v := .values -}}
{{- $c := dict "root" $root "component" .component -}}
{{- $envPrefix := upper .component -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "ds41.component" $c }}
  labels:
    {{- include "ds41.componentLabels" $c | nindent 4 }}
spec:
  {{- if not $v.autoscaling.enabled }}
  replicas: {{ $v.replicas }}
  {{- end }}
  selector:
    matchLabels:
      {{- include "ds41.selectorLabels" $c | nindent 6 }}
  template:
    metadata:
      labels:
        {{- include "ds41.selectorLabels" $c | nindent 8 }}
        {{- with $root.Values.podLabels }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      annotations:
        {{- include "ds41.podAnnotations" $root | nindent 8 }}
    spec:
      {{- include "ds41.podCommon" (dict "root" $root "values" $v) | nindent 6 }}
      # The node's own grace (DS41_SHUTDOWN_GRACE_SECONDS) ends first: in-flight calls are cancelled then
      # and stop within a step, before the kubelet's SIGKILL.
      terminationGracePeriodSeconds: {{ add (int $v.shutdownGraceSeconds) 10 }}
      containers:
        - name: {{ .component }}
          image: {{ include "ds41.image" $root }}
          imagePullPolicy: {{ $root.Values.image.pullPolicy }}
          command: {{ toJson $v.command }}
          {{- with (concat .args $v.extraArgs) }}
          args:
            {{- range . }}
            - {{ . | quote }}
            {{- end }}
          {{- end }}
          envFrom:
            - configMapRef:
                name: {{ include "ds41.configName" $root }}
          env:
            - name: DS41_{{ $envPrefix }}_LISTEN
              value: "0.0.0.0:{{ $v.grpcPort }}"
            - name: DS41_{{ $envPrefix }}_METRICS_LISTEN
              value: "0.0.0.0:{{ $v.metricsPort }}"
            - name: DS41_THREADS
              value: {{ $v.threads | quote }}
            - name: DS41_SHUTDOWN_GRACE_SECONDS
              value: {{ $v.shutdownGraceSeconds | quote }}
            {{- include "ds41.tlsEnv" $root | nindent 12 }}
            {{- include "ds41.mallocEnv" $root | nindent 12 }}
            {{- with $v.extraEnv }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          ports:
            - name: grpc
              containerPort: {{ $v.grpcPort }}
              protocol: TCP
            - name: metrics
              containerPort: {{ $v.metricsPort }}
              protocol: TCP
          {{- include "ds41.grpcProbes" (dict "root" $root "values" $v) | nindent 10 }}
          resources:
            {{- toYaml $v.resources | nindent 12 }}
          securityContext:
            {{- toYaml $root.Values.securityContext | nindent 12 }}
          volumeMounts:
            - name: model
              mountPath: {{ $root.Values.model.path }}
              readOnly: true
            - name: tmp
              mountPath: /tmp
            {{- if eq $root.Values.model.weightTiles "file" }}
            - name: weight-tiles
              mountPath: /var/lib/ds41-tiles
            {{- end }}
            {{- include "ds41.tlsVolumeMount" $root | nindent 12 }}
      volumes:
        - name: model
          {{- if $root.Values.model.existingClaim }}
          persistentVolumeClaim:
            claimName: {{ $root.Values.model.existingClaim }}
            readOnly: true
          {{- else }}
          hostPath:
            path: {{ required "model.hostPath or model.existingClaim is required" $root.Values.model.hostPath }}
            type: Directory
          {{- end }}
        {{- if eq $root.Values.model.weightTiles "file" }}
        - name: weight-tiles
          hostPath:
            path: {{ $root.Values.model.weightTilesHostPath }}
            type: DirectoryOrCreate
        {{- end }}
        - name: tmp
          emptyDir: {}
        {{- include "ds41.tlsVolume" $root | nindent 8 }}
---
# Headless: the router resolves every ready pod of the pool (dns:///<service>:<port>).
apiVersion: v1
kind: Service
metadata:
  name: {{ include "ds41.component" $c }}
  labels:
    {{- include "ds41.componentLabels" $c | nindent 4 }}
spec:
  clusterIP: None
  selector:
    {{- include "ds41.selectorLabels" $c | nindent 4 }}
  ports:
    - name: grpc
      port: {{ $v.grpcPort }}
      targetPort: grpc
      appProtocol: grpc
    - name: metrics
      port: {{ $v.metricsPort }}
      targetPort: metrics
{{- if $v.pdb.enabled }}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ include "ds41.component" $c }}
  labels:
    {{- include "ds41.componentLabels" $c | nindent 4 }}
spec:
  {{- if hasKey $v.pdb "minAvailable" }}
  minAvailable: {{ $v.pdb.minAvailable }}
  {{- else }}
  maxUnavailable: {{ $v.pdb.maxUnavailable | default 1 }}
  {{- end }}
  selector:
    matchLabels:
      {{- include "ds41.selectorLabels" $c | nindent 6 }}
{{- end }}
{{- end -}}
