// Command ping is the Lambda function behind GET /ping and POST /check: it
// counts an attempt and decides it, answering /ping 200, or 429 once the
// key is over its limit, and /check with the decision as data.
package main

import (
	"github.com/ft251/ratelimit/internal/service"
	"github.com/ft251/ratelimit/internal/start"
)

func main() { start.HTTP(false, service.RoutePing, service.RouteCheck) }
