//go:build !nodynamodb

package stores

import (
	"context"
	"errors"

	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/dynamodb"
)

func init() {
	kinds[DynamoDB] = store{
		open: func(ctx context.Context, cfg Config) (limiter.Store, error) {
			s, err := dynamodb.Open(ctx, dynamoConfig(cfg))
			if err != nil { // not a nil *dynamodb.Store in a non-nil interface
				return nil, err
			}
			return s, nil
		},
		validate: func(cfg Config) []*FieldError {
			return fieldErrors(dynamoConfig(cfg).Validate(), func(err error) *FieldError {
				if e := (*dynamodb.ConfigError)(nil); errors.As(err, &e) {
					return &FieldError{Field: e.Field, Problem: e.Problem}
				}
				return &FieldError{Field: "Table", Problem: err.Error()}
			})
		},
	}
}

func dynamoConfig(cfg Config) dynamodb.Config {
	return dynamodb.Config{Table: cfg.Table, Endpoint: cfg.Endpoint, BusyTimeout: cfg.BusyTimeout, AuditRetention: cfg.AuditRetention, ReadOnly: cfg.ReadOnly}
}
