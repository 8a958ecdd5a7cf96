// Command prune is the scheduled Lambda function that deletes expired
// counter windows and, with AUDIT_RETENTION set, old audit rows.
package main

import "github.com/ft251/ratelimit/internal/start"

func main() { start.Prune() }
