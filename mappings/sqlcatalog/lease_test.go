package sqlcatalog

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/mappings/node"
	"github.com/d1bridge/d1bridge/mappings/sqlcatalog/pgtest"
	"github.com/d1bridge/d1bridge/mappings/sqlcatalog/sqlcatalogtest"
)

// The leases as two processes sharing the catalog see them: two Catalog
// values on one SQLite file, and on one PostgreSQL schema.
func TestLeases(t *testing.T) {
	t.Parallel()
	t.Run("SQLite", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "catalog.db")
		open := func() *Catalog {
			c, err := OpenSQLite(path, WithNodeID(sqlcatalogtest.NodeID))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			return c
		}
		checkLeases(t, open(), open())
	})
	t.Run("Postgres", func(t *testing.T) {
		t.Parallel()
		dsn := pgtest.Start(t)
		checkLeases(t, openPostgres(t, dsn, WithCache(0, 0), WithRecordCache(0)), openPostgres(t, dsn, WithCache(0, 0), WithRecordCache(0)))
	})
}

func checkLeases(t *testing.T, a, b *Catalog) {
	t.Run("Fencing", func(t *testing.T) { checkLeaseFencing(t, a, b) })
	t.Run("Expiry", func(t *testing.T) { checkLeaseExpiry(t, a, b) })
	t.Run("OneWinner", func(t *testing.T) { checkLeaseOneWinner(t, a, b) })
}

// acquire is Acquire that must succeed or fail as want says.
func acquire(t *testing.T, c *Catalog, name, holder string, ttl time.Duration, want bool) node.Lease {
	t.Helper()
	l, ok, err := c.Acquire(t.Context(), name, holder, ttl)
	if err != nil || ok != want {
		t.Fatalf("%s acquiring %s: %+v, ok %v, %v; want ok %v", holder, name, l, ok, err, want)
	}
	return l
}

func lost(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, ErrLeaseLost) {
		t.Errorf("%s: %v, want ErrLeaseLost", what, err)
	}
}

// checkLeaseFencing: a lease is one holder's at a time; its epoch grows with
// each holder; a holder whose epoch is past can neither renew, nor
// checkpoint, nor release; the state outlives its holders.
func checkLeaseFencing(t *testing.T, a, b *Catalog) {
	ctx := t.Context()
	const name = "harvest:fencing"
	if l, err := b.Lease(ctx, name); err != nil || l.Epoch != 0 || l.Holder != "" {
		t.Fatalf("a lease never taken: %+v, %v", l, err)
	}
	la := acquire(t, a, name, "A", time.Minute, true)
	if la.Epoch != 1 || la.Holder != "A" || la.State != "" || time.Until(la.Expires) < 50*time.Second || time.Until(la.Expires) > 70*time.Second {
		t.Fatalf("A's first lease: %+v", la)
	}
	if l := acquire(t, b, name, "B", time.Minute, false); l.Holder != "A" || l.Epoch != 1 {
		t.Errorf("B refused a lease it is told is %+v, want A's at epoch 1", l)
	}
	if err := a.Checkpoint(ctx, name, 1, `{"cursor":"p2"}`, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := a.Renew(ctx, name, 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	if l, _ := b.Lease(ctx, name); l.State != `{"cursor":"p2"}` || l.Holder != "A" {
		t.Errorf("B reads %+v after A's checkpoint", l)
	}
	if err := a.Release(ctx, name, 1); err != nil {
		t.Fatal(err)
	}
	if l, _ := b.Lease(ctx, name); l.Holder != "" || !l.Expires.IsZero() || l.Epoch != 1 || l.State != `{"cursor":"p2"}` {
		t.Errorf("released: %+v, want no holder, epoch 1 and the state kept", l)
	}
	lost(t, "renewing a released lease", a.Renew(ctx, name, 1, time.Minute))

	lb := acquire(t, b, name, "B", time.Minute, true)
	if lb.Epoch != 2 || lb.State != `{"cursor":"p2"}` {
		t.Fatalf("B's lease after A released it: %+v, want epoch 2 and A's state", lb)
	}
	lost(t, "A renewing at epoch 1", a.Renew(ctx, name, 1, time.Minute))
	lost(t, "A checkpointing at epoch 1", a.Checkpoint(ctx, name, 1, `{"cursor":"stale"}`, time.Minute))
	lost(t, "A releasing at epoch 1", a.Release(ctx, name, 1))
	if l, _ := a.Lease(ctx, name); l.State != `{"cursor":"p2"}` || l.Holder != "B" || l.Epoch != 2 {
		t.Errorf("after A's stale writes: %+v, want B's lease at epoch 2 with the state unchanged", l)
	}
	// The same holder taking it again starts a new epoch: what it did
	// under the old one is fenced off too.
	if l := acquire(t, b, name, "B", time.Minute, true); l.Epoch != 3 {
		t.Errorf("B again: epoch %d, want 3", l.Epoch)
	}
	lost(t, "B checkpointing at its old epoch", b.Checkpoint(ctx, name, 2, "x", time.Minute))
	if err := b.Checkpoint(ctx, name, 3, `{"cursor":"p3"}`, time.Minute); err != nil {
		t.Error(err)
	}
	// Leases are independent of each other.
	if l := acquire(t, a, "harvest:other", "A", time.Minute, true); l.Epoch != 1 {
		t.Errorf("another lease: %+v", l)
	}
}

// checkLeaseExpiry: an expired lease goes to the next holder to ask, at a
// new epoch; the old holder is then fenced off. A lease that expired and that
// nobody took can still be renewed by its holder.
func checkLeaseExpiry(t *testing.T, a, b *Catalog) {
	ctx := t.Context()
	const name = "harvest:expiry"
	const ttl = 2 * time.Second // B's refusals below must come within it on a loaded machine
	la := acquire(t, a, name, "A", ttl, true)
	acquire(t, b, name, "B", ttl, false)
	time.Sleep(ttl + 100*time.Millisecond)
	if err := a.Renew(ctx, name, la.Epoch, ttl); err != nil {
		t.Fatalf("renewing an expired lease nobody took: %v", err)
	}
	acquire(t, b, name, "B", ttl, false)
	deadline := time.Now().Add(10 * time.Second)
	var lb node.Lease
	for {
		l, ok, err := b.Acquire(ctx, name, "B", ttl)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			lb = l
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("B never took the expired lease: %+v", l)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if lb.Epoch != la.Epoch+1 {
		t.Errorf("B took it at epoch %d, want %d", lb.Epoch, la.Epoch+1)
	}
	lost(t, "A renewing after B took it", a.Renew(ctx, name, la.Epoch, ttl))
	lost(t, "A checkpointing after B took it", a.Checkpoint(ctx, name, la.Epoch, "late", ttl))
	if l, _ := a.Lease(ctx, name); l.Holder != "B" || l.State == "late" {
		t.Errorf("after A's late writes: %+v", l)
	}
}

// checkLeaseOneWinner: holders racing through both catalogs for a free lease,
// round after round: exactly one wins each round, at the next epoch.
func checkLeaseOneWinner(t *testing.T, a, b *Catalog) {
	ctx := t.Context()
	const name = "harvest:race"
	const holders = 8
	epoch := int64(0)
	for round := range 15 {
		start := make(chan struct{})
		var wg sync.WaitGroup
		var mu sync.Mutex
		var won []node.Lease
		for i := range holders {
			c := a
			if i%2 == 1 {
				c = b
			}
			wg.Go(func() {
				<-start
				l, ok, err := c.Acquire(ctx, name, fmt.Sprintf("h%d-%d", round, i), time.Minute)
				if err != nil {
					t.Error(err)
				}
				if ok {
					mu.Lock()
					won = append(won, l)
					mu.Unlock()
				}
			})
		}
		close(start)
		wg.Wait()
		if len(won) != 1 {
			t.Fatalf("round %d: %d holders took the lease: %+v", round, len(won), won)
		}
		if won[0].Epoch != epoch+1 {
			t.Fatalf("round %d: epoch %d after %d", round, won[0].Epoch, epoch)
		}
		epoch = won[0].Epoch
		if err := a.Release(ctx, name, epoch); err != nil {
			t.Fatal(err)
		}
	}
}
