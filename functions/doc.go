// Package functions holds the Lambda functions, one main package per
// subdirectory (ping, status, admin, prune), each one line naming its
// routes or its job: the start-up they share (the configuration, the store
// opened and checked, the handler handed to Lambda) is internal/start.
//
// The package itself has no code: its tests build each function as Lambda
// gets it (a static linux bootstrap) and run it under the AWS Lambda Runtime
// Interface Emulator, which speaks the real Runtime API to the bootstrap, so
// the events in events/ travel the same path they take in AWS: JSON through
// the runtime client, the API Gateway adapter, the handler, SQLite on disk,
// and back.
package functions
