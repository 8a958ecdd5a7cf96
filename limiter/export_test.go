package limiter

// What the package keeps to itself, for its tests.
const (
	MaxPolicies = maxPolicies
	MaxBurst    = maxBurst
	MaxKeyBytes = maxKeyBytes
)

var ValidatePolicies = validatePolicies
