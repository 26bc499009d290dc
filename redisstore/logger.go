package redisstore

import (
	"context"
	"fmt"
	"log/slog"
)

// Logger returns a logger of go-redis's own messages (a dial that
// failed, a connection dropped by the pool) that writes each to l as a
// record at level Warn with the attribute from=go-redis, so that they take
// the program's log format: go-redis otherwise prints them to standard
// error as plain lines. Install it with redis.SetLogger; go-redis has one
// logger for the whole process, which the last call sets.
func Logger(l *slog.Logger) interface {
	Printf(ctx context.Context, format string, v ...any)
} {
	return goRedisLog{l}
}

type goRedisLog struct{ l *slog.Logger }

func (g goRedisLog) Printf(ctx context.Context, format string, v ...any) {
	if g.l.Enabled(ctx, slog.LevelWarn) {
		g.l.Log(ctx, slog.LevelWarn, fmt.Sprintf(format, v...), "from", "go-redis")
	}
}
