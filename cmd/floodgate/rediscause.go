package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/floodgate/floodgate/redisstore"
	"github.com/redis/go-redis/v9"
)

// redisCause keeps the last of go-redis's own messages, which check,
// filter and simulate route through slog as serve does (redisstore.Logger)
// but do not print: go-redis logs why it could not connect (connection
// refused) while the store reports only that Redis did not answer in
// time. withRedisCause puts that reason into the command's error.
var redisCause causeHandler

// routeRedisLog sends go-redis's messages to redisCause.
func routeRedisLog() { redis.SetLogger(redisstore.Logger(slog.New(&redisCause))) }

// withRedisCause returns err, an error that ends a command, led by the
// reason go-redis last gave when err is Redis not answering.
func withRedisCause(err error) error {
	cause := redisCause.take()
	if cause == "" || !errors.Is(err, redisstore.ErrUnavailable) {
		return err
	}
	return fmt.Errorf("cannot reach Redis: %s (%w)", cause, err)
}

// causeHandler is a slog.Handler that keeps the message of the last
// record. It is safe for concurrent use.
type causeHandler struct {
	mu   sync.Mutex
	last string
}

func (h *causeHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *causeHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *causeHandler) WithGroup(string) slog.Handler            { return h }

func (h *causeHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.last = r.Message
	return nil
}

// take returns the reason of the last message, and forgets it: from
// "dial" on when the message has it ("dial tcp 127.0.0.1:1: connect:
// connection refused"), else the message without go-redis's "redis: ".
func (h *causeHandler) take() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	msg := h.last
	h.last = ""
	if i := strings.LastIndex(msg, "dial "); i >= 0 {
		return msg[i:]
	}
	return strings.TrimPrefix(msg, "redis: ")
}
