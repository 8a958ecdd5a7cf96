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
// A policy is told by its name: the same name at another limit or window
// is the same policy, as a configuration reloaded in a running process
// builds it, its counts so far kept. (Telling policies by their settings
// refused every such reload for as long as the store lived.)
//
// A store is told by its identity, so only a store that is a pointer (as
// this module's are) is tracked, and it is held weakly: a store nothing
// else holds is collected, and its entries with it.
package namespaces

import (
	"errors"
	"fmt"
	"reflect"
	"sync"
	"weak"
)

var (
	mu sync.Mutex
	// by store and namespace: the name of the policy that counts there.
	claims = map[place]string{}
)

type place struct {
	store     weak.Pointer[byte]
	namespace string
}

// A Use is a policy's name and namespace.
type Use struct{ Namespace, Name string }

// Claim records that each of uses counts on store, or none of them: it
// fails, claiming nothing, when another policy already counts in one of
// their namespaces there, naming every such conflict. The same policy
// again (a second route guarded by it) is no conflict.
func Claim(store any, uses ...Use) error {
	v := reflect.ValueOf(store)
	if store == nil || v.Kind() != reflect.Pointer || v.IsNil() || v.Type().Elem().Size() == 0 {
		return nil // not told apart by identity (zero-size values may share an address)
	}
	key := weak.Make((*byte)(v.UnsafePointer()))
	mu.Lock()
	defer mu.Unlock()
	for k := range claims {
		if k.store.Value() == nil {
			delete(claims, k) // its store was collected
		}
	}
	var errs []error
	for _, u := range uses {
		if had, ok := claims[place{key, u.Namespace}]; ok && had != u.Name {
			where := fmt.Sprintf("in namespace %q", u.Namespace)
			if u.Namespace == "" {
				where = "under the client key alone"
			}
			errs = append(errs, fmt.Errorf("policy %q counts %s on a store where policy %q already does (a Middleware, Limit or Limiter of this process): their counters would be one; give one of them a Namespace of its own (a renamed policy too: its new name would count in the old one's counters)", u.Name, where, had))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	for _, u := range uses {
		claims[place{key, u.Namespace}] = u.Name
	}
	return nil
}
