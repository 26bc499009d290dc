// Package filestore keeps floodgate's state in one file, so that programs
// that run again and again (shell scripts, cron jobs, CGI programs,
// floodgate check) share their limits: every process that opens the file
// sees the units the others spent.
//
//	s, err := filestore.Open("/var/lib/myapp/limits.db")
//	defer s.Close()
//	l, err := floodgate.NewLimiter(policy, floodgate.WithStore(s))
//
// # Taking turns
//
// The file is a bbolt database (go.etcd.io/bbolt), which one process at a
// time may have open: opening it takes an exclusive lock (flock) on the
// file, and closing it, or the process ending in any way, releases the
// lock. So the store does not keep the file open: each call (Decide,
// Apply) opens it, carries out all its operations in one read-write
// transaction, commits, and closes it again, and the processes using the
// file take turns, each for the time of one transaction. A call that finds
// the file taken waits for it, trying again every few milliseconds, for
// up to the lock timeout (WithLockTimeout, default 10 s); then it fails
// with an error wrapping ErrLocked, having done nothing. The caller's
// context ends the wait sooner. The lock is not fair: under heavy
// contention a process may wait longer than others.
//
// Within one process, the calls of a Store take turns too, and those that
// arrive while a transaction is under way wait for the next one and share
// it: one open and one commit for all of them, each call still carried out
// as if alone, in the order they came. Several Stores on one file, in one
// process or many, exclude each other as processes do.
//
// A call whose context ends returns the context's error at once. While it
// waits for its transaction, or its transaction waits for the file, it is
// withdrawn and does nothing (a transaction whose callers have all left
// stops waiting for the file); once its transaction has the file, it may
// still take effect, its results lost.
//
// # Decisions
//
// Every decision is exactly the memory store's, and so package algo's,
// for every algorithm and operation: the store passes floodgate's
// conformance suite (package storetest), and a differential test replays
// random traces through memory and a file and demands identical
// decisions, instants, stamps and errors. An Apply is all or nothing: when
// an operation is denied or fails, the transaction writes nothing of that
// call, and every operation still reports its decision. A call that
// changes nothing (a denial, a peek) commits nothing.
//
// # Crashes
//
// A commit reaches the disk (fsync) before the call returns, so a
// decision reported admitted is in the file, even if the machine loses
// power a moment later. A process killed at any moment, even in the middle
// of a commit, leaves a valid file holding the state from before or after
// that transaction, never a part of it; its lock goes with it. A call that
// cannot write (a full disk, an I/O error) fails with the error, wrapped,
// and changes nothing. A value in the file that is not a state the store
// wrote is an error wrapping ErrCorrupt that names the key, and its call
// changes nothing; an OpReset on the key deletes it.
//
// # Damage
//
// A file damaged otherwise (a page overwritten, a file truncated under a
// process) fails each call that reads the damage with an error wrapping
// ErrCorrupt that names the file and says what bbolt found; the call's
// transaction is rolled back and the file's lock released, so other
// processes go on, and nothing hangs or panics. The next call opens the
// file afresh, so a copy restored in its place is used again at once,
// without a restart; while opening fails, a Store does not open the file
// again until it changes. A process that saves a copy now and then (a
// file of a few pages is copied in a moment) can so recover from a
// damaged disk block. bbolt trusts the headers of its pages; garbage that
// happens to look like one may still mislead it.
//
// The store creates its file only where there is none: it writes the new
// store beside the path and links it into place, so a file at the path is
// never a store in the making. An existing file that is not a floodgate
// store (an empty file, bytes that are not a bbolt database, or another
// program's bbolt database) is refused with ErrNotStore and left as it
// is, never made a new store in its place. A bbolt database that holds
// nothing is taken up. To start afresh, remove the file.
//
// # Layout
//
// Each limiter (name and policy) has a bbolt bucket of its own, named as
// Store.Table says, in which a key is the limiter's key, as is (the empty
// key, and keys that start with a NUL byte, after a NUL byte), and a value
// is the key's algo.State in its binary form. A key, so stored, may be up
// to 32 KiB (bolt.MaxKeySize); a longer one is an error wrapping
// store.ErrInvalidKey. The bucket "%floodgate" holds the store's own
// records: the format, the sweep's position and each table's clock. A new
// file gets mode 0666 less the umask, as os.Create gives: every user whose
// programs share the limits must be able to write it.
//
// A limiter that keeps its name and changes its policy keeps its keys'
// spent units: an op on a key that its bucket does not hold (and that no
// earlier call of the transaction wrote) starts from the key's state in
// the buckets of the same name under other policies, converted to the new
// policy at the op's time (algo.Policy.Convert); of several, the one that
// drains last. The former buckets keep their states, until they drain. A
// limiter of the default name (its policy's string) has no former policy:
// a new policy is a new name.
//
// # Size
//
// Keys whose state has drained (algo.Policy.ResetAt) are deleted, so the
// file does not grow without bound. A call that finds a key drained, as
// of its operation's time, deletes it, and each transaction that writes
// also looks at 32 other keys, going round the file from where the last
// one stopped, and deletes those drained as of their own table's clock:
// the latest time that the ops on that table used (kept in the file, per
// table). A table left empty goes too, with its clock. So an op on one
// table never deletes another table's state: floodgate check --now in
// 2030 on one policy, or a simulate run of a future trace, leaves alone
// the keys of a policy decided at the real time, and the other way round.
// A table with no clock yet (a file of an older version) is not swept
// until an op on it writes one.
//
// Dropping a drained state changes no decision as long as the times of a
// table's ops do not step back past it: processes whose clocks disagree a
// little may find a key fresh a little before their own clock says it
// drained, as the memory store does when time steps back. One table used
// at two clocks far apart (once with --now years ahead, then at the real
// time) is swept by the one furthest ahead; so that no key it deleted is
// admitted afresh at the real time, each table keeps a horizon, 64 times
// chosen by a hash of the key (512 bytes, kept after the table goes),
// the latest time a key the sweep deleted had drained: a key missing from
// the file and asked for units before its slot's time is refused until
// then. Keys that share a slot may be refused for that long too; a
// horizon in the past costs nothing. The space freed is reused; bbolt
// never shrinks the file.
//
// # Holding the file
//
// A long-running process that owns the file can keep it open from Open to
// Close (WithHold), saving the open and close of every call; but then
// every other process, and every other Store, waits for the file until
// Close, and fails with ErrLocked after its lock timeout.
//
// # Cached denials
//
// A store made WithDenyCache answers a flood of requests over their limit
// from memory, exactly, without a transaction. A denial writes nothing:
// the file changes only when a transaction commits, and bbolt ends every
// commit by writing one of its two meta pages (the page of the
// transaction id's parity, at offset 0 or one page in), each holding the
// id of its transaction and a checksum, after the pages it wrote; the
// file's last committed transaction is the higher id of the valid pages.
// So when a transaction of the store denies a decision, the store keeps
// the key's state as that transaction left it, with the transaction's id;
// a later decision on the key is decided by package algo on that state,
// at the decision's own time, which gives the Decision, instant and error
// the file would give, to the nanosecond, as long as no transaction has
// committed since. Before each such answer the store checks that: it
// reads the file's status (the same device and inode at the path, the
// same size and modification time) and both meta pages, through a mapping
// of its own, without the lock, and answers only if both pages are valid,
// with the page size it knows, and the higher names the transaction of
// its states. (A read of the mapping that faults, the file truncated
// under it, is a miss.) A meta page being written fails its checksum, and
// any doubt sends the decision to the file. When algo admits (a refill, a
// new window, a peek), the decision goes to the file, where alone units
// are spent. Only decisions are answered from the cache: a Table.Decide,
// an Apply of one OpDecide, and each OpDecide of an ApplyEach on a key
// that no earlier op of the call sends to the file.
//
// A transaction that commits is visible from the moment its meta page is
// written, which is before its caller returns; a cached answer given
// while the meta page still names the old transaction is the file's
// answer at that instant, as if the decision had taken the lock just
// before that commit. So there is no window: a reset, refund, admission
// or cancelled reservation by any process, or a Store of this one, is
// seen by the very next decision of every Store on the file (the tests
// check it on every trial). What that costs is that any commit to the
// file by another process or Store drops the whole cache (the store
// cannot tell which keys it wrote); the next denial of each key, a
// transaction as without the cache, fills it again. The store's own
// commits drop only the keys they wrote or swept, and keep the others: a
// transaction that began at the id of the cached states is the only one
// between them and the id it commits. A policy reload needs nothing: a
// table of another policy is another bucket, with entries of its own.
//
// A file replaced at the path (another inode, even one whose last
// transaction has the same id), truncated, or whose current meta page is
// damaged is seen by the check, and the decision goes to the file, which
// answers as without the cache (ErrCorrupt, ErrNotStore, the
// replacement's state). Damage written into a data page by something
// other than bbolt, without changing the size, is seen only through the
// modification time, which the kernel keeps at the granularity of its
// clock tick (a few milliseconds): damage within the tick of the file's
// last write leaves the cached states, those of the file before the
// damage, answered until the next commit. A writer that rewrites the file
// in place without bbolt, keeping its size and its meta pages'
// transaction id, and then sets the modification time back (touch -d) is
// not seen at all: the cache answers the states before the rewrite until
// the next commit. The check trusts that only bbolt writes the file and
// that nobody forges its times; a process that can do that can also write
// whatever states it likes into the file, cache or not. The cache needs
// flock (Linux, macOS, the BSDs); elsewhere it answers nothing.
//
// The cache and the freelist guard read bbolt's meta pages by offset,
// below its API; every offset is in boltformat.go, for the bbolt release
// go.mod requires, and a test checks each against a real bbolt database.
// Both fail closed: a cache that cannot read the meta pages as bbolt
// committed them answers nothing, and Store.CacheStats's Err says why; a
// file whose meta pages bbolt accepts and filestore cannot read is
// refused, wrapping ErrCorrupt.
//
// The cache is bounded in bytes (WithDenyCache), counting each key at its
// length and its state's encoded length plus 144 bytes; past the bound it
// drops other keys to make room. Store.CacheStats counts hits, fills,
// invalidations (keys this process wrote) and flushes (another process's
// commits, a file replaced); package prommetrics exports them. A cached
// denial costs a stat of the path and a read of the meta pages through a
// mapping of the file's first two pages (shared with every process's
// writes), and no lock; docs/benchmarks.md has the figures measured
// (BenchmarkDenied).
//
// # Cost
//
// A lone decision that spends units costs an open and close of the file
// and a commit with two fsyncs; holding the file (WithHold) saves the open
// and close. Calls from many goroutines share transactions, so under
// concurrency a decision costs a fraction of a commit. The disk's fsync
// bounds it all: where an fsync takes milliseconds (a spinning disk), so
// does a decision. docs/benchmarks.md has the figures measured
// (BenchmarkDecide).
package filestore
