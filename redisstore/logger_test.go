package redisstore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/floodgate/floodgate/redisstore"
)

// A go-redis message becomes one record of the slog logger, in its
// format, at level Warn.
func TestLogger(t *testing.T) {
	var buf bytes.Buffer
	l := redisstore.Logger(slog.New(slog.NewJSONHandler(&buf, nil)))
	l.Printf(context.Background(), "redis: connection pool: failed to dial after %d attempts: %v", 5, "refused")
	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatalf("not one JSON record: %q: %v", buf.String(), err)
	}
	if rec["level"] != "WARN" || rec["from"] != "go-redis" || rec["msg"] != "redis: connection pool: failed to dial after 5 attempts: refused" {
		t.Errorf("record %v", rec)
	}
	buf.Reset()
	quiet := redisstore.Logger(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelError})))
	quiet.Printf(context.Background(), "dropped")
	if buf.Len() != 0 {
		t.Errorf("a record below the logger's level: %q", buf.String())
	}
}
