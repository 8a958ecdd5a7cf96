package limiter

// FailMode is what a request gets when the store cannot decide it.
type FailMode string

// Fail modes: closed rejects with 503, open lets the request through.
const (
	FailClosed FailMode = "closed"
	FailOpen   FailMode = "open"
)
