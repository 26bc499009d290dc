package redisstore

import (
	"context"
	"crypto/sha1"
	"embed"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// The script is one Lua chunk made of these files, in this order: each
// file's local functions are visible to the files after it. The last,
// batch.lua, defines run(KEYS, ARGV), which carries out one call.
//
// The counters' function, count(KEYS, ARGV), is counters.lua, a chunk of
// its own.
//
//go:embed lua/big.lua lua/pair.lua lua/bucket.lua lua/window.lua lua/log.lua lua/batch.lua lua/counters.lua
var luaFiles embed.FS

var scriptFiles = []string{"big.lua", "pair.lua", "bucket.lua", "window.lua", "log.lua", "batch.lua"}

// scriptBody returns the script's files, one after another.
func scriptBody(files ...string) string {
	var b strings.Builder
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

// The script reaches Redis in one of two forms, with the same body:
//
//   - a Redis Function library (Redis 7 and later), loaded once with
//     FUNCTION LOAD and called with FCALL. Its chunk runs once, at load;
//     a call runs only run(KEYS, ARGV), and parsed policies are kept
//     between calls. This is the store's first choice.
//   - a script (EVAL and EVALSHA), whose whole chunk runs on every call:
//     for a Redis before 7, or one that refuses FUNCTION LOAD (an ACL, a
//     managed service).
//
// The library holds the counters' function too, count (counters.lua),
// whose script form is a script of its own. The library and its functions
// are named after the bodies' SHA-1, so that processes running different
// versions of floodgate on one Redis each call their own.
var (
	body      = scriptBody(scriptFiles...)
	countBody = scriptBody("counters.lua")

	// function is the name of the library's decisions' function, and
	// library its source. The functions may touch keys of several hash
	// slots of the cluster node they run on (allow-cross-slot-keys: see
	// carryOnMaster).
	function = "floodgate_" + bodyHash()
	library  = "#!lua name=" + function + "\n" + body + countBody +
		register(decideForm.function, "run") + register(countForm.function, "count")

	// decideForm is the decisions' script (batch.lua's run), countForm the
	// counters' (counters.lua's count).
	decideForm = &form{function: function, script: newScript(body, "run")}
	countForm  = &form{function: function + "_count", script: newScript(countBody, "count")}
)

// A form is one function of the library, and the same code as a script.
type form struct {
	function string
	script   *redis.Script
}

// newScript returns the script form of the function fn of body.
func newScript(body, fn string) *redis.Script {
	// Redis 6.2 replicates a script's effects only when asked; from Redis
	// 7 this is what it always does, and the call is a no-op.
	return redis.NewScript("if redis.replicate_commands then redis.replicate_commands() end\n" +
		body + "return " + fn + "(KEYS, ARGV)\n")
}

// register returns the library's line registering its function name,
// whose callback is fn.
func register(name, fn string) string {
	return "redis.register_function{function_name='" + name + "', callback=" + fn + ", flags={'" + functionFlag + "'}}\n"
}

// functionFlag is the function's flag. The function's name covers it, so
// that a library loaded without it by another version is not taken for
// this one.
const functionFlag = "allow-cross-slot-keys"

func bodyHash() string {
	h := sha1.Sum([]byte(body + countBody + functionFlag))
	return hex.EncodeToString(h[:10])
}

// runner sends the script in the form the server takes: as a function
// until the server shows it has none (an unknown FCALL or FUNCTION LOAD, a
// refused FUNCTION LOAD), then as a script for the store's life.
type runner struct {
	client  redis.UniversalClient
	noFunc  atomic.Bool
	loads   atomic.Int64 // libraries loaded, on any server, for tests
	servers sync.Map     // the client of a server (redis.Cmdable) -> its *loader

	// afterLoad, when not nil, runs after each load of retry, before the
	// calls go again: a test's FUNCTION FLUSH at the worst moment.
	afterLoad func()
}

// A loader loads the library on one server, one load at a time.
type loader struct {
	turn  chan struct{} // holds a token while a load runs
	loads atomic.Int64  // loads done
}

// call sends the decisions' script on c, the client or one of its
// pipelines.
func (r *runner) call(ctx context.Context, c redis.Cmdable, keys []string, args []any) *redis.Cmd {
	return r.callAs(decideForm, ctx, c, keys, args)
}

// callAs sends the function of f, or its script, on c.
func (r *runner) callAs(f *form, ctx context.Context, c redis.Cmdable, keys []string, args []any) *redis.Cmd {
	if r.noFunc.Load() {
		return f.script.EvalSha(ctx, c, keys, args...)
	}
	return c.FCall(ctx, f.function, keys, args...)
}

// missing reports whether err says that the server lacks what call sent
// or refuses it: the function, the script, FCALL itself, or the right to
// run it (an ACL).
func missing(err error) bool {
	return err != nil && (redis.HasErrorPrefix(err, "NOSCRIPT") ||
		redis.HasErrorPrefix(err, "Function not found") ||
		redis.HasErrorPrefix(err, "unknown command") ||
		redis.HasErrorPrefix(err, "NOPERM"))
}

// serverOf returns the client of the server that cmd, a script call, went
// to: on a Redis Cluster, the master of its first key's slot, as go-redis
// knows it; else the client.
func (r *runner) serverOf(ctx context.Context, cmd *redis.Cmd) (redis.Cmdable, error) {
	cc, ok := r.client.(*redis.ClusterClient)
	if !ok {
		return r.client, nil
	}
	// FCALL, EVALSHA and EVAL take the function or script, the number of
	// keys, then the keys.
	args := cmd.Args()
	key, ok := "", len(args) > 3
	if ok {
		key, ok = args[3].(string)
	}
	if !ok {
		return nil, fmt.Errorf("a script call without a key: %v", args)
	}
	m, err := cc.MasterForKey(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("finding the master of key %q: %w", key, err)
	}
	return m, nil
}

// load makes a form of the script available on server, after a call there
// found it missing: it loads the library there, or, when the server has
// no functions, falls back to the script for good (noFunc). Only
// server's calls wait for its load, and only while ctx lasts: a master of
// a cluster that is down or stalls holds up no load on the others.
func (r *runner) load(ctx context.Context, server redis.Cmdable) error {
	if r.noFunc.Load() {
		return nil
	}
	l := r.loaderOf(server)
	// Many calls find the library missing at once (after a restart or a
	// FUNCTION FLUSH); the first loads it, the others wait and use it.
	seen := l.loads.Load()
	select {
	case l.turn <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("waiting for another call's load of the function library: %w", ctx.Err())
	}
	defer func() { <-l.turn }()
	if r.noFunc.Load() {
		return nil
	}
	if l.loads.Load() != seen {
		return nil
	}
	err := loadLibrary(ctx, server)
	switch {
	case err == nil:
		l.loads.Add(1)
		r.loads.Add(1)
		return nil
	case redis.HasErrorPrefix(err, "unknown command"), redis.HasErrorPrefix(err, "unknown subcommand"),
		redis.HasErrorPrefix(err, "NOPERM"):
		r.noFunc.Store(true)
		return nil
	}
	return fmt.Errorf("loading the function library: %w", err)
}

// loaderOf returns server's loader, made when first needed. go-redis keeps
// one client a node address, so the loaders are as many as the servers
// seen.
func (r *runner) loaderOf(server redis.Cmdable) *loader {
	if l, ok := r.servers.Load(server); ok {
		return l.(*loader)
	}
	l, _ := r.servers.LoadOrStore(server, &loader{turn: make(chan struct{}, 1)})
	return l.(*loader)
}

// again sends the decisions' script after load.
func (r *runner) again(ctx context.Context, c redis.Cmdable, eval bool, keys []string, args []any) *redis.Cmd {
	return againAs(decideForm, ctx, c, eval, keys, args)
}

// againAs sends the function of f, or its script, after load.
func againAs(f *form, ctx context.Context, c redis.Cmdable, eval bool, keys []string, args []any) *redis.Cmd {
	if eval {
		return f.script.Eval(ctx, c, keys, args...)
	}
	return c.FCall(ctx, f.function, keys, args...)
}

// maxLoads bounds the loads of one script call's retry: a FUNCTION FLUSH
// or SCRIPT FLUSH may land between a load and the call sent after it, and
// again after the next load.
const maxLoads = 4

// retry makes the calls whose commands in cmds found the script missing
// carry it out after all: it loads the script on their servers (load) and
// sends those calls again with resend(eval, which), which sets cmds[i] for
// each i in which, as long as some find it missing, up to maxLoads loads
// and while ctx lasts. A call that found the script missing did not run,
// so sending it again never carries out an op twice. A call that still
// finds it missing, or whose load fails, ends with an error that is not
// Redis's answer, which the store reports as ErrUnavailable (decode); with
// ctx's own error when ctx ended.
func (r *runner) retry(ctx context.Context, cmds []*redis.Cmd, resend func(eval bool, which []int)) {
	var which []int
	for loads := 0; ; loads++ {
		which = which[:0]
		for i, c := range cmds {
			if missing(c.Err()) {
				which = append(which, i)
			}
		}
		if len(which) == 0 {
			return
		}
		var err error
		switch {
		case ctx.Err() != nil:
			err = fmt.Errorf("the script went missing: %w", ctx.Err())
		case loads == maxLoads:
			err = fmt.Errorf("the script went missing after each of %d loads (%v)", maxLoads, cmds[which[0]].Err())
		}
		if err != nil {
			for _, i := range which {
				cmds[i] = failed(ctx, err)
			}
			return
		}
		if which = r.loadFor(ctx, cmds, which); len(which) == 0 {
			return
		}
		if r.afterLoad != nil {
			r.afterLoad()
		}
		resend(r.noFunc.Load(), which)
	}
}

// loadFor loads the script on the server of each call cmds[i], i in
// which, that found it missing: once a server, one server after another.
// It returns those of which whose server has it now, and sets the others'
// commands to their load's error.
func (r *runner) loadFor(ctx context.Context, cmds []*redis.Cmd, which []int) []int {
	loaded := map[redis.Cmdable]error{}
	ok := which[:0]
	for _, i := range which {
		server, err := r.serverOf(ctx, cmds[i])
		if err == nil {
			var seen bool
			if err, seen = loaded[server]; !seen {
				err = r.load(ctx, server)
				loaded[server] = err
			}
		}
		if err != nil {
			cmds[i] = failed(ctx, err)
			continue
		}
		ok = append(ok, i)
	}
	return ok
}

// failed returns a command that failed with err.
func failed(ctx context.Context, err error) *redis.Cmd {
	c := redis.NewCmd(ctx)
	c.SetErr(err)
	return c
}

// loadLibrary loads the library on server, a single Redis or a master of
// a cluster.
func loadLibrary(ctx context.Context, server redis.Cmdable) error {
	err := server.FunctionLoad(ctx, library).Err()
	if err != nil && strings.Contains(err.Error(), "already exists") {
		return nil // loaded meanwhile, by another caller or process
	}
	return err
}
