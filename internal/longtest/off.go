//go:build !longtests

package longtest

// On: built without -tags longtests.
const On = false
