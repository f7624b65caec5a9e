// Command k8scel is a test oracle: Kubernetes' own CEL, as the API server v1.37 (k8s.io/apiserver v0.37.2, cel-go
// v0.29.2) builds it for a ValidatingAdmissionPolicy (k8s.io/apiserver/pkg/cel/environment.MustBaseEnvSet, extended
// with the VAP variables the way k8s.io/apiserver/pkg/admission/plugin/cel builds its environments). It is a test
// tool only, never part of the product: tests feed it JSON lines and compare its answers with aiadmit's.
//
// Kubernetes' compatibility-version gating, per query or per process: "compatibility" is the version whose
// environment compiles the expression ("1.34" to "1.37"; an API server's default is one minor below its own,
// so a 1.37 server validates new expressions in 1.36's environment), "environment" is "new" (the NewExpressions
// environment at that compatibility version: what the API server accepts in a create or a changed expression) or
// "stored" (StoredExpressions: every library the binary has, what it compiles an expression already in etcd with,
// and how it runs every policy). The process defaults are the flags -compatibility (1.36) and -environment (new):
// a 1.37 API server with its default flags, creating a ValidatingAdmissionPolicy.
//
// Input, one JSON object a line on stdin:
//
//	{"expr": "...", "vars": {"object": {...}, ...}, "dynVars": ["workload", "container"], "eval": true,
//	 "compatibility": "1.36", "environment": "new"}
//
// Output, one JSON object a line on stdout:
//
//	{"compiled": bool, "error": "...", "outputType": "...", "value": <json>, "evalError": "...",
//	 "cost": <estimated max cost>, "minCost": <estimated min cost>, "actualCost": <run-time cost>,
//	 "env": "NewExpressions@1.36" or "StoredExpressions"}
//
// A VAP has no static cost check of its own (its variables are dyn); "cost" is cel-go's estimate with Kubernetes'
// CostEstimator, where a value read from a variable is bounded by the API server's request size limit
// (celconfig.MaxRequestSizeBytes): a string that many characters, a list or map that many bytes over 2 (the
// smallest JSON item with its comma). The run time applies Kubernetes' per-call limit (celconfig.PerCallLimit).
//
// Values are written so that nothing is lost: a double always has a '.' or an exponent, or is
// {"double": "NaN"|"+Inf"|"-Inf"}; uint {"uint": n}; bytes {"bytes": base64}; a map with a non-string key
// {"map": [[k, v], ...]}; an optional {"optional": v} or {"optional": null, "none": true}; a type {"type": name};
// any other value (url, ip, cidr, semver, ...) {"@type": name, "string": text}, with "string" RFC 3339 for a
// timestamp, "nanos" for a duration, "float" (its approximate value) for a quantity.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/version"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/apiserver/pkg/cel/library"
)

type request struct {
	Expr    string                     `json:"expr"`
	Vars    map[string]json.RawMessage `json:"vars"`
	DynVars []string                   `json:"dynVars"`
	Eval    *bool                      `json:"eval"`
	// Compatibility and Environment select Kubernetes' gating (defaults: the flags).
	Compatibility string `json:"compatibility"`
	Environment   string `json:"environment"`
}

type response struct {
	Compiled   bool            `json:"compiled"`
	Error      string          `json:"error,omitempty"`
	OutputType string          `json:"outputType,omitempty"`
	Value      json.RawMessage `json:"value,omitempty"`
	EvalError  string          `json:"evalError,omitempty"`
	Cost       *uint64         `json:"cost,omitempty"`
	MinCost    *uint64         `json:"minCost,omitempty"`
	ActualCost *uint64         `json:"actualCost,omitempty"`
	Env        string          `json:"env,omitempty"`
}

var (
	defaultCompatibility = flag.String("compatibility", "1.36",
		"compatibility version of the environment (1.37 API server default: 1.36)")
	defaultEnvironment = flag.String("environment", "new", "new (NewExpressions) or stored (StoredExpressions)")
)

var envs = map[string]*cel.Env{}

// envType reads "new" or "stored".
func envType(name string) (environment.Type, error) {
	switch name {
	case "new", "":
		return environment.NewExpressions, nil
	case "stored":
		return environment.StoredExpressions, nil
	}
	return "", fmt.Errorf("environment %q: want new or stored", name)
}

// vapEnv is the environment of a ValidatingAdmissionPolicy validation (params and authorizer declared, strict cost)
// at compatibility version compat, of type kind, plus `variables` and each name of extra as dyn.
func vapEnv(compat *version.Version, kind environment.Type, extra []string) (*cel.Env, error) {
	names := append([]string(nil), extra...)
	sort.Strings(names)
	key := compat.String() + "/" + string(kind) + "/" + strings.Join(names, ",")
	if env, ok := envs[key]; ok {
		return env, nil
	}
	requestType := plugincel.BuildRequestType()
	namespaceType := plugincel.BuildNamespaceType()
	opts := []cel.EnvOption{
		cel.Variable(plugincel.ObjectVarName, cel.DynType),
		cel.Variable(plugincel.OldObjectVarName, cel.DynType),
		cel.Variable(plugincel.NamespaceVarName, namespaceType.CelType()),
		cel.Variable(plugincel.RequestVarName, requestType.CelType()),
		cel.Variable(plugincel.ParamsVarName, cel.DynType),
		cel.Variable(plugincel.AuthorizerVarName, library.AuthorizerType),
		cel.Variable(plugincel.RequestResourceAuthorizerVarName, library.ResourceCheckType),
		cel.Variable("variables", cel.DynType),
	}
	for _, name := range names {
		opts = append(opts, cel.Variable(name, cel.DynType))
	}
	set, err := environment.MustBaseEnvSet(compat).Extend(
		environment.VersionedOptions{
			IntroducedVersion: version.MajorMinor(1, 0),
			EnvOptions:        opts,
			DeclTypes:         []*apiservercel.DeclType{namespaceType, requestType},
		},
		environment.StrictCostOpt,
	)
	if err != nil {
		return nil, err
	}
	env, err := set.Env(kind)
	if err != nil {
		return nil, err
	}
	envs[key] = env
	return env, nil
}

// sizes bounds every value read from a variable by the API server's request size limit.
type sizes struct{}

func (sizes) EstimateSize(node checker.AstNode) *checker.SizeEstimate {
	if node.Path() == nil {
		return nil
	}
	limit := uint64(celconfig.MaxRequestSizeBytes)
	switch node.Type().Kind() {
	case types.ListKind, types.MapKind:
		limit /= 2
	}
	return &checker.SizeEstimate{Min: 0, Max: limit}
}

func (sizes) EstimateCallCost(string, string, *checker.AstNode, []checker.AstNode) *checker.CallEstimate {
	return nil
}

// native keeps JSON integers int64 and the rest float64, as Kubernetes' JSON decoding of an object does.
func native(v any) any {
	switch t := v.(type) {
	case json.Number:
		if i, err := strconv.ParseInt(string(t), 10, 64); err == nil {
			return i
		}
		f, _ := strconv.ParseFloat(string(t), 64)
		return f
	case map[string]any:
		for k, x := range t {
			t[k] = native(x)
		}
	case []any:
		for i, x := range t {
			t[i] = native(x)
		}
	}
	return v
}

func encode(buf *bytes.Buffer, v ref.Val) error {
	put := func(x any) { b, _ := json.Marshal(x); buf.Write(b) }
	switch v.Type() {
	case types.NullType:
		buf.WriteString("null")
	case types.BoolType, types.IntType, types.StringType:
		put(v.Value())
	case types.UintType:
		put(map[string]any{"uint": v.Value()})
	case types.DoubleType:
		f := v.Value().(float64)
		switch {
		case math.IsNaN(f):
			put(map[string]string{"double": "NaN"})
		case math.IsInf(f, 1):
			put(map[string]string{"double": "+Inf"})
		case math.IsInf(f, -1):
			put(map[string]string{"double": "-Inf"})
		default:
			s := strconv.FormatFloat(f, 'g', -1, 64)
			if !strings.ContainsAny(s, ".e") {
				s += ".0"
			}
			buf.WriteString(s)
		}
	case types.BytesType:
		put(map[string]string{"bytes": base64.StdEncoding.EncodeToString(v.Value().([]byte))})
	case types.TypeType:
		put(map[string]string{"type": v.(ref.Type).TypeName()})
	case types.OptionalType:
		opt := v.(*types.Optional)
		if !opt.HasValue() {
			buf.WriteString(`{"optional":null,"none":true}`)
			return nil
		}
		buf.WriteString(`{"optional":`)
		if err := encode(buf, opt.GetValue()); err != nil {
			return err
		}
		buf.WriteString("}")
	default:
		if list, ok := v.(traits.Lister); ok {
			buf.WriteString("[")
			for i := int64(0); i < int64(list.Size().(types.Int)); i++ {
				if i > 0 {
					buf.WriteString(",")
				}
				if err := encode(buf, list.Get(types.Int(i))); err != nil {
					return err
				}
			}
			buf.WriteString("]")
			return nil
		}
		if m, ok := v.(traits.Mapper); ok {
			return encodeMap(buf, m)
		}
		shown := map[string]any{"@type": v.Type().TypeName(), "string": fmt.Sprint(v.Value())}
		switch x := v.Value().(type) {
		case time.Time:
			shown["string"] = x.UTC().Format(time.RFC3339Nano)
		case time.Duration:
			shown["nanos"] = int64(x)
		case *resource.Quantity:
			shown["float"] = x.AsApproximateFloat64()
		}
		put(shown)
	}
	return nil
}

func encodeMap(buf *bytes.Buffer, m traits.Mapper) error {
	var keys []ref.Val
	stringKeys := true
	for it := m.Iterator(); it.HasNext() == types.True; {
		k := it.Next()
		keys = append(keys, k)
		stringKeys = stringKeys && k.Type() == types.StringType
	}
	if stringKeys {
		buf.WriteString("{")
	} else {
		buf.WriteString(`{"map":[`)
	}
	for i, k := range keys {
		if i > 0 {
			buf.WriteString(",")
		}
		if !stringKeys {
			buf.WriteString("[")
		}
		if err := encode(buf, k); err != nil {
			return err
		}
		if stringKeys {
			buf.WriteString(":")
		} else {
			buf.WriteString(",")
		}
		if err := encode(buf, m.Get(k)); err != nil {
			return err
		}
		if !stringKeys {
			buf.WriteString("]")
		}
	}
	if stringKeys {
		buf.WriteString("}")
	} else {
		buf.WriteString("]}")
	}
	return nil
}

func answer(req request) response {
	var out response
	compatText, kindText := req.Compatibility, req.Environment
	if compatText == "" {
		compatText = *defaultCompatibility
	}
	if kindText == "" {
		kindText = *defaultEnvironment
	}
	compat, err := version.ParseMajorMinor(compatText)
	if err != nil {
		out.Error = "environment: compatibility: " + err.Error()
		return out
	}
	kind, err := envType(kindText)
	if err != nil {
		out.Error = "environment: " + err.Error()
		return out
	}
	out.Env = string(kind) + "@" + compat.String()
	if kind == environment.StoredExpressions {
		out.Env = string(kind) // every library of the binary, whatever the compatibility version
	}
	env, err := vapEnv(compat, kind, req.DynVars)
	if err != nil {
		out.Error = "environment: " + err.Error()
		return out
	}
	ast, issues := env.Compile(req.Expr)
	if issues != nil && issues.Err() != nil {
		out.Error = issues.String()
		return out
	}
	out.Compiled = true
	out.OutputType = ast.OutputType().String()
	if est, err := env.EstimateCost(ast, &library.CostEstimator{SizeEstimator: sizes{}}); err == nil {
		out.Cost, out.MinCost = &est.Max, &est.Min
	} else {
		out.Error = "cost estimate: " + err.Error()
	}
	if req.Eval != nil && !*req.Eval {
		return out
	}
	prog, err := env.Program(ast, cel.InterruptCheckFrequency(celconfig.CheckFrequency))
	if err != nil {
		out.EvalError = "program: " + err.Error()
		return out
	}
	activation := map[string]any{}
	for name, raw := range req.Vars {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			out.EvalError = "variable " + name + ": " + err.Error()
			return out
		}
		activation[name] = native(v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	val, details, err := prog.ContextEval(ctx, activation)
	if details != nil {
		out.ActualCost = details.ActualCost()
	}
	if err != nil {
		out.EvalError = err.Error()
		return out
	}
	var buf bytes.Buffer
	if err := encode(&buf, val); err != nil {
		out.EvalError = "encode: " + err.Error()
		return out
	}
	out.Value = buf.Bytes()
	return out
}

func main() {
	flag.Parse()
	if _, err := version.ParseMajorMinor(*defaultCompatibility); err != nil {
		fmt.Fprintln(os.Stderr, "k8scel: -compatibility:", err)
		os.Exit(2)
	}
	if _, err := envType(*defaultEnvironment); err != nil {
		fmt.Fprintln(os.Stderr, "k8scel: -environment:", err)
		os.Exit(2)
	}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 64<<20)
	w := bufio.NewWriter(os.Stdout)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for in.Scan() {
		var req request
		var out response
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			out.Error = "bad request: " + err.Error()
		} else {
			func() {
				defer func() {
					if r := recover(); r != nil {
						out = response{Compiled: out.Compiled, EvalError: fmt.Sprintf("panic: %v", r)}
					}
				}()
				out = answer(req)
			}()
		}
		if err := enc.Encode(out); err != nil {
			fmt.Fprintln(os.Stderr, "k8scel:", err)
			os.Exit(1)
		}
		w.Flush()
	}
	if err := in.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "k8scel:", err)
		os.Exit(1)
	}
}
