{{/*
opsd.name: the chart name, or nameOverride; used in the app.kubernetes.io/name label.
Truncated to 63 characters because Kubernetes label values and DNS names allow no more.
*/}}
{{- define "opsd.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
opsd.fullname: the name of every object of a release, "<release>-<chart>" unless the release name
already contains the chart name, or fullnameOverride. Truncated to 63 characters (DNS label).
*/}}
{{- define "opsd.fullname" -}}
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

{{/*
opsd.chart: "<chart>-<version>" for the helm.sh/chart label ("+" is not allowed in label values).
*/}}
{{- define "opsd.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
opsd.labels: the labels of every object: the selector labels plus chart, version and manager.
*/}}
{{- define "opsd.labels" -}}
helm.sh/chart: {{ include "opsd.chart" . }}
{{ include "opsd.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: yt-streaming-opsd
{{- end }}

{{/*
opsd.selectorLabels: the labels Services and the Deployment select the opsd pod by. They must never
change between upgrades (a Deployment's selector is immutable), so they hold no version.
*/}}
{{- define "opsd.selectorLabels" -}}
app.kubernetes.io/name: {{ include "opsd.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
opsd.serviceAccountName: the ServiceAccount the pod runs as and the RoleBinding grants rights to.
*/}}
{{- define "opsd.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "opsd.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
opsd.image: the opsd image reference; the tag defaults to the chart's appVersion.
*/}}
{{- define "opsd.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}

{{/*
opsd.driverServiceName: the headless Service executors reach the Spark driver through.
*/}}
{{- define "opsd.driverServiceName" -}}
{{- printf "%s-driver" (include "opsd.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
opsd.executorServiceAccountName: the executor pods' ServiceAccount, which mounts no token (executors never call the
API server).
*/}}
{{- define "opsd.executorServiceAccountName" -}}
{{- printf "%s-executor" (include "opsd.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
opsd.executorSelectorLabels: the labels of the executor pods (from their pod template), which the executors'
NetworkPolicy selects and the driver's admits. Never the opsd pod's own: the Deployment must not select executors.
*/}}
{{- define "opsd.executorSelectorLabels" -}}
app.kubernetes.io/name: {{ printf "%s-executor" (include "opsd.name" .) | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
opsd.sparkAuthDir: where the driver and the executors mount Spark's RPC authentication secret (as the file `secret`).
*/}}
{{- define "opsd.sparkAuthDir" -}}
/var/run/secrets/opsd/spark-auth
{{- end }}

{{/*
opsd.sparkAuthSecretName: the existing Secret holding Spark's RPC authentication secret
(sparkOnKubernetes.authSecret.existingSecret). The chart never makes it: a secret generated at render time (randAlphaNum,
even kept with `lookup`) changes with every `helm template` or GitOps render, and executors started after a change
cannot authenticate to the driver. Rendering fails, saying how to make it once, when it is not named.
*/}}
{{- define "opsd.sparkAuthSecretName" -}}
{{- required "sparkOnKubernetes.authSecret.existingSecret: name a Secret holding Spark's RPC secret, made once, e.g. kubectl create secret generic opsd-spark-auth --from-literal=secret=$(openssl rand -hex 32) (or set sparkOnKubernetes.authenticate=false)" .Values.sparkOnKubernetes.authSecret.existingSecret }}
{{- end }}

{{/*
opsd.sparkAuthVolume: the volume of the driver's and the executors' pods with that Secret's key as the file `secret`.
*/}}
{{- define "opsd.sparkAuthVolume" -}}
- name: spark-auth
  secret:
    secretName: {{ include "opsd.sparkAuthSecretName" . }}
    items:
      - key: {{ .Values.sparkOnKubernetes.authSecret.key }}
        path: secret
    defaultMode: 0440
{{- end }}

{{/*
opsd.httpTokenFile: where opsd reads the bearer token of /metrics and /status (httpAuth), mounted from its Secret.
*/}}
{{- define "opsd.httpTokenFile" -}}
/var/run/secrets/opsd/http-auth/token
{{- end }}

{{/*
opsd.httpTokenSecretName: the existing Secret holding that token (httpAuth.existingSecret); rendering fails, saying
how to make one, when it is not named.
*/}}
{{- define "opsd.httpTokenSecretName" -}}
{{- required "httpAuth.existingSecret: name a Secret holding the bearer token of /metrics and /status, e.g. kubectl create secret generic opsd-http-token --from-literal=token=$(openssl rand -hex 32) (or set httpAuth.enabled=false)" .Values.httpAuth.existingSecret }}
{{- end }}

{{/*
opsd.executorPodTemplateFile: where the driver reads the executors' pod template (a key of the ConfigMap).
*/}}
{{- define "opsd.executorPodTemplateFile" -}}
/etc/opsd/executor-pod-template.yaml
{{- end }}

{{/*
opsd.executorPodTemplate: the pod template Spark builds every executor pod from
(spark.kubernetes.executor.podTemplateFile). Spark adds its own labels, env, ports, resources and local-dir
volumes and sets the image and ServiceAccount; what the template sets stays: no ServiceAccount token, the opsd
pod's security contexts, a writable /tmp on a read-only root, YT_TOKEN from the same Secret as the driver and
the RPC authentication secret as a file.
*/}}
{{- define "opsd.executorPodTemplate" -}}
apiVersion: v1
kind: Pod
metadata:
  labels:
    {{- include "opsd.executorSelectorLabels" . | nindent 4 }}
  annotations:
    {{- include "opsd.executorCheckovSkips" . | nindent 4 }}
spec:
  serviceAccountName: {{ include "opsd.executorServiceAccountName" . }}
  automountServiceAccountToken: false
  securityContext:
    {{- toYaml .Values.podSecurityContext | nindent 4 }}
  containers:
    - name: executor
      securityContext:
        {{- toYaml .Values.securityContext | nindent 8 }}
      env:
        {{- with .Values.ytToken.existingSecret }}
        - name: YT_TOKEN
          valueFrom:
            secretKeyRef:
              name: {{ . }}
              key: {{ $.Values.ytToken.key }}
        {{- end }}
        - name: HOME
          value: /tmp
      volumeMounts:
        - name: tmp
          mountPath: /tmp
        {{- if .Values.sparkOnKubernetes.authenticate }}
        - name: spark-auth
          mountPath: {{ include "opsd.sparkAuthDir" . }}
          readOnly: true
        {{- end }}
  volumes:
    - name: tmp
      emptyDir: {}
    {{- if .Values.sparkOnKubernetes.authenticate }}
    {{- include "opsd.sparkAuthVolume" . | nindent 4 }}
    {{- end }}
{{- end }}

{{/*
opsd.executorCheckovSkips: the checkov checks an executor pod (its template, scanned as a Pod by the chart's tests)
fails on purpose, each with its reason; Spark keeps the template's annotations on the pods it creates.
*/}}
{{- define "opsd.executorCheckovSkips" -}}
checkov.io/skip1: CKV_K8S_10=Spark sets the executor's CPU request from spark.executor.cores
checkov.io/skip2: CKV_K8S_11=No CPU limit on purpose - CFS throttling stretches micro-batches; spark.kubernetes.executor.limit.cores sets one
checkov.io/skip3: CKV_K8S_12=Spark sets the executor's memory request from spark.executor.memory and its overhead
checkov.io/skip4: CKV_K8S_13=Spark sets the executor's memory limit equal to its request
checkov.io/skip5: CKV_K8S_8=Spark runs executors without probes - the driver drops an executor whose heartbeats stop
checkov.io/skip6: CKV_K8S_9=Spark runs executors without probes - an executor takes tasks once it registered with the driver
checkov.io/skip7: CKV_K8S_15=Images are immutable release tags; spark.kubernetes.container.image.pullPolicy can be set to Always
checkov.io/skip8: CKV_K8S_40=The image's user is uid 1000 by design (the Dockerfile and the pod security context agree)
checkov.io/skip9: CKV_K8S_43=The image is chosen by image.repository and image.tag; a digest can be given as the tag
{{- if .Values.ytToken.existingSecret }}
checkov.io/skip10: CKV_K8S_35=opsd and ytsaurus-client read the YTsaurus token from the YT_TOKEN environment variable
{{- end }}
{{- end }}

{{/*
opsd.podNameEnv: the environment variable of the opsd container holding its pod's name (downward API). Spark reads
spark.kubernetes.driver.pod.name from it (`${env:...}` in a Spark conf value): executor pods are then owned by the
driver's pod (ownerReferences), so Kubernetes deletes them with it instead of leaving them to outlive a dead driver.
*/}}
{{- define "opsd.podNameEnv" -}}
OPSD_POD_NAME
{{- end }}

{{/*
opsd.config: the opsd configuration file. It is .Values.config as given, except that httpAuth.enabled sets
http.bearer_token_file to the Secret's mounted file, and that with sparkOnKubernetes.enabled the Spark conf executors need is added under config.spark (the driver's address and
ports, its pod's name, the executors' ServiceAccount and pod template, RPC authentication and encryption; the driver
Service is the chart's, so Spark does not delete services); keys the user set there win, so any derived value can be
overridden.
*/}}
{{- define "opsd.config" -}}
{{- $config := deepCopy .Values.config }}
{{- $spark := deepCopy (.Values.config.spark | default dict) }}
{{- $conf := deepCopy ($spark.conf | default dict) }}
{{- if .Values.sparkOnKubernetes.enabled }}
{{- $k8s := .Values.sparkOnKubernetes }}
{{- if not $spark.master }}
{{- $_ := set $spark "master" "k8s://https://kubernetes.default.svc" }}
{{- end }}
{{- $derived := dict
  "spark.submit.deployMode" "client"
  "spark.kubernetes.namespace" .Release.Namespace
  "spark.kubernetes.container.image" ($k8s.executorImage | default (include "opsd.image" .))
  "spark.kubernetes.authenticate.driver.serviceAccountName" (include "opsd.serviceAccountName" .)
  "spark.driver.host" (printf "%s.%s.svc" (include "opsd.driverServiceName" .) .Release.Namespace)
  "spark.driver.bindAddress" "0.0.0.0"
  "spark.driver.port" (toString $k8s.driverPort)
  "spark.driver.blockManager.port" (toString $k8s.blockManagerPort)
  "spark.kubernetes.authenticate.executor.serviceAccountName" (include "opsd.executorServiceAccountName" .)
  "spark.kubernetes.executor.podTemplateFile" (include "opsd.executorPodTemplateFile" .)
  "spark.kubernetes.executor.podTemplateContainerName" "executor"
  "spark.kubernetes.driver.service.deleteOnTermination" "false"
  "spark.kubernetes.driver.pod.name" (printf "${env:%s}" (include "opsd.podNameEnv" .))
}}
{{- if $k8s.authenticate }}
{{- $secretFile := printf "%s/secret" (include "opsd.sparkAuthDir" .) }}
{{- $_ := set $derived "spark.authenticate" "true" }}
{{- $_ := set $derived "spark.network.crypto.enabled" "true" }}
{{- /* The one file key for both sides: an executor fetches the driver's conf before it knows it is an executor, with
the secret of spark.authenticate.secret.file (SecurityManager's default); .driver.file and .executor.file fall back
to it. */}}
{{- $_ := set $derived "spark.authenticate.secret.file" $secretFile }}
{{- end }}
{{- $conf = merge $conf $derived }}
{{- end }}
{{- if not $spark.master }}
{{- $_ := unset $spark "master" }}
{{- end }}
{{- if .Values.httpAuth.enabled }}
{{- $http := deepCopy ($config.http | default dict) }}
{{- $_ := set $http "bearer_token_file" (include "opsd.httpTokenFile" .) }}
{{- $_ := set $config "http" $http }}
{{- end }}
{{- $_ := set $spark "conf" $conf }}
{{- $_ := set $config "spark" $spark }}
{{- toYaml $config }}
{{- end }}

{{/*
opsd.configChecksum: the sha256 of what the ConfigMap holds (the config and, with sparkOnKubernetes, the executors' pod
template), an annotation of the pod template so that a change restarts the driver (opsd reads the files at start).
*/}}
{{- define "opsd.configChecksum" -}}
{{- $template := "" }}
{{- if .Values.sparkOnKubernetes.enabled }}
{{- $template = include "opsd.executorPodTemplate" . }}
{{- end }}
{{- print (include "opsd.config" .) $template | sha256sum }}
{{- end }}

{{/*
opsd.checkovSkips: the checkov checks the chart fails on purpose, each with its reason (checkov reads
`checkov.io/skipN: ID=reason` annotations; tests/test_helm_chart.py scans every scenario and demands a reason).
*/}}
{{- define "opsd.checkovSkips" -}}
checkov.io/skip1: CKV_K8S_11=No CPU limit on purpose - CFS throttling stretches the driver's micro-batches; CPU is requested
checkov.io/skip2: CKV_K8S_15=Images are immutable release tags; image.pullPolicy can be set to Always
checkov.io/skip3: CKV_K8S_40=The image's user is uid 1000 by design (the Dockerfile and the pod security context agree)
checkov.io/skip4: CKV_K8S_43=The image is chosen by image.repository and image.tag; a digest can be given as the tag
{{- if .Values.sparkOnKubernetes.enabled }}
checkov.io/skip5: CKV_K8S_38=Spark on Kubernetes - the driver needs the ServiceAccount token to start executor pods
{{- end }}
{{- if .Values.ytToken.existingSecret }}
checkov.io/skip6: CKV_K8S_35=opsd and ytsaurus-client read the YTsaurus token from the YT_TOKEN environment variable
{{- end }}
{{- end }}
