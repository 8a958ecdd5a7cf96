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
	// by store: the name of the policy that counts on it without a
	// namespace.
	claims = map[weak.Pointer[byte]]string{}
)

// Claim records that policy counts on store under plain client keys, and
// fails when another policy already does. The same policy again (a second
// route guarded by it) is no conflict.
func Claim(store any, policy string) error {
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
	switch had, ok := claims[key]; {
	case !ok:
		claims[key] = policy
	case had != policy:
		return fmt.Errorf("policy %q counts under the client key alone on a store where policy %q already does (a Middleware, Limit or Limiter of this process): their counters would be one; give one of them a Namespace (a renamed policy too: its new name would count in the old one's counters)", policy, had)
	}
	return nil
}
