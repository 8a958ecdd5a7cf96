// Command admin is the Lambda function behind /admin/: per-key overrides
// (PUT, GET, DELETE /admin/overrides/{policy}/{key}) and resets (DELETE
// /admin/counters/{policy}/{key}), IAM-authorized, each action logged with
// the principal who asked.
package main

import (
	"github.com/ft251/ratelimit/internal/service"
	"github.com/ft251/ratelimit/internal/start"
)

func main() { start.HTTP(false, service.RouteAdmin) }
