// Command orders is an example to copy: a small API of your own (orders
// to read and to place) guarded by the rate limiter's middleware, with its
// counters in SQLite. It runs as a Lambda function behind API Gateway:
//
//	lambda.Start(awslambda.HTTP(guard(...)))
//
// (see template.yaml beside it), or, outside Lambda, as a plain net/http
// server: go run ./examples/orders, on ADDR (default 127.0.0.1:3001),
// with DB_PATH (default ./data/orders.db).
//
// Its file is pruned (prune.go): every five minutes by the server itself,
// and in Lambda by a scheduled function of its template.
//
// It imports limiter/sqlite, not limiter/dynamodb, so the AWS SDK stays out
// of the function.
package main

import (
	"context"
	"errors"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/awslambda"
	"github.com/ft251/ratelimit/limiter/sqlite"
)

func main() {
	path := getenv("DB_PATH", "./data/orders.db")
	inLambda := os.Getenv("AWS_LAMBDA_RUNTIME_API") != ""
	if !inLambda {
		os.MkdirAll(filepath.Dir(path), 0o755)
	}
	store, err := sqlite.Open(context.Background(), sqlite.Config{Path: path})
	if err != nil {
		log.Fatal(err)
	}
	// A store that is not ready yet (the mount is late, the lock held)
	// answers with the fail mode until it is; one that never will be (a
	// corrupt file) stops the function.
	if err := store.Ready(context.Background()); err != nil && !errors.Is(err, limiter.ErrUnavailable) {
		log.Fatal(err)
	}
	h, err := guard(store)
	if err != nil {
		log.Fatal(err)
	}
	if inLambda {
		// The adapter tells the middleware what API Gateway knows of each
		// request: the caller's address, claims, the request id.
		lambda.Start(awslambda.HTTP(h))
		return
	}
	go pruneLoop(store)
	// Bind before saying so: a client that reads "listening" may connect.
	ln, err := net.Listen("tcp", getenv("ADDR", "127.0.0.1:3001"))
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("listening on http://%s", ln.Addr())
	log.Fatal(http.Serve(ln, h))
}

func getenv(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
