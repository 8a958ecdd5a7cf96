// Command status is the Lambda function behind GET /status?key=: it reads a
// key's counters and never counts anything, on a read-only mount.
package main

import (
	"github.com/ft251/ratelimit/internal/service"
	"github.com/ft251/ratelimit/internal/start"
)

func main() { start.HTTP(true, service.RouteStatus) }
