package prommetrics

import (
	"errors"
	"fmt"
	"sync"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/failsafe"
	"github.com/floodgate/floodgate/memstore"
	"github.com/floodgate/floodgate/store"
	"github.com/prometheus/client_golang/prometheus"
)

// ErrInvalidName is returned by AddStore for an empty name or one
// already added.
var ErrInvalidName = errors.New("invalid store name")

// A Collector is a prometheus.Collector of floodgate's metrics (the
// package documentation lists them): the decisions of the limiters made
// with its Observers, and the counts of the stores added to it. Register
// it with a prometheus.Registerer; it reads the stores' counts at each
// scrape. Make one with New. A Collector is safe for concurrent use.
type Collector struct {
	mu        sync.Mutex
	policies  map[string]*Counts
	stores    []namedStore
	frontEnds map[string]func() FrontEndStats // by name
}

// namedStore is a store added to a Collector, with its label.
type namedStore struct {
	name string
	s    store.Store
}

// New returns a Collector with no limiters and no stores.
func New() *Collector {
	return &Collector{policies: make(map[string]*Counts)}
}

// Observer returns the Counts of the decisions labelled policy, to give to
// floodgate.WithObserver: the first call for a label makes them, and later
// calls return the same ones, so limiters given one label (a limiter
// remade by a reload, several inline policies) add up. Each label adds a
// few series, and about 2 KiB: give limiters' names, never keys.
func (c *Collector) Observer(policy string) *Counts {
	c.mu.Lock()
	defer c.mu.Unlock()
	o := c.policies[policy]
	if o == nil {
		o = new(Counts)
		c.policies[policy] = o
	}
	return o
}

// AddStore adds s's counts to the metrics, labelled store=name: a
// memstore.Store's keys and bytes, a failsafe.Store's state and counts,
// and the deny cache's of a redisstore.Store or filestore.Store made
// WithDenyCache, alone or behind a failsafe.Store. It fails, with an
// error wrapping ErrInvalidName, for an empty name or one already added.
func (c *Collector) AddStore(name string, s store.Store) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if name == "" {
		return fmt.Errorf("prommetrics: %w: empty", ErrInvalidName)
	}
	for _, ns := range c.stores {
		if ns.name == name {
			return fmt.Errorf("prommetrics: %w: %q already added", ErrInvalidName, name)
		}
	}
	c.stores = append(c.stores, namedStore{name, s})
	return nil
}

// Describe sends the descriptions of every metric the Collector may
// collect.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range allDescs {
		ch <- d
	}
}

// Collect sends the metrics: the decisions of each policy label, then each
// store's counts.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	policies := make(map[string]*Counts, len(c.policies))
	for name, o := range c.policies {
		policies[name] = o
	}
	stores := c.stores[:len(c.stores):len(c.stores)]
	frontEnds := make(map[string]func() FrontEndStats, len(c.frontEnds))
	for name, f := range c.frontEnds {
		frontEnds[name] = f
	}
	c.mu.Unlock()
	for name, f := range frontEnds {
		collectFrontEnd(ch, name, f())
	}
	for name, o := range policies {
		collectDecisions(ch, name, o)
	}
	for _, ns := range stores {
		if m, ok := ns.s.(memoryStats); ok {
			collectMemory(ch, ns.name, m.Stats())
		}
		if f, ok := ns.s.(failsafeStats); ok {
			collectFailsafe(ch, ns.name, f.Stats())
		}
		if d, ok := denyCacheOf(ns.s); ok {
			collectDenyCache(ch, ns.name, d.CacheStats())
		}
	}
}

// denyCacheStats is a store with a deny cache (a redisstore.Store, a
// filestore.Store), as the Collector sees it.
type denyCacheStats interface{ CacheStats() store.CacheStats }

// denyCacheOf returns s, or the store it wraps (Unwrap, as a
// failsafe.Store's), that has a deny cache.
func denyCacheOf(s store.Store) (denyCacheStats, bool) {
	for range 8 { // wrappers of wrappers, but never a cycle
		if d, ok := s.(denyCacheStats); ok {
			return d, d.CacheStats().MaxBytes > 0
		}
		w, ok := s.(interface{ Unwrap() store.Store })
		if !ok {
			return nil, false
		}
		s = w.Unwrap()
	}
	return nil, false
}

// memoryStats is a memory store, as the Collector sees it.
type memoryStats interface{ Stats() memstore.Stats }

// failsafeStats is a failsafe store, as the Collector sees it.
type failsafeStats interface{ Stats() failsafe.Stats }

var _ floodgate.Observer = (*Counts)(nil)
