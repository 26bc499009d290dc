package redisstore

import (
	"embed"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The script is one Lua chunk made of these files, in this order: each
// file's local functions are visible to the files after it.
//
//go:embed lua/big.lua lua/pair.lua lua/bucket.lua lua/window.lua lua/log.lua lua/batch.lua
var luaFiles embed.FS

var scriptFiles = []string{"big.lua", "pair.lua", "bucket.lua", "window.lua", "log.lua", "batch.lua"}

// scriptSource returns the whole script, made once.
func scriptSource(files ...string) string {
	var b strings.Builder
	// Redis 6.2 replicates a script's effects only when asked; from Redis 7
	// this is what it always does, and the call is a no-op.
	b.WriteString("if redis.replicate_commands then redis.replicate_commands() end\n")
	for _, f := range files {
		src, err := luaFiles.ReadFile("lua/" + f)
		if err != nil {
			panic("redisstore: embedded script missing: " + err.Error())
		}
		b.Write(src)
		b.WriteByte('\n')
	}
	return b.String()
}

// script decides every batch: see lua/batch.lua for its arguments and reply.
var script = redis.NewScript(scriptSource(scriptFiles...))
