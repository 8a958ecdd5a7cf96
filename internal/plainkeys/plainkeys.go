// Package plainkeys remembers, for each store in this process, the policy
// that counts on it under plain client keys: a policy without a Namespace,
// whose counters are kept under the client key itself, as the design
// note's layout has them. Two such policies on one store count in one
// counter, each other's requests included. ValidateRules catches them
// within one configuration; a program that builds two (two httpapi.Limit
// calls, a Middleware and a Limiter) on one store is caught here, where
// the second is built, rather than by its clients.
//
// A store is told by its identity, so only a store that is a pointer (as
// this module's are) is tracked, and it is held weakly: a store nothing
// else holds is collected, and its entry with it.
package plainkeys

import (
	"fmt"
	"reflect"
	"sync"
	"weak"
)

var (
	mu sync.Mutex
	// by store: the policy that counts on it without a namespace.
	claims = map[weak.Pointer[byte]]claim{}
)

// A claim is a policy's name and its settings, as %+v writes them (the
// settings say whether a policy of the same name is the same policy).
type claim struct{ name, settings string }

// Claim records that policy, named name, counts on store under plain
// client keys, and fails when another policy already does: one of another
// name, or of the same name with other settings (another limit, window or
// algorithm, counting in the same counters). The same policy again (a
// second route guarded by it) is no conflict. policy is compared as %+v
// writes it: an algorithm by its String, no tiers and an empty map alike.
func Claim(store any, name string, policy any) error {
	v := reflect.ValueOf(store)
	if store == nil || v.Kind() != reflect.Pointer || v.IsNil() || v.Type().Elem().Size() == 0 {
		return nil // not told apart by identity (zero-size values may share an address)
	}
	key := weak.Make((*byte)(v.UnsafePointer()))
	mu.Lock()
	defer mu.Unlock()
	for k := range claims {
		if k.Value() == nil {
			delete(claims, k) // its store was collected
		}
	}
	c := claim{name, fmt.Sprintf("%+v", policy)}
	switch had, ok := claims[key]; {
	case !ok:
		claims[key] = c
	case had.name != name:
		return fmt.Errorf("policy %q counts under the client key alone on a store where policy %q already does (a Middleware, Limit or Limiter of this process): their counters would be one; give one of them a Namespace (a renamed policy too: its new name would count in the old one's counters)", name, had.name)
	case had.settings != c.settings:
		return fmt.Errorf("policy %q counts under the client key alone on a store where another policy %q already does (a Middleware, Limit or Limiter of this process), %s against %s: their counters would be one; give one of them a Namespace", name, had.name, c.settings, had.settings)
	}
	return nil
}
