// Package namespaces remembers, for each store in this process, the policy
// that counts in each of its namespaces: a policy's counters are kept
// under its Namespace and the client key, and a policy without one under
// the client key itself, as the design note's layout has them. Two
// policies in one namespace of one store count in one counter, each
// other's requests included. ValidateRules catches them within one
// configuration; a program that builds two (two httpapi.Limit calls, a
// Middleware and a Limiter) on one store is caught here, where the second
// is built, rather than by its clients.
//
// A store is told by its identity, so only a store that is a pointer (as
// this module's are) is tracked, and it is held weakly: a store nothing
// else holds is collected, and its entries with it.
package namespaces

import (
	"fmt"
	"reflect"
	"sync"
	"weak"
)

var (
	mu sync.Mutex
	// by store and namespace: the policy that counts there.
	claims = map[place]claim{}
)

type place struct {
	store     weak.Pointer[byte]
	namespace string
}

// A claim is a policy's name and its settings, as %+v writes them (the
// settings say whether a policy of the same name is the same policy).
type claim struct{ name, settings string }

// Claim records that policy, named name, counts on store in namespace,
// and fails when another policy already does: one of another name, or of
// the same name with other settings (another limit, window, algorithm,
// burst or tiers, counting in the same counters; callers leave out what
// does not change the counting, such as whether the policy is a shadow). The same policy again (a second route
// guarded by it) is no conflict. policy is compared as %+v writes it: an
// algorithm by its String, no tiers and an empty map alike.
func Claim(store any, namespace, name string, policy any) error {
	v := reflect.ValueOf(store)
	if store == nil || v.Kind() != reflect.Pointer || v.IsNil() || v.Type().Elem().Size() == 0 {
		return nil // not told apart by identity (zero-size values may share an address)
	}
	at := place{weak.Make((*byte)(v.UnsafePointer())), namespace}
	mu.Lock()
	defer mu.Unlock()
	for k := range claims {
		if k.store.Value() == nil {
			delete(claims, k) // its store was collected
		}
	}
	c := claim{name, fmt.Sprintf("%+v", policy)}
	had, ok := claims[at]
	switch {
	case !ok:
		claims[at] = c
		return nil
	case had == c:
		return nil
	}
	where := fmt.Sprintf("in namespace %q", namespace)
	if namespace == "" {
		where = "under the client key alone"
	}
	if had.name != name {
		return fmt.Errorf("policy %q counts %s on a store where policy %q already does (a Middleware, Limit or Limiter of this process): their counters would be one; give one of them a Namespace of its own (a renamed policy too: its new name would count in the old one's counters)", name, where, had.name)
	}
	return fmt.Errorf("policy %q counts %s on a store where another policy %q already does (a Middleware, Limit or Limiter of this process), %s against %s: their counters would be one; give one of them a Namespace of its own", name, where, had.name, c.settings, had.settings)
}
