//go:build longtests

package longtest

// On: built with -tags longtests.
const On = true
