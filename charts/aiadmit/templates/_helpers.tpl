{{/*
Labels of every object: those of the kustomize base (app.kubernetes.io/part-of, the object's own name and
component) plus Helm's standard ones. Selectors use only the base's labels, so that a Deployment installed with
kustomize and one installed with Helm select the same pods.
*/}}
{{- define "aiadmit.labels" -}}
app.kubernetes.io/part-of: aiadmit
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}

{{- define "aiadmit.selector" -}}
app.kubernetes.io/name: aiadmit
app.kubernetes.io/component: webhook
{{- end -}}

{{- define "aiadmit.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{/* The validating webhook fails closed only when enforcing (values.yaml, mode). */}}
{{- define "aiadmit.failurePolicy" -}}
{{- if eq .Values.mode "enforce" -}}Fail{{- else -}}Ignore{{- end -}}
{{- end -}}

{{/*
The config file: .Values.config over apiVersion/kind, with every policy's action set by the mode. The policy ids
and their default actions are read from the bundle the chart carries (files/policies, kept by manifests/sync.py).
*/}}
{{- define "aiadmit.config" -}}
{{- $config := deepCopy (.Values.config | default dict) -}}
{{- $_ := set $config "apiVersion" "aiadmit.dev/v1alpha1" -}}
{{- $_ := set $config "kind" "Config" -}}
{{- if .Values.extraExceptions -}}
{{- $_ := set $config "exceptions" (concat ($config.exceptions | default list) .Values.extraExceptions) -}}
{{- end -}}
{{- if ne .Values.mode "enforce" -}}
{{- $policies := $config.policies | default dict -}}
{{- range $path, $_ := .Files.Glob "files/policies/*.yaml" -}}
{{- $policy := $.Files.Get $path | fromYaml -}}
{{- $action := "audit" -}}
{{- if eq $.Values.mode "warn" -}}
{{- $action = ternary "warn" ($policy.action | default "deny") (eq ($policy.action | default "deny") "deny") -}}
{{- end -}}
{{- $entry := get $policies $policy.metadata.name | default dict -}}
{{- $_ := set $entry "action" $action -}}
{{- $_ := set $policies $policy.metadata.name $entry -}}
{{- end -}}
{{- $_ := set $config "policies" $policies -}}
{{- end -}}
{{- if eq .Values.inTree.mode "beside" -}}
{{- $_ := set $config "inTree" (dict "skipExported" true) -}}
{{- end -}}
{{ toYaml $config }}
{{- end -}}

{{/* Content-hashed ConfigMap names, as kustomize's generator makes them: a change rolls the Deployment. */}}
{{- define "aiadmit.configName" -}}
aiadmit-config-{{ include "aiadmit.config" . | sha256sum | trunc 10 }}
{{- end -}}

{{/* The policy files, one key per file (their base names), as the server reads them from the mounted directory. */}}
{{- define "aiadmit.policiesData" -}}
{{ (.Files.Glob "files/policies/*.yaml").AsConfig }}
{{- end -}}

{{/*
extraPolicies: key -> a policy document (an object, as in a policies/ file; or its YAML text). The file is
<key>.yaml. A key or policy id of the built-in bundle stops the rendering here, with the name, rather than at the
server's load (where the rollout would stall on replicas that never become ready).
*/}}
{{- define "aiadmit.extraPoliciesData" -}}
{{- $builtin := dict -}}
{{- range $path, $_ := .Files.Glob "files/policies/*.yaml" -}}
{{- $_ := set $builtin (($.Files.Get $path | fromYaml).metadata.name) (base $path) -}}
{{- end -}}
{{- $data := dict -}}
{{- range $key, $policy := .Values.extraPolicies -}}
{{- $document := $policy -}}
{{- if kindIs "string" $policy -}}{{- $document = fromYaml $policy -}}{{- end -}}
{{- $id := (($document | default dict).metadata | default dict).name | default "" -}}
{{- if hasKey $builtin $id -}}
{{- fail (printf "extraPolicies.%s: policy id %q is a built-in policy (%s); configure it under config.policies instead, or give yours another name" $key $id (get $builtin $id)) -}}
{{- end -}}
{{- $_ := set $data (printf "%s.yaml" $key) (ternary $policy (toYaml $policy) (kindIs "string" $policy)) -}}
{{- end -}}
{{- toYaml $data -}}
{{- end -}}

{{- define "aiadmit.extraPoliciesName" -}}
aiadmit-extra-policies-{{ include "aiadmit.extraPoliciesData" . | sha256sum | trunc 10 }}
{{- end -}}

{{- define "aiadmit.policiesName" -}}
aiadmit-policies-{{ include "aiadmit.policiesData" . | sha256sum | trunc 10 }}
{{- end -}}

{{/* Both webhook configurations exclude the release namespace and the control plane's (base/webhooks.yaml). */}}
{{- define "aiadmit.namespaceSelector" -}}
namespaceSelector:
  matchExpressions:
    - key: kubernetes.io/metadata.name
      operator: NotIn
      values: [{{ .Release.Namespace }}, kube-system, kube-public, kube-node-lease]
{{- end -}}

{{/* Called with (dict "root" $ "path" "/validate"). */}}
{{- define "aiadmit.clientConfig" -}}
clientConfig:
  {{- if eq .root.Values.certificates.source "secret" }}
  caBundle: {{ required "certificates.caBundle is required with certificates.source=secret: the base64 PEM of the CA that signed the Secret's tls.crt (base64 -w0 ca.crt); without it every call to the webhook fails TLS" .root.Values.certificates.caBundle }}
  {{- end }}
  service:
    name: aiadmit
    namespace: {{ .root.Release.Namespace }}
    path: {{ .path }}
    port: 443
{{- end -}}
