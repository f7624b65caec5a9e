// Pinned build of tests/tools/yamljson (sigs.k8s.io/yaml's YAMLToJSON). Test tool only. See build.sh.
// go.yaml.in/yaml/v2 at v2.4.4: the version k8s.io/apimachinery v0.37.2 builds the API server with (go.mod of
// tests/tools/k8scel), above sigs.k8s.io/yaml's own minimum v2.4.2.
module aiadmit.local/tests/yamljson

go 1.26.0

require sigs.k8s.io/yaml v1.6.0

require go.yaml.in/yaml/v2 v2.4.4 // indirect
