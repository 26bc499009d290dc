package memstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algo"
)

// TestFoldedRecordsDrop makes 20,000 tables of one name and one key each,
// a second apart in the name's time, each live for 10 s, under a bound
// that folds them: the record of a folded table is dropped once it has
// drained, without its table being used again, so few are held at the
// end (before: 19,999).
func TestFoldedRecordsDrop(t *testing.T) {
	m := New(0, MaxBytes(1<<20))
	folded := 0
	for i := range 20_000 {
		tb, err := m.Table("envoyrls/domain", algo.MustParsePolicy(fmt.Sprintf("fixed-window %d/10s", i+1)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tb.Decide(context.Background(), "client", int64(i)*int64(time.Second), 1); err != nil {
			t.Fatal(err)
		}
		folded = max(folded, len(m.folded))
	}
	m.mu.Lock()
	held := len(m.folded)
	m.mu.Unlock()
	t.Logf("%d folded records at most, %d at the end; %d tables", folded, held, m.Stats().Tables)
	if folded == 0 || held > 2_000 {
		t.Fatalf("%d folded records at most, %d at the end of 20,000 tables", folded, held)
	}
}
