// Package functions holds the Lambda functions, one main package per
// subdirectory (ping, status, admin, prune), each one line over
// internal/start, which reads the configuration from the environment
// (internal/envconfig), opens the store (internal/stores) and hands the
// service's handler (internal/service, or limiter/awslambda's Prune) to
// Lambda.
//
// The package itself has no code: its tests build each function as Lambda
// gets it (a static linux bootstrap) and run it under the AWS Lambda Runtime
// Interface Emulator, which speaks the real Runtime API to the bootstrap, so
// the events in events/ travel the same path they take in AWS: JSON through
// the runtime client, the API Gateway adapter, the handler, SQLite on disk,
// and back. They also run the commands of the README and docs/
// (docs_test.go), the check of the deploy without AWS among them.
package functions
