// Command yamljson is a test oracle: Kubernetes' own YAML-to-JSON conversion, sigs.k8s.io/yaml v1.6.0 (over
// go.yaml.in/yaml/v2 v2.4.4), the library kubectl and the API server's YAML path use. A test tool only, never
// part of the product: tests feed it YAML documents and compare its answers with aiadmit's reader.
//
// Input, one JSON object a line on stdin: {"yaml": "..."}. Output, one JSON object a line on stdout:
//
//	{"json": [<every distinct result of YAMLToJSON over `runs` conversions>], "error": "...",
//	 "strictJSON": [...], "strictError": "..."}
//
// Go's map order is random, so a document whose keys collide only after conversion (`1:` and `"1":`) can give
// different results from one conversion to the next: each document is converted `runs` (-runs, default 64)
// times and every distinct result is listed, so a test sees that Kubernetes keeps one of them at random.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"

	"sigs.k8s.io/yaml"
)

type query struct {
	YAML string `json:"yaml"`
}

type answer struct {
	JSON        []json.RawMessage `json:"json"`
	Error       string            `json:"error,omitempty"`
	StrictJSON  []json.RawMessage `json:"strictJSON"`
	StrictError string            `json:"strictError,omitempty"`
}

func convert(convert func([]byte) ([]byte, error), text []byte, runs int) ([]json.RawMessage, string) {
	seen := map[string]bool{}
	for i := 0; i < runs; i++ {
		out, err := convert(text)
		if err != nil {
			return nil, err.Error()
		}
		seen[string(out)] = true
	}
	results := make([]string, 0, len(seen))
	for out := range seen {
		results = append(results, out)
	}
	sort.Strings(results)
	raw := make([]json.RawMessage, len(results))
	for i, out := range results {
		raw[i] = json.RawMessage(out)
	}
	return raw, ""
}

func main() {
	runs := flag.Int("runs", 64, "conversions per document (Go's map order is random)")
	flag.Parse()
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 64<<20)
	out := json.NewEncoder(os.Stdout)
	for in.Scan() {
		var q query
		if err := json.Unmarshal(in.Bytes(), &q); err != nil {
			fmt.Fprintln(os.Stderr, "yamljson: bad query:", err)
			os.Exit(2)
		}
		var a answer
		a.JSON, a.Error = convert(yaml.YAMLToJSON, []byte(q.YAML), *runs)
		a.StrictJSON, a.StrictError = convert(yaml.YAMLToJSONStrict, []byte(q.YAML), *runs)
		if err := out.Encode(a); err != nil {
			fmt.Fprintln(os.Stderr, "yamljson:", err)
			os.Exit(2)
		}
	}
	if err := in.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "yamljson:", err)
		os.Exit(2)
	}
}
