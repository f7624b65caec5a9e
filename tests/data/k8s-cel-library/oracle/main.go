// Command oracle evaluates CEL expressions in Kubernetes' own CEL environment and prints each answer as JSON.
//
// It exists to record what Kubernetes answers (tests/data/k8s-cel-library/cases.yaml), not to be shipped:
// the environment is k8s.io/apiserver's base environment for Kubernetes 1.37, StoredExpressions: what a 1.37 API server runs (the one a
// ValidatingAdmissionPolicy compiles in), extended with the jsonpatch library (MutatingAdmissionPolicy's).
// Input: one JSON string (an expression) per line. Output: one JSON object per line, with `value` as a CEL
// literal (ip("..."), semver("..."), optional.of([...]) for the Kubernetes types), or `error`/`compile_error`.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"k8s.io/apimachinery/pkg/util/version"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/apiserver/pkg/cel/library"
)

type answer struct {
	Expr    string `json:"expr"`
	Compile string `json:"compile_error,omitempty"`
	Error   string `json:"error,omitempty"`
	Type    string `json:"type,omitempty"`
	Value   string `json:"value,omitempty"`
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// literal writes a value as CEL source that evaluates to it.
func literal(v ref.Val) string {
	switch x := v.(type) {
	case types.String:
		return quote(string(x))
	case types.Int:
		return strconv.FormatInt(int64(x), 10)
	case types.Uint:
		return strconv.FormatUint(uint64(x), 10) + "u"
	case types.Double:
		s := strconv.FormatFloat(float64(x), 'g', -1, 64)
		if !strings.ContainsAny(s, ".eEn") {
			s += ".0"
		}
		return s
	case types.Bool:
		return strconv.FormatBool(bool(x))
	case types.Null:
		return "null"
	case types.Bytes:
		return "b" + quote(string(x))
	case types.Duration:
		return "duration(" + quote(strconv.FormatInt(x.Duration.Nanoseconds(), 10)+"ns") + ")"
	case types.Timestamp:
		return "timestamp(" + quote(x.Time.UTC().Format(time.RFC3339Nano)) + ")"
	case apiservercel.IP:
		return "ip(" + quote(x.Addr.String()) + ")"
	case apiservercel.CIDR:
		return "cidr(" + quote(x.Prefix.String()) + ")"
	case apiservercel.Semver:
		return "semver(" + quote(x.Version.String()) + ")"
	case apiservercel.Quantity:
		return "quantity(" + quote(x.Quantity.String()) + ")"
	case apiservercel.URL:
		return "url(" + quote(x.URL.String()) + ")"
	case apiservercel.Format:
		for key, f := range library.ConstantFormats {
			if f.Name == x.Name {
				return "format." + key + "()"
			}
		}
		return "<format " + x.Name + ">"
	case *types.Optional:
		if !x.HasValue() {
			return "optional.none()"
		}
		return "optional.of(" + literal(x.GetValue()) + ")"
	}
	if l, ok := v.(traits.Lister); ok {
		parts := []string{}
		for it := l.Iterator(); it.HasNext() == types.True; {
			parts = append(parts, literal(it.Next()))
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	if m, ok := v.(traits.Mapper); ok {
		parts := []string{}
		for it := m.Iterator(); it.HasNext() == types.True; {
			k := it.Next()
			parts = append(parts, literal(k)+": "+literal(m.Get(k)))
		}
		sort.Strings(parts)
		return "{" + strings.Join(parts, ", ") + "}"
	}
	if t, ok := v.(ref.Type); ok {
		return t.TypeName()
	}
	return fmt.Sprintf("<%s %v>", v.Type().TypeName(), v.Value())
}

func main() {
	base, err := environment.MustBaseEnvSet(version.MajorMinor(1, 37)).Env(environment.StoredExpressions)
	if err != nil {
		panic(err)
	}
	env, err := base.Extend(library.JSONPatch())
	if err != nil {
		panic(err)
	}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	out := json.NewEncoder(os.Stdout)
	for in.Scan() {
		var expr string
		if err := json.Unmarshal(in.Bytes(), &expr); err != nil {
			panic(err)
		}
		a := answer{Expr: expr}
		ast, issues := env.Compile(expr)
		if issues.Err() != nil {
			a.Compile = issues.Err().Error()
		} else if program, err := env.Program(ast); err != nil {
			a.Compile = err.Error()
		} else if v, _, err := program.Eval(map[string]any{}); err != nil {
			a.Error = err.Error()
		} else {
			a.Type, a.Value = v.Type().TypeName(), literal(v)
		}
		if err := out.Encode(a); err != nil {
			panic(err)
		}
	}
}
