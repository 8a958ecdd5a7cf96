// Fuzz it for real with:
//
//	go test -fuzz=FuzzPolicies -fuzztime=100000x ./internal/envconfig/

package envconfig_test

import (
	"testing"

	"github.com/ft251/ratelimit/internal/envconfig"
)

// FuzzPolicies feeds POLICIES values to the configuration: it never
// panics, and what it accepts the limiter can run: every policy valid,
// names unique, the one named ping (and only it) keeping bare keys, and
// every other policy's counters apart from every other's.
func FuzzPolicies(f *testing.F) {
	for _, seed := range []string{
		`[{"name":"ping","limit":3,"window":"60s"}]`,
		`[{"name":"ping","limit":100,"window":"60s"},{"name":"burst","limit":5,"window":"1s","algorithm":"sliding"},{"name":"daily","limit":10000,"window":"1d","key":"source-ip","shadow":true}]`,
		`[{"name":"q","limit":1,"window":"30d","key":"claim:sub","routes":["/ping"]}]`,
		`[{"name":"api","limit":100,"window":"60s","algorithm":"gcra","tiers":{"pro":{"limit":1000,"burst":200},"enterprise":{"limit":10000}},"tier":{"source":"claim","claim":"plan"}}]`,
		`[{"name":"a","limit":"3"}]`, `[]`, `{}`, `[[]]`, `[{"name":"a","limit":1,"window":"1s"}] x`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, v string) {
		c, err := envconfig.Read(func(k string) string {
			return map[string]string{"DB_PATH": "x", "POLICIES": v}[k]
		}, envconfig.Lambda)
		if err != nil {
			return
		}
		names := map[string]bool{}
		namespaces := map[string]bool{}
		for _, r := range c.Rules {
			p := r.Policy
			if err := p.Validate(); err != nil {
				t.Fatalf("POLICIES=%q accepted an invalid policy: %v", v, err)
			}
			if names[p.Name] {
				t.Fatalf("POLICIES=%q accepted %q twice", v, p.Name)
			}
			names[p.Name] = true
			if (p.Name == envconfig.DefaultPolicyName) != (p.Namespace == "") || namespaces[p.Namespace] {
				t.Fatalf("POLICIES=%q: policy %q has namespace %q, shared or wrong", v, p.Name, p.Namespace)
			}
			namespaces[p.Namespace] = true
			if len(r.Routes) == 0 {
				t.Fatalf("POLICIES=%q: policy %q limits no route", v, p.Name)
			}
		}
	})
}
