{{/* Names: <release>-infergate, or the release name when it already says infergate. */}}
{{- define "infergate.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" -}}
{{- else if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 52 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "infergate.webhookName" -}}{{ include "infergate.fullname" . }}{{- end -}}
{{- define "infergate.controllerName" -}}{{ include "infergate.fullname" . }}-controller{{- end -}}
{{- define "infergate.tlsSecretName" -}}{{ include "infergate.fullname" . }}-tls{{- end -}}
{{- define "infergate.serviceRef" -}}{{ .Release.Namespace }}/{{ include "infergate.fullname" . }}{{- end -}}

{{- define "infergate.image" -}}
{{- $tag := .Values.image.tag | default .Chart.AppVersion -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository $tag -}}
{{- end -}}
{{- end -}}

{{- define "infergate.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: infergate
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Selector labels of one component (webhook, controller). */}}
{{- define "infergate.selectorLabels" -}}
app.kubernetes.io/name: infergate
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* The restricted container securityContext (Pod Security Standards "restricted"). */}}
{{- define "infergate.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: [ALL]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* Every CRD the webhook serves: infergate's own (crds/), the current upstream ones and the
     earlier versions still served (files/crds/; webhook/schema/bundled.py webhook_kinds reads the
     same files). Not files/crds/upstream/schema-only/: kinds `infergate validate` knows offline
     that no policy applies to (Gateway, GatewayClass, GRPCRoute, ReferenceGrant), so the webhook
     stays off their write path. */}}
{{- define "infergate.servedCRDFiles" -}}
{{- $paths := list -}}
{{- range $path, $_ := .Files.Glob "{crds,files/crds/upstream,files/crds/legacy}/*.yaml" -}}
{{- $paths = append $paths $path -}}
{{- end -}}
{{- toJson ($paths | sortAlpha) -}}
{{- end -}}

{{/* metadata.name of every served CRD (both KubeAI Model CRDs are models.kubeai.org): the CRDs
     the webhook watches, by name, with --kube-state. */}}
{{- define "infergate.servedCRDNames" -}}
{{- $names := list -}}
{{- range $path := include "infergate.servedCRDFiles" . | fromJsonArray -}}
{{- $crd := $.Files.Get $path | fromYaml -}}
{{- $names = append $names (printf "%s.%s" $crd.spec.names.plural $crd.spec.group) -}}
{{- end -}}
{{- toJson ($names | uniq | sortAlpha) -}}
{{- end -}}

{{/*
Webhook rules, generated from the served CRDs exactly as `infergate webhook-config` does
(webhook/webhook_config.py): one rule per served group/version, its resources sorted, never a
subresource (status writes belong to the controller). Whether or not the chart installs a
kind's CRD: a rule for a kind the cluster does not serve matches nothing.
*/}}
{{- define "infergate.webhookRules" -}}
{{- $byGroupVersion := dict -}}
{{- range $path := include "infergate.servedCRDFiles" .root | fromJsonArray -}}
{{- $crd := $.root.Files.Get $path | fromYaml -}}
{{- range $crd.spec.versions -}}
{{- if .served -}}
{{- $key := printf "%s %s" $crd.spec.group .name -}}
{{- $_ := set $byGroupVersion $key (append (get $byGroupVersion $key | default list) $crd.spec.names.plural | uniq) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- range $key := keys $byGroupVersion | sortAlpha }}
- apiGroups: [{{ splitList " " $key | first | quote }}]
  apiVersions: [{{ splitList " " $key | last | quote }}]
  operations: [CREATE, UPDATE]
  resources: {{ get $byGroupVersion $key | sortAlpha | toJson }}
  scope: "*"
{{- end -}}
{{- end -}}

{{/* One webhook of a Mutating/ValidatingWebhookConfiguration (.endpoint: mutate | validate). */}}
{{- define "infergate.webhook" -}}
- name: {{ .endpoint }}.infergate.io
  admissionReviewVersions: [v1]
  clientConfig:
    service:
      namespace: {{ .root.Release.Namespace }}
      name: {{ include "infergate.fullname" .root }}
      path: /{{ .endpoint }}
      port: {{ .root.Values.service.port }}
  rules:
    {{- include "infergate.webhookRules" . | trim | nindent 4 }}
  failurePolicy: {{ .root.Values.webhook.failurePolicy }}
  matchPolicy: Equivalent
  sideEffects: None
  timeoutSeconds: {{ .root.Values.webhook.timeoutSeconds }}
  # Never the webhook's own namespace nor kube-system: a broken webhook must not lock out
  # the namespace it would be repaired from.
  namespaceSelector:
    matchExpressions:
    - key: kubernetes.io/metadata.name
      operator: NotIn
      values: {{ include "infergate.exemptNamespaces" .root }}
  # Objects being deleted (an UPDATE removing a finalizer) are never judged.
  matchConditions:
  - name: not-being-deleted
    expression: "request.operation != 'UPDATE' || !has(object.metadata.deletionTimestamp)"
  # Of Gateway API's HTTPRoutes, only those with a backendRef to an InferencePool: an outage
  # never blocks the writes of routes that have nothing to do with inference.
  - name: inference-routes-only
    expression: "request.resource.group != 'gateway.networking.k8s.io' || (has(object.spec) && has(object.spec.rules) && object.spec.rules.exists(r, has(r.backendRefs) && r.backendRefs.exists(b, has(b.kind) && b.kind == 'InferencePool')))"
  {{- if eq .endpoint "mutate" }}
  reinvocationPolicy: IfNeeded
  {{- end }}
{{- end -}}

{{/* ConfigMap key of a shipped policy file: its path below policies/, "/" as "__". */}}
{{- define "infergate.policyKey" -}}
{{- trimPrefix "files/policies/" . | replace "/" "__" -}}
{{- end -}}

{{/* The shipped policy files (JSON list of chart paths): everything under policies/ but the
     policy test suites in policies/tests/ (they are for `infergate test`, not for the webhook). */}}
{{- define "infergate.shippedPolicies" -}}
{{- $paths := list -}}
{{- range $path, $_ := .Files.Glob "files/policies/**.{yaml,yml}" -}}
{{- if not (hasPrefix "files/policies/tests/" $path) -}}
{{- $paths = append $paths $path -}}
{{- end -}}
{{- end -}}
{{- toJson $paths -}}
{{- end -}}

{{/* The policies volume, the same for the webhook and the controller's audit: the shipped
     policies under shipped/, yours under user/ and (an existing ConfigMap) at the top; a
     projected volume follows ConfigMap changes: policies reload without restarts. */}}
{{- define "infergate.policiesVolume" -}}
- name: policies
  projected:
    sources:
    - configMap:
        name: {{ include "infergate.fullname" . }}-policies
        {{- with include "infergate.shippedPolicies" . | fromJsonArray }}
        items:
        {{- range $path := . }}
        - key: {{ include "infergate.policyKey" $path }}
          path: shipped/{{ trimPrefix "files/policies/" $path }}
        {{- end }}
        {{- end }}
    {{- if .Values.policies.user }}
    - configMap:
        name: {{ include "infergate.fullname" . }}-user-policies
        items:
        {{- range $name, $_ := .Values.policies.user }}
        - key: {{ $name }}
          path: user/{{ $name }}
        {{- end }}
    {{- end }}
    {{- with .Values.policies.existingConfigMap }}
    - configMap:
        name: {{ . }}
    {{- end }}
{{- end -}}

{{/* The namespaces the webhook never judges (its namespaceSelector), as a JSON list: the
     controller's audit still audits them and marks their reports exempt. */}}
{{- define "infergate.exemptNamespaces" -}}
{{- list "kube-system" .Release.Namespace | uniq | sortAlpha | toJson -}}
{{- end -}}
