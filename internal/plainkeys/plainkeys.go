// Package plainkeys remembers, for each store in this process, the policy
// that counts on it under plain client keys: a policy without a Namespace,
// whose counters are kept under the client key itself, as the design
// note's layout has them. Two such policies on one store count in one
// counter, each other's requests included. ValidateRules catches them
// within one configuration; a program that builds two (two httpapi.Limit
// calls, a Middleware and a Limiter) on one store is caught here, where
// the second is built, rather than by its clients.
package plainkeys

import (
	"fmt"
	"reflect"
	"sync"
)

var (
	mu sync.Mutex
	// by store: the name of the policy that counts on it without a
	// namespace. A store's entry stays for as long as the process: one
	// string a store, and a store lives as long as its program, mostly.
	claims = map[any]string{}
)

// Claim records that policy counts on store under plain client keys, and
// fails when another policy already does. The same policy again (a second
// route guarded by it) is no conflict. A store whose type cannot be told
// apart by identity (not comparable) is not tracked.
func Claim(store any, policy string) error {
	if store == nil || !reflect.TypeOf(store).Comparable() {
		return nil
	}
	mu.Lock()
	defer mu.Unlock()
	switch had, ok := claims[store]; {
	case !ok:
		claims[store] = policy
	case had != policy:
		return fmt.Errorf("policy %q counts under the client key alone on a store where policy %q already does: their counters would be one; give one of them a Namespace", policy, had)
	}
	return nil
}
